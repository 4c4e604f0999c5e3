"""The ranking's CPU per request in process, two checkouts side by side, and their answers compared (a benchmark).

    .venv/bin/python bench/ab_ranking.py --base ../wt-base [--sizes 10000,100000] [--queries 200] [--rounds 3]
    .venv/bin/python bench/ab_ranking.py --profile 10000 [--queries 200]

A/B: for each size, one child process per checkout (``--base``'s code and this one's, as bench_search.py's
SCOUT_BENCH_ROOT runs a checkout) builds the same synthetic catalog with the same random tool vectors
(bench_search.py's ``synthetic_docs`` and ``random_vectors``; int8 from 10,000 vectors as the settings say), and
ranks the same requests: the public query files' texts, encoded once by the real model (the request and its
parts, as tool_search encodes them; cached in ``--vectors``). Each round sends every request to both children
in alternating order, a batch of ``--batch`` at a time, so both sides share each moment's load. A request is
one ``rank_request`` (the embedded backend's search once its snapshot is current; tool_search's retry of a
withheld multi-step request is not repeated); its CPU time is the thread's (``time.thread_time``). Printed per
size: each side's median and mean CPU per request over all rounds, their ratio, and whether every answer
(tools, order, scores, ranks, why_matched, confidence) is the same on both sides; then each side's median over
the single-step and over the multi-step requests.

``--profile SIZE``: this checkout only, the CPU of each ranking stage per request (the median over requests of
each stage's thread time, wrapped around the functions named in STAGES; and its mean over the single-step and
the multi-step requests apart, whose parts are scanned and ranked too), then cProfile's top functions.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (label, module, attribute): stages timed by ``--profile`` (nested stages count in their parent too).
STAGES = [
    ("rank_request", "search.backends.ranked", "rank_request"),
    ("dense scan (score_all)", "search.engine.dense", "DenseIndex.score_all"),
    ("  int8 scan (ORT + scaling)", "search.engine.dense", "_Int8Table.scan"),
    ("  block max", "search.engine.dense", "DenseIndex._block_max"),
    ("bm25 (score_many)", "search.engine.sparse", "SparseIndex.score_many"),
    ("visibility", "search.engine.snapshot", "IndexSnapshot.visibility"),
    ("rank()", "search.engine.ranking", "rank"),
    ("  rank passes", "search.engine.ranking", "_rank_pass"),
    ("    fuse", "search.engine.ranking", "_fuse"),
    ("    _top", "search.engine.ranking", "_top"),
    ("    rows to re-score", "search.engine.ranking", "_exact_rows_needed"),
    ("  exact re-score", "search.engine.dense", "refine_together"),
    ("    spill read", "search.engine.dense", "_Spill.read"),
    ("  candidates", "search.engine.ranking", "_Pass.candidates"),
    ("    ranks_at", "search.engine.ranking", "_ranks_at"),
    ("    best_of", "search.engine.dense", "DenseScores.best_of"),
    ("  negatives", "search.engine.ranking", "_apply_negatives"),
    ("  cut", "search.engine.ranking", "_cut"),
    ("_match (why lines)", "search.backends.ranked", "_match"),
]


def encode_requests(size: int, count: int, path: Path) -> None:
    """The requests' texts and vectors (the request's and its parts', as tool_search encodes them) into ``path``."""
    import bench_search

    bench_search._setup_process()
    import numpy as np

    from search.encoder import encoder_get
    from search.engine.decompose import request_part_spans

    docs, _ = bench_search.synthetic_docs(size)
    queries, _ = bench_search.bench_queries(docs, count)
    encoder = encoder_get()
    records = []
    for query in queries:
        parts = request_part_spans(query)
        vectors = encoder.encode_request(query, parts)
        records.append({"query": query, "parts": [p.text for p in parts], "vectors": vectors.tolist()})
    path.write_text(json.dumps(records))
    print(f"encoded {len(records)} requests into {path}", file=sys.stderr)
    del np


def load_requests(path: Path):
    import numpy as np

    from search.backends import SearchRequest
    from search.backends.base import RequestMemo

    def request(record, visible):
        vectors = np.asarray(record["vectors"], np.float32)
        parts = tuple(zip(record["parts"], list(vectors[1:]), strict=True))
        return SearchRequest(
            query=record["query"],
            visible=visible,
            top_k=5,
            fusion="convex",
            query_vector=vectors[0],
            parts=parts,
            memo=RequestMemo() if parts else None,
            # Random tool vectors stand out for no request: served answers would be withheld (empty). The
            # ranking is kept (the curator preview's answer), so every answer has tools and why-lines to compare.
            enforce_abstention=False,
        )

    return json.loads(path.read_text()), request


