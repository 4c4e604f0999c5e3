"""In-process search speed and memory at 2k, 10k and 100k tools (a benchmark script, not a test).

    .venv/bin/python bench/bench_search.py [--sizes 2000,10000,100000] [--queries 300] [--json PATH]
    .venv/bin/python bench/bench_search.py --sizes 100000 --tool-vectors realistic  # every tool's own vectors
    .venv/bin/python bench/bench_search.py --sizes 100000 --tool-vectors realistic --fill-only  # encode, resumable
    make bench-search

Each size runs in its own child process, so the memory figure is that of one search process: Django,
the embedding model and one index snapshot. Per size it reports:

- build: seconds to build the in-memory snapshot (tokenize, sparse matrix, vector table) from documents
  already in memory (a process does this when it starts; the database read is extra);
- update: a sync changing ``--changes`` of the tools (default 1%: half changed, a quarter new, a quarter
  removed): seconds to encode their texts with the real model (in a separate indexing process), and to
  update the snapshot from them
  (every other tool's tokens and vectors reused); target: encode + update <= 1.1x encode. The queries
  then run on the updated snapshot;
- encode: the single-query encoding time of the real model (median, p95): the floor;
- search: backend search with the query vector given (median, p95);
- tool_search: the public service end to end in the process (validation, status, encode, search);
- ratio: p95 tool_search / p95 encode, against the targets (10k <= 1.5x, 100k <= 2x);
- rss: resident memory of each process after the run (target at 100k: <= 1 GB including the model), with
  ``--workers`` processes (default 2) running each size at once as uvicorn workers would; latency figures
  are the first process's; PSS splits the pages they share;
- CPU per request: process CPU time of the encode, the search and tool_search (mean), steady where wall
  times move with the machine's load.

A before/after in one sitting: ``SCOUT_BENCH_ROOT=<other checkout> python bench/bench_search.py ...`` runs
this script against that checkout's code; alternate it with a run on this one.

Catalogs are synthetic, built in memory and never written: the public catalogs under ../shared/eval
(SCOUT_EVAL_DIR) sampled and, past their size, copied onto renamed servers with descriptions perturbed
(words dropped and swapped), so vocabulary and document lengths stay realistic. Tool vectors are random
unit vectors of the model's dimension, as many per tool as its documents produce (document + summary
[+ examples]): encoding 100k tools x several texts on 2 cores would take two to three hours (10k tools, 21k
texts: 12 to 17 minutes), and scan cost does not depend on the values. Queries are encoded by the real
model: the request texts of the public query files when present (read at run time, never stored), else
requests built from tool names.

The scan's cost does not depend on the values, but the answers do: against random tool vectors nearly every
multi-step request is withheld by its first search, so tool_search encodes its parts alone and searches again
(a second model call and scan; ``retried`` counts them). ``--tool-vectors public`` is a realistic variant
beside the target's catalog: the public tools' own model vectors (encoded once into scout_eval's cache,
SCOUT_SEARCH_EVAL_CACHE_DIR) and their copies' vectors near their source's (``public_vectors``).
``--tool-vectors realistic`` gives every tool, copies included (each on its own renamed server, its description
perturbed: distinct texts), its own texts' model vectors, encoded once and kept under var/bench-vectors (outside
git; ``realistic_vectors``): the first fill takes hours on 2 cores, so ``--fill-only`` encodes into the cache and
stops, resumable (``--encode-budget`` caps the texts a run encodes); a tool whose texts are not all cached yet
is served as ``public`` serves a copy, and the run says how many were. The target is the random catalog's
ratio; report both. ``ratio_p95_cpu`` is the ratio with CPU times (p95 of
tool_search's process CPU over p95 of the encode's), steadier than wall times on a busy machine.

Threads: one torch thread and one BLAS thread (SCOUT_SEARCH_TORCH_THREADS / SCOUT_SEARCH_BLAS_THREADS,
OMP_WAIT_POLICY=PASSIVE), set before numpy loads: both pools at 2 threads on 2 cores push p95 up ~8x.
"""

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

# SCOUT_BENCH_ROOT: another checkout to measure (e.g. the base commit, for a before/after in one sitting).
ROOT = Path(os.environ.get("SCOUT_BENCH_ROOT") or Path(__file__).resolve().parent.parent).resolve()
TARGETS = {10_000: 1.5, 100_000: 2.0}
MEMORY_TARGET_MB = 1024
UPDATE_TARGET = 1.1  # a sync's new snapshot: at most 1.1x the time to encode the changed tools
COPY_NOISE = 0.2  # --tool-vectors public: noise norm on a copy's vectors (cosine .98 to its source, see public_vectors)
REALISTIC_CACHE = ROOT / "var" / "bench-vectors"  # --tool-vectors realistic: text -> model vector, outside git
FILL_CHUNK = 1024  # texts encoded between two saves of the realistic cache (a stopped fill loses at most these)


