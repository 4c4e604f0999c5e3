"""Where a tool_search's CPU goes under concurrency, across every uvicorn worker (a benchmark, not a test).

    .venv/bin/python bench/profile_gateway_load.py [--tools 10000] [--concurrency 16] [--requests 400]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scout_bench .venv/bin/python bench/profile_gateway_load.py

Uses the database bench_mcp_http.py prepares (run it with --prepare-only first). The gateway runs as
bench_mcp_http.py runs it (``uvicorn --workers N``, the run command's protocol, request-vector cache off), is
warmed, then ``--requests`` tool_search POSTs are sent ``--concurrency`` at a time while py-spy (``--py-spy``,
0.4.x) samples every worker (``record --nonblocking --threads --format raw``). Reported, per answered request:

- the CPU of each worker's threads from /proc (exact, not sampled), by kind: the event loop (uvicorn's main
  thread: h11, Starlette, the guards, the MCP SDK, JSON), the ORM threads (token confirmation, visibility, the
  model, the ranking, the answer, the audit and query-log queueing), the write-behind thread, others;
- the py-spy samples on CPU (waits dropped: a stack whose innermost frame is a lock, condition, queue or
  selector wait), split into the pieces of the request path by the frames on the stack (``PIECES``: the first
  piece, in that order, whose pattern is on the stack), scaled to the measured CPU;
- the functions with the most samples of their own on the event loop and on the ORM threads.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_mcp_http as bench  # noqa: E402

# (piece of the request path, pattern of a frame anywhere on the stack), the first match wins: innermost first.
PIECES = [
    ("dense scan and exact re-score", r"engine/dense\.py"),  # before the model: the int8 scan runs on ONNX too
    ("model (ONNX Runtime, tokenizer)", r"onnx_encoder\.py|sentence_transformers|tokenizers|onnxruntime"),
    ("model batching and vector cache", r"QueryBatcher|encode_request \(|encode_queries \("),
    ("request parts and intent", r"engine/decompose\.py|engine/intent\.py"),
    ("ranking (fusion, passes, BM25, why)", r"search/engine/|EmbeddedBackend\.search|snapshot\.py"),
    ("index generation / snapshot checks", r"generation|snapshot_current|snapshot_get"),
    ("token confirm", r"access_confirm|api_token_confirm|api_token_verify"),
    ("visibility", r"tool_pks_visible_to|tools_visible_to|visible_set|visibility_row"),
    ("query log / audit queueing", r"search_observe|audit_record|query_log_record|writebehind\.py"),
    ("answer (descriptors, text, result)", r"as_result|discovery\.py|descriptor"),
    ("search request (parts, terms, clean)", r"search/services\.py|search/text\.py|request_part_spans"),
    ("Django ORM / database driver", r"django/db/|sqlite3|psycopg"),
]
# Whose code a sample is in otherwise: the innermost frame of one of these (json, copy... count for their caller).
OWNERS = [
    ("pydantic", r"pydantic"),
    ("MCP SDK", r"\(mcp/|mcp_types|mcpgateway/"),
    ("Starlette / guards / auth", r"starlette|scoutsite/|django/"),
    ("uvicorn / h11", r"uvicorn|h11"),
    ("anyio / asyncio / threads", r"anyio|asyncio|asgiref|concurrent/futures|threading\.py"),
]
# A thread waking another (a lock released, the event loop's self-pipe written) and then waiting to take the GIL
# back: nonblocking sampling sees it on CPU at that line (hotpath6), though most of it is a wait.
HANDOFF_LEAVES = re.compile(
    r"^(Condition\.notify|Condition\.__enter__|BaseSelectorEventLoop\._write_to_self|OrmThreads\._run|"
    r"OrmThreads\.submit) \("
)
WAIT_LEAVES = re.compile(
    r"^(Condition\.wait|Event\.wait|_worker|SimpleQueue\.get|select|poll|Queue\.get|BaseSelector\.select|"
    r"EpollSelector\.select|Thread\._wait_for_tstate_lock) \("
)


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of ``pid`` (Linux /proc)."""
    found = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[int(task.name)] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def thread_kind(pid: int, tid: int, names: dict[int, str]) -> str:
    name = names.get(tid, "")
    if tid == pid:
        return "event loop"
    if name.startswith("scout-orm"):
        return "ORM threads"
    if name.startswith("scout-write-behind"):
        return "write-behind"
    return f"other ({name or 'native'})"


def read_samples(path: Path) -> list[tuple[int, str, list[str], int]]:
    """py-spy raw lines: (tid, thread name, frames outermost first, count)."""
    samples = []
    for line in path.read_text(errors="replace").splitlines():
        head, _, count = line.rpartition(" ")
        match = re.match(r"thread \((?:0x)?([0-9a-fA-F]+)\)(?:: ([^;]*))?;?(.*)", head)
        if not match or not count.isdigit():
            continue
        tid_text, name, rest = match.groups()
        tid = int(tid_text, 16) if tid_text.lower().startswith("0x") else int(tid_text)
        samples.append((tid, name or "", rest.split(";") if rest else [], int(count)))
    return samples