def build(size: int, tool_vectors: str = "random"):
    """The synthetic snapshot of ``size`` tools with random tool vectors (bench_search.py's), or with
    ``tool_vectors`` "public" the public tools' model vectors and their copies' near them (bench_search.py's
    ``public_vectors``: the realistic variant)."""
    import bench_search

    from search.backends.embedded import quantized_table, release_memory
    from search.encoder import encoder_get, model_key
    from search.engine.snapshot import IndexSnapshot

    docs, _ = bench_search.synthetic_docs(size)
    if tool_vectors == "public":
        vectors = bench_search.public_vectors(docs, encoder_get(), bench_search.COPY_NOISE)
    else:
        vectors = bench_search.random_vectors(docs, encoder_get().dim)
    quantized = quantized_table(vectors)
    snapshot = IndexSnapshot(docs, vectors, generation="bench", model_key=model_key(), quantized=quantized)
    del vectors
    release_memory()
    return snapshot


def answer_of(result) -> str:
    """Everything a caller sees of one answer, as text."""
    return repr((result.confidence, result.degraded, [m.__dict__ for m in result.matches]))


def child(size: int, vectors_path: Path, tool_vectors: str = "random") -> None:
    """Serve ``run FIRST LAST`` (CPU ms per request, as JSON) and ``answers`` (every answer so far) on stdin."""
    import bench_search

    bench_search._setup_process()
    from search.backends.embedded import EmbeddedBackend
    from search.backends.ranked import rank_request
    from search.text import request_terms_kept

    snapshot = build(size, tool_vectors)
    records, request_of = load_requests(vectors_path)
    visible = frozenset(int(pk) for pk in snapshot.pks)
    answers: dict[int, str] = {}

    def search(i: int):
        request = request_of(records[i], visible)
        with request_terms_kept():  # as tool_search: the request's texts tokenized once
            return rank_request(snapshot, request, EmbeddedBackend.dense_source(snapshot, request), backend="embedded")

    for i in range(min(10, len(records))):  # warm
        search(i)
    print(json.dumps({"ready": True, "tools": len(snapshot)}), flush=True)
    for line in sys.stdin:
        command = line.split()
        if command[0] == "run":
            spent = []
            for i in range(int(command[1]), int(command[2])):
                started = time.thread_time()
                result = search(i)
                spent.append((time.thread_time() - started) * 1000)
                answers[i] = answer_of(result)
            print(json.dumps(spent), flush=True)
        elif command[0] == "answers":
            print(json.dumps(answers), flush=True)
        elif command[0] == "rss":
            status = Path("/proc/self/status").read_text()
            rss = next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS:"))
            print(json.dumps(rss / 1024), flush=True)
        else:
            return


def spawn(root: Path, size: int, vectors_path: Path, tool_vectors: str = "random") -> subprocess.Popen:
    env = {**os.environ, "SCOUT_BENCH_ROOT": str(root)}
    command = [sys.executable, str(Path(__file__)), "--child", str(size), "--vectors", str(vectors_path)]
    command += ["--tool-vectors", tool_vectors]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    return process


def ask(process: subprocess.Popen, line: str):
    process.stdin.write(line + "\n")
    process.stdin.flush()
    return json.loads(process.stdout.readline())