def _setup_process() -> None:
    """Thread pools and Django, before numpy or torch is imported."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", os.environ.get("SCOUT_SEARCH_BLAS_THREADS", "1"))
    os.environ.setdefault("OMP_NUM_THREADS", os.environ.get("SCOUT_SEARCH_TORCH_THREADS", "1"))
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")  # a throwaway key for this process
    sys.path.insert(0, str(ROOT))
    # Celery's Django fixup puts the working directory first on sys.path at setup: from ROOT, the measured
    # checkout's code is imported, not the code of the directory this was run from.
    os.chdir(ROOT)
    import django

    django.setup()


def eval_dir() -> Path:
    return Path(os.environ.get("SCOUT_EVAL_DIR") or ROOT.parent / "shared" / "eval")


def pss_mb() -> float:
    """Proportional set size in MiB: shared pages (the model's libraries, a shared file) split by sharer."""
    try:
        for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MiB, from /proc."""
    values = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, amount = line.split(":", 1)
            values[key] = int(amount.split()[0]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


# -- synthetic catalog -----------------------------------------------------------------------------------


def base_docs():
    """Tools of every public catalog, else a small template catalog when ../shared/eval is absent."""
    from search.documents import ToolDoc
    from search.evaluation import load_catalogs

    paths = sorted(eval_dir().glob("catalog-*.jsonl"))
    if paths:
        return load_catalogs(paths), f"{len(paths)} public catalogs in {eval_dir()}"
    verbs = ["get", "list", "create", "update", "delete", "search", "send", "export"]
    nouns = ["issue", "file", "message", "invoice", "user", "event", "report", "order", "ticket", "page"]
    docs = []
    for verb in verbs:
        for noun in nouns:
            pk = len(docs) + 1
            docs.append(
                ToolDoc(
                    pk=pk,
                    tool_id=f"{noun}s::{verb}_{noun}",
                    name=f"{verb}_{noun}",
                    server=f"{noun}s",
                    description=f"{verb.title()} a {noun} by id or by its attributes.",
                    parameters=(f"{noun}_id (string, required): the {noun}",),
                )
            )
    return docs, "a template catalog (../shared/eval absent)"


def _perturb(text: str, rng: random.Random) -> str:
    words = text.split()
    if len(words) > 4:
        words = [w for w in words if rng.random() > 0.15]  # drop ~15% of the words
        for _ in range(max(1, len(words) // 10) if len(words) > 1 else 0):  # and swap a few neighbours
            i = rng.randrange(len(words) - 1)
            words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def synthetic_docs(size: int, seed: int = 7):
    """``size`` ToolDocs: a sample of the public tools, then perturbed copies on renamed servers."""
    from dataclasses import replace

    docs, origin = base_docs()
    rng = random.Random(seed)
    if size <= len(docs):
        picked = rng.sample(docs, size)
        return [replace(d, pk=i + 1) for i, d in enumerate(picked)], origin
    result = [replace(d, pk=i + 1) for i, d in enumerate(docs)]
    replica = 0
    while len(result) < size:
        replica += 1
        for doc in docs:
            if len(result) >= size:
                break
            server = f"{doc.server}-r{replica}"
            result.append(
                replace(
                    doc,
                    pk=len(result) + 1,
                    tool_id=f"{server}::{doc.name}",
                    server=server,
                    server_name=f"{doc.server_name} {replica}",
                    description=_perturb(doc.description, rng),
                )
            )
    return result, origin + f", perturbed copies on {replica} renamed server sets"


def random_vectors(docs, dim: int, seed: int = 11):
    """Unit vectors per tool, as many as its dense texts (document, summary, examples)."""
    import numpy as np

    from search.engine.snapshot import DocVectors

    rng = np.random.default_rng(seed)
    result = {}
    for doc in docs:
        pairs = doc.dense_texts()
        block = rng.standard_normal((len(pairs), dim), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        result[doc.pk] = DocVectors(block, tuple(k for k, _ in pairs), tuple(t for _, t in pairs), None)
    return result


def public_vectors(docs, encoder, noise: float, seed: int = 11):
    """Model vectors per tool (``--tool-vectors public``, a realistic variant beside the random one): each public
    tool's dense texts encoded by the real model (cached on disk as scout_eval caches them, so a rerun encodes
    nothing), and each perturbed copy (``synthetic_docs``: base tool k's copies are at positions k + r x base)
    its source's vectors with Gaussian noise of norm ``noise`` added, renormalized (cosine to the source about
    1 / sqrt(1 + noise^2)): a copy's texts are its source's with words dropped and swapped, and encoding 100k
    tools would take hours."""
    import numpy as np
    from django.conf import settings

    from search.encoder import model_key
    from search.evaluation import EmbeddingCache, doc_vectors

    base, _ = base_docs()
    if len(docs) <= len(base):  # a sample of the public tools (renumbered): found by tool id
        at = {doc.tool_id: k for k, doc in enumerate(base)}
        sources = [at[doc.tool_id] for doc in docs]
    else:  # every public tool, then copies of each in turn
        sources = [position % len(base) for position in range(len(docs))]
    used = sorted(set(sources))
    cache = EmbeddingCache(Path(settings.SCOUT_SEARCH_EVAL_CACHE_DIR), model_key(), encoder.encode)
    encoded = doc_vectors([base[k] for k in used], cache.vectors)  # keyed by the public tool's own pk
    rng = np.random.default_rng(seed)
    result = {}
    for position, (doc, k) in enumerate(zip(docs, sources, strict=True)):
        own = encoded[base[k].pk]
        if position < len(base):  # the public tool itself
            result[doc.pk] = own
            continue
        result[doc.pk] = _noisy(own, doc.dense_texts(), rng, noise)
    return result


def _noisy(own, pairs, rng, noise: float):
    """A copy's vectors from its source's (``own``: DocVectors), each with Gaussian noise of norm ``noise``."""
    import numpy as np

    from search.engine.snapshot import DocVectors

    block = own.vectors[np.minimum(np.arange(len(pairs)), len(own.vectors) - 1)].astype(np.float32)
    block += rng.standard_normal(block.shape, dtype=np.float32) * np.float32(noise / np.sqrt(block.shape[1]))
    block /= np.linalg.norm(block, axis=1, keepdims=True)
    return DocVectors(block, tuple(kind for kind, _ in pairs), tuple(t for _, t in pairs), None)


def realistic_cache(encoder):
    """The realistic catalog's vectors on disk (sha256 of a text -> its model vector), shared by every run."""
    from search.evaluation import EmbeddingCache

    return EmbeddingCache(REALISTIC_CACHE, encoder.key, encoder.encode)