def piece_of(frames: list[str]) -> str:
    if frames and HANDOFF_LEAVES.match(frames[-1]):
        return "thread hand-offs (wake-ups, GIL re-takes)"
    stack = ";".join(frames)
    for piece, pattern in PIECES:
        if re.search(pattern, stack):
            return piece
    for frame in reversed(frames):
        for owner, pattern in OWNERS:
            if re.search(pattern, frame):
                return owner
    return "other"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second per worker")
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    parser.add_argument("--no-py-spy", action="store_true", help="only the /proc thread CPU")
    parser.add_argument(
        "--gil",
        action="store_true",
        help="py-spy --gil: only the thread holding the GIL (Python's CPU; the model's native runs are missed)",
    )
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep", type=Path, help="keep py-spy's raw files as KEEP.<pid>.txt")
    parser.add_argument("--db", type=Path)
    args = parser.parse_args()
    keep = args.keep.resolve() if args.keep else None
    db = args.db or bench.ROOT / "var" / f"bench-mcp-{args.tools}.sqlite3"
    bench.NO_PROGRESS = True
    bench._setup(db)
    token = bench.bench_user()
    queries, _ = bench.bench_queries(args.queries)
    load = (queries * (args.requests // len(queries) + 1))[: args.requests]
    _, encode_cpu = bench.encode_times(queries)
    port = bench.free_port()
    gateway = bench.start_gateway(port, args.workers, query_cache=False)
    url = f"http://127.0.0.1:{port}/mcp"
    spies: list[tuple[int, subprocess.Popen, Path]] = []
    try:
        bench.warm_up(url, token, queries, args.concurrency)
        workers = list(bench.worker_cpu(gateway.pid))
        names: dict[int, dict[int, str]] = {pid: {} for pid in workers}
        before = {pid: thread_cpu(pid) for pid in workers}
        if not args.no_py_spy:
            for pid in workers:
                out = (keep.parent / f"{keep.name}.{pid}.txt") if keep else Path(f"/tmp/profile-load-{pid}.txt")
                command = [args.py_spy, "record", "--pid", str(pid), "--nonblocking", "--threads", "--rate"]
                command += [str(args.rate), "--format", "raw", "--output", str(out)] + (["--gil"] if args.gil else [])
                spies.append((pid, subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), out))
            time.sleep(1.0)  # py-spy attached
        latencies, elapsed, errors = asyncio.run(bench.run_load(url, token, load, args.concurrency))
        after = {pid: thread_cpu(pid) for pid in workers}
        for _, spy, _ in spies:
            spy.send_signal(signal.SIGINT)
        for _, spy, _ in spies:
            spy.wait(60)
    finally:
        gateway.send_signal(signal.SIGINT)
        gateway.wait(60)
    answered = max(1, len(latencies) + len(errors))
    print(
        f"\n{answered} tool_search requests at c={args.concurrency}, {args.workers} workers, {elapsed:.1f} s "
        f"({len(latencies) / elapsed:.1f} req/s), {len(errors)} errors; p50 {bench.percentile(latencies, 0.5):.0f} "
        f"ms, p95 {bench.p95(latencies):.0f} ms; load average {os.getloadavg()[0]:.1f}"
    )
    samples: dict[int, list] = {}
    for pid, _, out in spies:
        samples[pid] = read_samples(out) if out.exists() else []
        for tid, name, _, _ in samples[pid]:
            names[pid].setdefault(tid, name)
    by_kind: Counter[str] = Counter()
    for pid in workers:
        for tid, seconds in after[pid].items():
            by_kind[thread_kind(pid, tid, names[pid])] += seconds - before[pid].get(tid, 0.0)
    total = sum(by_kind.values())
    print(
        f"CPU per request, all workers, by thread (/proc): {total * 1000 / answered:.2f} ms; one encode (same run, "
        f"this process): {encode_cpu:.2f} ms; cpu/enc {total * 1000 / answered / encode_cpu:.2f}"
    )
    for kind, seconds in by_kind.most_common():
        print(f"  {kind:<40} {seconds * 1000 / answered:7.2f} ms  {100 * seconds / total:5.1f}%")
    if not samples:
        return 0
    # Samples on CPU, by piece, scaled to the measured CPU of the threads they were taken on.
    pieces: dict[str, Counter[str]] = defaultdict(Counter)
    own: dict[str, Counter[str]] = defaultdict(Counter)
    in_orm: dict[str, Counter[str]] = defaultdict(Counter)  # of which inside Django's ORM (django/db)
    dropped = 0
    for pid, rows in samples.items():
        for tid, _, frames, count in rows:
            if not frames or WAIT_LEAVES.match(frames[-1]):
                dropped += count
                continue
            kind = thread_kind(pid, tid, names[pid])
            piece = piece_of(frames)
            pieces[kind][piece] += count
            if any("django/db/" in frame for frame in frames):
                in_orm[kind][piece] += count
            own[kind][frames[-1]] += count
    on_cpu = sum(sum(counter.values()) for counter in pieces.values())
    print(f"\npy-spy: {on_cpu} samples on CPU ({dropped} in waits dropped), scaled to each kind's measured CPU")
    for kind, counter in sorted(pieces.items(), key=lambda item: -by_kind.get(item[0], 0.0)):
        kind_ms = by_kind.get(kind, 0.0) * 1000 / answered
        kind_samples = sum(counter.values())
        print(f"  {kind} ({kind_ms:.2f} ms, {kind_samples} samples)")
        for piece, count in counter.most_common():
            orm = in_orm[kind][piece]
            print(
                f"    {piece:<44} {kind_ms * count / kind_samples:7.2f} ms  {100 * count / kind_samples:5.1f}%"
                + (f"  (in django/db: {kind_ms * orm / kind_samples:.2f} ms)" if orm else "")
            )
    for kind in ("event loop", "ORM threads"):
        counter = own.get(kind)
        if not counter:
            continue
        kind_samples = sum(counter.values())
        print(f"\n  {kind}: functions by own samples (top {args.top})")
        for function, count in counter.most_common(args.top):
            print(f"    {100 * count / kind_samples:5.1f}%  {function[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