def ab(args: argparse.Namespace) -> None:
    base_root, this_root = Path(args.base).resolve(), HERE.parent
    for size in (int(s) for s in args.sizes.split(",")):
        vectors_path = Path(args.vectors.format(size=size, queries=args.queries))
        if not vectors_path.exists():
            subprocess.run([sys.executable, __file__, "--encode", str(size), "--queries", str(args.queries),
                            "--vectors", str(vectors_path)], check=True)  # fmt: skip
        sides = {
            name: spawn(root, size, vectors_path, args.tool_vectors)
            for name, root in (("base", base_root), ("this", this_root))
        }
        for process in sides.values():
            json.loads(process.stdout.readline())  # ready
        spent = {name: [0.0] * args.queries for name in sides}
        for round_ in range(args.rounds):
            for first in range(0, args.queries, args.batch):
                last = min(first + args.batch, args.queries)
                order = ["base", "this"] if (round_ + first // args.batch) % 2 == 0 else ["this", "base"]
                for name in order:
                    for i, ms in enumerate(ask(sides[name], f"run {first} {last}"), start=first):
                        spent[name][i] += ms / args.rounds
        answers = {name: ask(process, "answers") for name, process in sides.items()}
        rss = {name: ask(process, "rss") for name, process in sides.items()}
        for process in sides.values():
            process.stdin.write("quit\n")
            process.stdin.close()
            process.wait()
        same = sum(answers["base"][k] == answers["this"][k] for k in answers["base"])
        base, this = spent["base"], spent["this"]
        print(f"\n{size} tools, {args.queries} requests x {args.rounds} rounds (CPU ms per request, thread time:")
        print("  the dense scan and rank_request)")
        for name, values in spent.items():
            print(
                f"  {name:<5} median {statistics.median(values):7.2f}  mean {statistics.fmean(values):7.2f}  "
                f"RSS {rss[name]:6.0f} MB"
            )
        paired = statistics.median([t / b for t, b in zip(this, base, strict=True)])
        print(
            f"  this / base: mean {statistics.fmean(this) / statistics.fmean(base):.3f}, "
            f"median {statistics.median(this) / statistics.median(base):.3f}, median of paired ratios {paired:.3f}"
        )
        print(f"  identical answers: {same} of {len(answers['base'])}")
        records = json.loads(vectors_path.read_text())
        for kind, multi in (("single-step", False), ("multi-step", True)):
            at = [i for i, record in enumerate(records[: args.queries]) if bool(record["parts"]) is multi]
            if at:
                medians = {name: statistics.median([values[i] for i in at]) for name, values in spent.items()}
                print(
                    f"  {kind} ({len(at)}): median base {medians['base']:.2f}, this {medians['this']:.2f}, "
                    f"ratio {medians['this'] / medians['base']:.3f}"
                )


def profile(args: argparse.Namespace) -> None:
    import cProfile
    import importlib
    import pstats

    import bench_search

    bench_search._setup_process()
    vectors_path = Path(args.vectors.format(size=args.profile, queries=args.queries))
    if not vectors_path.exists():
        encode_requests(args.profile, args.queries, vectors_path)
    stage_ms: dict[str, float] = {}
    for label, module_name, attribute in STAGES:
        module = importlib.import_module(module_name)
        owner, _, leaf = attribute.rpartition(".")
        holder = getattr(module, owner) if owner else module
        original = getattr(holder, leaf)

        def timed(*a, __original=original, __label=label, **kw):
            started = time.thread_time()
            try:
                return __original(*a, **kw)
            finally:
                stage_ms[__label] = stage_ms.get(__label, 0.0) + (time.thread_time() - started) * 1000

        setattr(holder, leaf, timed)
        for loaded in list(sys.modules.values()):  # names imported with "from x import y"
            ours = getattr(loaded, "__name__", "").startswith("search")
            if not owner and ours and getattr(loaded, leaf, None) is original:
                setattr(loaded, leaf, timed)
    from search.backends.embedded import EmbeddedBackend
    from search.backends.ranked import rank_request
    from search.text import request_terms_kept

    snapshot = build(args.profile, args.tool_vectors)
    records, request_of = load_requests(vectors_path)
    visible = frozenset(int(pk) for pk in snapshot.pks)

    def search(i: int):
        request = request_of(records[i], visible)
        with request_terms_kept():  # as tool_search: the request's texts tokenized once
            return rank_request(snapshot, request, EmbeddedBackend.dense_source(snapshot, request), backend="embedded")

    for i in range(10):
        search(i)
    per_stage: dict[str, list[float]] = {"search (scan + rank_request)": []}
    per_stage.update({label: [] for label, _, _ in STAGES})
    multi_step = []  # per measured request: whether it has parts (a multi-step request scores each part too)
    for _ in range(args.rounds):
        for i in range(len(records)):
            stage_ms.clear()
            started = time.thread_time()
            search(i)
            stage_ms["search (scan + rank_request)"] = (time.thread_time() - started) * 1000
            for label in per_stage:
                per_stage[label].append(stage_ms.get(label, 0.0))
            multi_step.append(bool(records[i]["parts"]))
    multi = sum(multi_step) // args.rounds
    print(
        f"\n{args.profile} tools, {len(records)} requests x {args.rounds}: CPU ms per request (median, mean; then the "
        f"mean over the {len(records) - multi} single-step and the {multi} multi-step requests)"
    )
    for label, values in per_stage.items():
        single = [v for v, m in zip(values, multi_step, strict=True) if not m]
        several = [v for v, m in zip(values, multi_step, strict=True) if m]
        print(
            f"  {label:<30} {statistics.median(values):7.2f} {statistics.fmean(values):7.2f} "
            f"{statistics.fmean(single) if single else 0.0:7.2f} {statistics.fmean(several) if several else 0.0:7.2f}"
        )
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    for i in range(len(records)):
        search(i)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)
    if args.save:
        profiler.dump_stats(args.save)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="the other checkout (A/B)")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=10, help="requests sent to one side before the other's turn")
    parser.add_argument("--vectors", default="/tmp/ab-ranking-{size}-{queries}.json", help="encoded requests cache")
    parser.add_argument("--profile", type=int, help="stage timers and cProfile of this checkout at this size")
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--save", help="--profile: also write the cProfile stats here")
    parser.add_argument(
        "--tool-vectors", choices=("random", "public"), default="random", help="bench_search.py's --tool-vectors"
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--encode", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    if args.encode:
        encode_requests(args.encode, args.queries, Path(args.vectors))
    elif args.child:
        child(args.child, Path(args.vectors), args.tool_vectors)
    elif args.profile:
        profile(args)
    else:
        ab(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