def realistic_fill(docs, encoder, budget: int | None, no_progress: bool = True) -> int:
    """Encode the dense texts of ``docs`` not cached yet (at most ``budget``; None: all), in order (the public
    tools first, then each round of copies), saved every FILL_CHUNK texts: stopped at any moment, the next run
    goes on from there. Returns the texts encoded."""
    cache = realistic_cache(encoder)
    missing = list(dict.fromkeys(t for doc in docs for _, t in doc.dense_texts() if cache.key(t) not in cache.index))
    missing = missing[:budget] if budget is not None else missing
    started = time.perf_counter()
    for start in range(0, len(missing), FILL_CHUNK):
        cache.vectors(missing[start : start + FILL_CHUNK])
        done = start + len(missing[start : start + FILL_CHUNK])
        if not no_progress or done == len(missing) or (start // FILL_CHUNK) % 5 == 0:
            rate = done / max(time.perf_counter() - started, 1e-9)
            print(f"realistic vectors: {done} of {len(missing)} texts encoded ({rate:.1f}/s)", file=sys.stderr)
    return len(missing)


def realistic_vectors(docs, encoder, budget: int | None, noise: float, seed: int = 11):
    """Each tool's own texts' model vectors (``--tool-vectors realistic``): ``synthetic_docs`` makes every copy
    distinct (its own server, a perturbed description), and each text is encoded by the real model once, kept
    under REALISTIC_CACHE. Texts not cached yet are encoded first, up to ``budget``. A tool whose texts are still
    not all cached takes its source's vectors with noise (as ``public_vectors``). Returns (vectors, tools with
    their own vectors, texts encoded in this run)."""
    import numpy as np

    from search.engine.snapshot import DocVectors

    encoded = realistic_fill(docs, encoder, budget)
    cache = realistic_cache(encoder)
    base, _ = base_docs()
    rng = np.random.default_rng(seed)
    result, own = {}, 0
    for position, doc in enumerate(docs):
        pairs = doc.dense_texts()
        keys = [cache.key(t) for _, t in pairs]
        if all(k in cache.index for k in keys):
            rows = cache.matrix[[cache.index[k] for k in keys]].astype(np.float32)
            result[doc.pk] = DocVectors(rows, tuple(k for k, _ in pairs), tuple(t for _, t in pairs), None)
            own += 1
        elif position >= len(base):  # a copy a later fill will encode: its source (a public tool) with noise
            result[doc.pk] = _noisy(result[docs[position % len(base)].pk], pairs, rng, noise)
        else:
            raise SystemExit("realistic vectors: the public tools are not all encoded yet (run with --fill-only)")
    return result, own, encoded


def synthetic_changes(docs, count: int, seed: int = 13):
    """A sync's worth of changes: ``count`` tools, half with a changed description, a quarter new (pks past
    the last) and a quarter removed. Returns (changed and new docs, removed pks)."""
    from dataclasses import replace

    rng = random.Random(seed)
    picked = rng.sample(list(docs), count)
    n_changed, n_new = count - 2 * (count // 4), count // 4
    changed = [replace(d, description=_perturb(d.description, rng) + " (revised)") for d in picked[:n_changed]]
    top = max(d.pk for d in docs)
    new = [
        replace(d, pk=top + i + 1, tool_id=f"{d.server}-new::{d.name}", server=f"{d.server}-new")
        for i, d in enumerate(picked[n_changed : n_changed + n_new])
    ]
    return changed + new, [d.pk for d in picked[n_changed + n_new :]]


def _encode_timed(texts: list[str]):
    """In the indexing process: encode ``texts`` with the real model; (seconds, vectors)."""
    from search.encoder import encoder_get

    encoder = encoder_get()
    encoder.encode(["warm up"])
    started = time.perf_counter()
    matrix = encoder.encode(texts)
    return time.perf_counter() - started, matrix


def measure_update(snapshot, docs, count: int):
    """A sync of ``count`` tools at this size: encode their texts with the real model (what indexing must
    pay, in another process, as a Celery worker does: the model's working memory for a batch of documents
    is not the serving process's), then update the snapshot (every other tool's tokens and vectors
    reused). Returns the updated snapshot and (encode seconds, update seconds)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import numpy as np

    from search.engine.snapshot import DocVectors

    incoming, removed = synthetic_changes(docs, count)
    texts = [t for doc in incoming for _, t in doc.dense_texts()]
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn, initializer=_setup_process) as indexer:
        encode_s, matrix = indexer.submit(_encode_timed, texts).result()
    vectors, offset = {}, 0
    for doc in incoming:
        pairs = doc.dense_texts()
        block = np.asarray(matrix[offset : offset + len(pairs)], np.float32)
        offset += len(pairs)
        vectors[doc.pk] = DocVectors(block, tuple(k for k, _ in pairs), tuple(t for _, t in pairs), None)
    updated_at = time.perf_counter()
    updated = snapshot.updated(incoming, vectors, removed, generation=snapshot.generation)
    done = time.perf_counter()
    return updated, (encode_s, done - updated_at)


def bench_queries(docs, count: int, seed: int = 3) -> tuple[list[str], str]:
    """Request texts: the public query files read at run time (never stored), else built from tool names."""
    rng = random.Random(seed)
    texts = []
    for path in sorted(eval_dir().glob("queries-*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            texts += [json.loads(line)["query"] for line in handle if line.strip()]
    texts = [t for t in texts if isinstance(t, str) and 0 < len(t) <= 1000]
    if len(texts) >= count:
        return rng.sample(texts, count), "public query files (sampled)"
    names = [re.sub(r"[_\-]+", " ", d.name) for d in rng.sample(list(docs), min(count, len(docs)))]
    return [f"please {n} for me" for n in names][:count], "requests built from tool names"


# -- one size, in this process ---------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def summary(values_ms: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values_ms), "p95": percentile(values_ms, 0.95)}


def run_size(
    size: int,
    n_queries: int,
    warmup: int,
    no_progress: bool = False,
    changes: float = 0.01,
    tool_vectors: str = "random",
    copy_noise: float = COPY_NOISE,
    encode_budget: int | None = None,
) -> dict:
    import gc

    import numpy as np
    from django.core.cache import cache
    from threadpoolctl import threadpool_info

    from search import selectors
    from search.backends import SearchRequest, backend_get
    from search.backends.embedded import release_memory
    from search.encoder import encoder_get
    from search.engine.decompose import request_parts
    from search.engine.snapshot import IndexSnapshot
    from search.services import tool_search

    rss_start, _ = rss_mb()
    encoder = encoder_get()
    rss_model, _ = rss_mb()
    docs, catalog_origin = synthetic_docs(size)
    own_vectors, realistic_encoded = 0, 0
    if tool_vectors == "public":
        vectors = public_vectors(docs, encoder, copy_noise)
    elif tool_vectors == "realistic":
        vectors, own_vectors, realistic_encoded = realistic_vectors(docs, encoder, encode_budget, copy_noise)
    else:
        vectors = random_vectors(docs, encoder.dim)
    n_vectors = sum(len(v.vectors) for v in vectors.values())

    gc.collect()
    started = time.perf_counter()
    from search.backends import embedded

    # Either side of an A/B (SCOUT_BENCH_ROOT): the choice was named half_precision before int8 tables.
    choose = getattr(embedded, "quantized_table", None) or embedded.half_precision
    half = choose(vectors)
    keyword = "quantized" if hasattr(embedded, "quantized_table") else "half"
    scanned = "int8" if keyword == "quantized" else "float16"
    snapshot = IndexSnapshot(docs, vectors, generation="bench", model_key=encoder.key, **{keyword: half})
    build_s = time.perf_counter() - started
    del vectors
    release_memory()  # as the embedded backend does after every build
    n_changes = max(1, round(size * changes))
    snapshot, (update_encode_s, update_s) = measure_update(snapshot, docs, n_changes)
    release_memory(collect=False)  # as the embedded backend does after an update

    # Serve this snapshot as the current generation without a database: the generation token is cached.
    backend = backend_get("embedded")
    backend._snapshot = snapshot
    if hasattr(selectors, "generation_token_keep"):
        selectors.generation_token_keep("bench", seconds=float("inf"))
    else:  # the other side of an A/B (SCOUT_BENCH_ROOT) before speed11: the token was read from the cache
        cache.set(selectors.GENERATION_CACHE_KEY, "bench", timeout=None)
    visible = frozenset(int(pk) for pk in snapshot.pks)
    queries, query_origin = bench_queries(docs, n_queries + warmup)

    encode_ms, search_ms, service_ms, single_ms, single_encode_ms, degraded, multi = [], [], [], [], [], 0, 0
    multi_ms, multi_cpu_ms, single_cpu_ms = [], [], []  # multi-step requests' tool_search; CPU of each kind
    cpu_ms = {"encode": [], "search": [], "tool_search": []}  # process CPU per request: steady on a busy machine
    needed_ms = []  # per request: encoding every text it needs (the request and its steps, one batch)
    # A multi-step request whose first search is withheld is searched again with its parts encoded alone
    # (search.services.tool_search): with one-pass parts, the one call of encode_queries on a multi-step
    # request's path (a single-step request is encoded through it). Counted, not changed.
    retries, retried, first_only_ms, first_only_cpu_ms = [0], 0, [], []
    model_calls, retried_calls = [], []  # model calls per tool_search: all requests, the retried ones
    encode_queries = encoder.encode_queries

    def counted(*args, **kwargs):
        retries[0] += 1
        return encode_queries(*args, **kwargs)

    encoder.encode_queries = counted
    from catalog.progress import progress_reporter

    # stderr is the terminal's (the driver passes it through); stdout carries the JSON row.
    with progress_reporter(sys.stderr, f"{size} tools", unit="queries", disabled=no_progress) as progress:
        for i, query in enumerate(queries):
            c0, t0 = time.process_time(), time.perf_counter()
            vector = encoder.encode([query])[0]
            c1, t1 = time.process_time(), time.perf_counter()
            request = SearchRequest(query=query, visible=visible, top_k=5, fusion="convex", query_vector=vector)
            backend.search(request)
            c2, t2 = time.process_time(), time.perf_counter()
            before, batches = retries[0], encoder.batcher.batches
            result = tool_search(query=query, visible=visible, top_k=5)
            c3, t3 = time.process_time(), time.perf_counter()
            calls = encoder.batcher.batches - batches  # model calls on tool_search's path (the micro-batcher's)
            parts = request_parts(query)
            needed = t1 - t0
            if parts:  # encode(), not encode_queries(): that one's cache would serve tool_search later
                started = time.perf_counter()
                encoder.encode([query, *parts])
                needed = time.perf_counter() - started
            progress(i + 1, len(queries))
            if i < warmup:
                continue
            degraded += int(result.degraded)
            again = bool(parts) and encoder.one_pass and retries[0] > before
            retried += int(again)
            model_calls.append(calls)
            if again:
                retried_calls.append(calls)
            if not again:  # the requests served from their first search
                first_only_ms.append((t3 - t2) * 1000)
                first_only_cpu_ms.append((c3 - c2) * 1000)
            encode_ms.append((t1 - t0) * 1000)
            for key, spent in (("encode", c1 - c0), ("search", c2 - c1), ("tool_search", c3 - c2)):
                cpu_ms[key].append(spent * 1000)
            needed_ms.append(needed * 1000)
            search_ms.append((t2 - t1) * 1000)
            service_ms.append((t3 - t2) * 1000)
            if parts:  # a multi-step request: tool_search also encodes and scores each part
                multi += 1
                multi_ms.append((t3 - t2) * 1000)
                multi_cpu_ms.append((c3 - c2) * 1000)
            else:
                single_ms.append((t3 - t2) * 1000)
                single_encode_ms.append((t1 - t0) * 1000)
                single_cpu_ms.append((c3 - c2) * 1000)
    rss_end, rss_peak = rss_mb()
    encode, search, service = summary(encode_ms), summary(search_ms), summary(service_ms)
    single = summary(single_ms) if single_ms else {"median": 0.0, "p95": 0.0}
    single_encode = summary(single_encode_ms) if single_encode_ms else {"median": 0.0, "p95": 1.0}
    blas = [f"{p.get('internal_api')}:{p.get('num_threads')}" for p in threadpool_info()]
    return {
        "tools": size,
        "vectors": n_vectors,
        "dim": encoder.dim,
        "build_s": build_s,
        "update_tools": n_changes,
        "update_encode_s": update_encode_s,
        "update_s": update_s,
        "update_ratio": (update_encode_s + update_s) / update_encode_s,
        "encode_ms": encode,
        "search_ms": search,
        "tool_search_ms": service,
        "ratio_p95": service["p95"] / encode["p95"],
        "cpu_ms": {key: statistics.fmean(values) for key, values in cpu_ms.items()},
        # The ratio's CPU form: p95 of tool_search's CPU over p95 of the encode's, steadier on a busy machine.
        "ratio_p95_cpu": percentile(cpu_ms["tool_search"], 0.95) / percentile(cpu_ms["encode"], 0.95),
        "encode_needed_ms": summary(needed_ms),
        "ratio_p95_needed": service["p95"] / summary(needed_ms)["p95"],
        "tool_search_single_step_ms": single,
        "encode_single_step_ms": single_encode,
        "ratio_p95_single_step": single["p95"] / single_encode["p95"],
        "multi_step_queries": multi,
        # Multi-step requests against the same single-query encode p95 as the other ratios.
        "tool_search_multi_step_ms": summary(multi_ms) if multi_ms else {"median": 0.0, "p95": 0.0},
        "ratio_p95_multi_step": (summary(multi_ms)["p95"] / encode["p95"]) if multi_ms else 0.0,
        "cpu_ms_tool_search_single_step": statistics.fmean(single_cpu_ms) if single_cpu_ms else 0.0,
        "cpu_ms_tool_search_multi_step": statistics.fmean(multi_cpu_ms) if multi_cpu_ms else 0.0,
        "target_ratio": TARGETS.get(size),
        "rss_mb": rss_end,
        "pss_mb": pss_mb(),
        "rss_peak_mb": rss_peak,
        "rss_model_mb": rss_model - rss_start,
        "queries": len(encode_ms),
        "degraded": degraded,
        "retried": retried,
        "model_calls_per_request": statistics.fmean(model_calls) if model_calls else 0.0,
        "model_calls_per_retried_request": statistics.fmean(retried_calls) if retried_calls else 0.0,
        # The same ratios over the requests not searched again (what the p95 would be without the retry).
        "ratio_p95_first_search": percentile(first_only_ms, 0.95) / encode["p95"],
        "ratio_p95_cpu_first_search": percentile(first_only_cpu_ms, 0.95) / percentile(cpu_ms["encode"], 0.95),
        # torch is only imported by the torch runtime: the ONNX runtime's RSS does not include it.
        "encoder": encoder.runtime,
        "threads": {
            "torch": sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None,
            "blas": blas,
        },
        "catalog": catalog_origin,
        "query_source": query_origin,
        "tool_vectors": (
            f"public tools' model vectors, copies with noise {copy_noise} (see public_vectors)"
            if tool_vectors == "public"
            else f"each tool's own texts' model vectors ({own_vectors} of {size} tools; the rest their source's "
            f"with noise {copy_noise}; {realistic_encoded} texts encoded by this run; see realistic_vectors)"
            if tool_vectors == "realistic"
            else "random unit vectors (see docstring)"
        )
        + "; queries encoded by the real model",
        "numpy": np.__version__,
        "vector_precision": f"{scanned} + exact re-score" if half else "float32",
    }


# -- driver ----------------------------------------------------------------------------------------------


def print_table(rows: list[dict]) -> None:
    print()
    header = (
        f"{'tools':>7} {'vectors':>8} {'build s':>8} {'encode med/p95 ms':>18} {'search med/p95 ms':>18} "
        f"{'tool_search med/p95':>20} {'ratio p95':>9} {'1-step':>7} {'target':>7} {'RSS MB':>7} {'peak MB':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        target = f"<={r['target_ratio']}x" if r["target_ratio"] else "-"
        print(
            f"{r['tools']:>7} {r['vectors']:>8} {r['build_s']:>8.2f} "
            f"{r['encode_ms']['median']:>8.2f} / {r['encode_ms']['p95']:>6.2f} "
            f"{r['search_ms']['median']:>8.2f} / {r['search_ms']['p95']:>6.2f} "
            f"{r['tool_search_ms']['median']:>9.2f} / {r['tool_search_ms']['p95']:>7.2f} "
            f"{r['ratio_p95']:>8.2f}x {r['ratio_p95_single_step']:>6.2f}x {target:>7} "
            f"{r['rss_mb']:>7.0f} {r['rss_peak_mb']:>7.0f}"
        )
    print()
    for r in rows:
        verdicts = []
        if r["target_ratio"]:
            ok = r["ratio_p95"] <= r["target_ratio"]
            verdicts.append(f"latency {'meets' if ok else 'MISSES'} {r['target_ratio']}x ({r['ratio_p95']:.2f}x)")
        if r["tools"] >= 100_000:
            ok = r["rss_mb"] <= MEMORY_TARGET_MB
            verdicts.append(f"memory {'meets' if ok else 'MISSES'} 1 GB ({r['rss_mb']:.0f} MB)")
        if verdicts:
            print(f"{r['tools']:>7} tools: " + "; ".join(verdicts))
    first = rows[0]
    for r in rows:
        rss = ", ".join(f"{v:.0f}" for v in r["rss_mb_per_worker"])
        pss = ", ".join(f"{v:.0f}" for v in r["pss_mb_per_worker"])
        print(f"{r['tools']:>7} tools, {r['workers']} processes at once: RSS MB {rss}; PSS MB {pss}")
    print(f"vectors: {first['vector_precision']}")
    print(f"catalog: {first['catalog']}")
    print(f"tool vectors: {first['tool_vectors']}; queries: {first['query_source']}, {first['queries']} per size")
    for r in rows:
        ok = r["update_ratio"] <= UPDATE_TARGET
        print(
            f"{r['tools']:>7} tools, a sync of {r['update_tools']} tools (half changed, a quarter new, a quarter "
            f"removed): encode {r['update_encode_s']:.2f} s + snapshot update {r['update_s']:.2f} s = "
            f"{r['update_ratio']:.3f}x the encode ({'meets' if ok else 'MISSES'} <= {UPDATE_TARGET}x); "
            f"a whole build takes {r['build_s']:.2f} s"
        )
    blas = ", ".join(first["threads"]["blas"]) or "-"
    print(f"encoder: {first['encoder']}; threads: torch {first['threads']['torch']}, BLAS {blas}")
    for r in rows:
        cpu = r["cpu_ms"]
        print(
            f"{r['tools']:>7} tools: CPU per request (mean, ms): encode {cpu['encode']:.2f}, search "
            f"{cpu['search']:.2f}, tool_search {cpu['tool_search']:.2f} ({cpu['tool_search'] / cpu['encode']:.2f}x "
            f"the encode); p95 tool_search CPU / p95 encode CPU {r['ratio_p95_cpu']:.2f}x"
        )
    print("ratio = p95 tool_search (encode + search, in process) / p95 single-query encode, same run;")
    for r in rows:
        print(
            f"{r['tools']:>7} tools: ratio against the encodes each request needs (the request and its steps in one "
            f"batch, p95 {r['encode_needed_ms']['p95']:.2f} ms): {r['ratio_p95_needed']:.2f}x"
        )
    print(
        f"1-step = the same ratio (both p95s) over single-step requests only ({first['multi_step_queries']} of "
        f"{first['queries']} requests are multi-step: tool_search also encodes and scores each step)"
    )
    for r in rows:
        if r.get("multi_step_queries"):
            print(
                f"{r['tools']:>7} tools: multi-step requests' p95 tool_search / p95 encode: "
                f"{r['ratio_p95_multi_step']:.2f}x; tool_search CPU per request (mean, ms): single-step "
                f"{r['cpu_ms_tool_search_single_step']:.2f}, multi-step {r['cpu_ms_tool_search_multi_step']:.2f}"
            )
            print(
                f"{r['tools']:>7} tools: {r['retried']} of {r['multi_step_queries']} multi-step requests were "
                "withheld by their first search and searched again with their parts encoded alone; the other "
                f"requests' p95 / p95 encode: {r['ratio_p95_first_search']:.2f}x (CPU "
                f"{r['ratio_p95_cpu_first_search']:.2f}x)"
            )
            print(
                f"{r['tools']:>7} tools: model calls per tool_search (mean): {r['model_calls_per_request']:.2f}; "
                f"per retried request: {r['model_calls_per_retried_request']:.2f}"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--json", dest="json_path", help="write every figure as JSON here")
    parser.add_argument("--no-progress", action="store_true", help="plain progress lines instead of bars")
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="search processes run at once per size, as uvicorn workers would (memory is reported per process)",
    )
    parser.add_argument(
        "--changes", type=float, default=0.01, help="share of the tools a timed sync changes (default 0.01)"
    )
    parser.add_argument(
        "--tool-vectors",
        choices=("random", "public", "realistic"),
        default="random",
        help="random unit vectors (the target's catalog), the public tools' model vectors with noisy copies, or "
        "every tool's own texts' model vectors (cached under var/bench-vectors)",
    )
    parser.add_argument(
        "--encode-budget",
        type=int,
        help="--tool-vectors realistic: texts a run may encode into the cache (default: all not cached yet)",
    )
    parser.add_argument(
        "--fill-only",
        action="store_true",
        help="--tool-vectors realistic: encode the largest size's texts into the cache, then stop (resumable)",
    )
    parser.add_argument(
        "--copy-noise", type=float, default=COPY_NOISE, help="--tool-vectors public: the copies' noise norm"
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _setup_process()
        row = run_size(
            args.child,
            args.queries,
            args.warmup,
            args.no_progress,
            args.changes,
            args.tool_vectors,
            args.copy_noise,
            args.encode_budget,
        )
        print(json.dumps(row))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.tool_vectors == "realistic":  # encoded here, once: the workers then only read the cache
        _setup_process()
        from search.encoder import encoder_get

        realistic_fill(synthetic_docs(max(sizes))[0], encoder_get(), args.encode_budget, args.no_progress)
        if args.fill_only:
            return 0
    rows = []
    for size in sizes:
        print(f"bench: {size} tools ...", file=sys.stderr, flush=True)
        command = [sys.executable, __file__, "--child", str(size), "--queries", str(args.queries)]
        command += ["--warmup", str(args.warmup), "--changes", str(args.changes)]
        command += ["--tool-vectors", args.tool_vectors, "--copy-noise", str(args.copy_noise)]
        command += ["--encode-budget", "0"] if args.tool_vectors == "realistic" else []  # filled above
        command += ["--no-progress"] if args.no_progress else []
        # Only the first child shows progress on stderr (the others ran beside it, as workers do).
        children = [
            subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=None if i == 0 else subprocess.PIPE, text=True, cwd=ROOT
            )
            for i in range(max(1, args.workers))
        ]
        results = []
        for child in children:
            out, err = child.communicate()
            if child.returncode != 0:
                print((err or "")[-4000:], file=sys.stderr)
                return child.returncode
            results.append(json.loads(out.strip().splitlines()[-1]))
        row = results[0]  # latency: the first process (the others ran beside it, as workers do)
        row["workers"] = len(results)
        row["rss_mb_per_worker"] = [r["rss_mb"] for r in results]
        row["pss_mb_per_worker"] = [r["pss_mb"] for r in results]
        row["rss_mb"] = max(row["rss_mb_per_worker"])
        rows.append(row)
    print_table(rows)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
