"""tool_search at concurrency 1 over HTTP, two checkouts side by side, each request paired (a benchmark).

    .venv/bin/python bench/ab_mcp_http.py --base ../wt-base [--tools 2000] [--rounds 3] [--db PATH]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scout_x .venv/bin/python bench/ab_mcp_http.py --base ../wt-base

On a shared machine the load drifts by more than a change moves the figures between two runs of
bench_mcp_http.py, and its encode floor is timed before its gateway starts. Here both gateways (this
checkout's and ``--base``'s, each ``uvicorn --workers 2`` as bench_mcp_http.py runs it) are up at once, on
copies of the same prepared database (bench_mcp_http.py --prepare-only; Postgres: DATABASE_URL's database,
copied for the base side as <its name>_abbase), and every query goes to both back to back, in alternating order,
then is encoded once in this process (the floor: one query at a time, one model thread), so the three
figures share each moment's load. Printed: p50/p95/p99 per side, p95 over the encode p95 (the issue-9
target, <= 2), the gateway processes' CPU per request, and the paired difference.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_mcp_http as bench  # noqa: E402


def sqlite_copy(source: Path, target: Path) -> None:
    """A whole copy through SQLite's backup API (a file copy can miss the WAL), stale -wal/-shm removed."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


def postgres_copy(url: str) -> str:
    """A copy of ``url``'s database, named after it with ``_abbase`` (dropped first); its URL."""
    prefix, template = url.rsplit("/", 1)
    name = f"{template}_abbase"
    command = ["psql", "-q", "-h", "127.0.0.1", "-U", "postgres", "-c", f"DROP DATABASE IF EXISTS {name}"]
    subprocess.run([*command, "-c", f"CREATE DATABASE {name} TEMPLATE {template}"], check=True)
    return f"{prefix}/{name}"


def start(root: Path, database: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = bench.free_port()
    command = [str(root / ".venv" / "bin" / "uvicorn"), "scoutsite.asgi:application", "--http"]
    command += ["scoutsite.serving:BoundedH11Protocol", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--workers", "2", "--log-level", "warning", "--no-access-log"]
    env = {**os.environ, "SCOUT_MCP_EXPOSURE": "meta", "SCOUT_SEARCH_QUERY_CACHE_SIZE": "0", **database}
    env["SCOUT_MCP_RATE"] = "1000000/minute"  # counted (its cost is measured), never reached
    process = subprocess.Popen(command, cwd=root, env=env)
    # uvicorn imports the app before it listens: minutes on a loaded shared machine (SCOUT_BENCH_START_SECONDS).
    deadline = time.monotonic() + float(os.environ.get("SCOUT_BENCH_START_SECONDS", "600"))
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.5)
    process.send_signal(signal.SIGINT)  # not kill(): uvicorn stops its workers, which would outlive it
    process.wait(60)
    raise RuntimeError(f"the gateway of {root} did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="the other checkout (its .venv is used)")
    parser.add_argument("--tools", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", type=Path, help="the prepared SQLite database (default: bench_mcp_http.py's)")
    parser.add_argument("--json", type=Path, help="write every latency and encode time here")
    args = parser.parse_args()
    roots = {"base": args.base.resolve(), "new": bench.ROOT}
    json_path = args.json.resolve() if args.json else None
    url = os.environ.get("DATABASE_URL", "")
    work = bench.ROOT / "var" / "ab"
    work.mkdir(parents=True, exist_ok=True)
    copies = {side: work / f"ab-{side}.sqlite3" for side in roots}
    if not url.startswith("postgres"):
        sqlite_copy((args.db or bench.ROOT / "var" / f"bench-mcp-{args.tools}.sqlite3").resolve(), copies["new"])
    bench._setup(copies["new"])
    token = bench.bench_user()  # in the new side's database, copied to the base side's below
    queries, origin = bench.bench_queries(args.queries)
    from django.db import connections

    connections.close_all()
    if url.startswith("postgres"):
        databases = {"base": {"DATABASE_URL": postgres_copy(url)}, "new": {}}
    else:
        sqlite_copy(copies["new"], copies["base"])
        databases = {side: {"SQLITE_PATH": str(path)} for side, path in copies.items()}
    from search.encoder import encoder_get

    encoder = encoder_get()
    encoder.encode(["warm up"])
    latencies: dict[str, list[float]] = {side: [] for side in roots}
    cpu, cpu_samples = dict.fromkeys(roots, 0.0), dict.fromkeys(roots, 0)
    encode: list[float] = []
    gateways = {side: start(root, databases[side]) for side, root in roots.items()}
    try:
        import httpx

        with httpx.Client(timeout=120) as client:

            def send(side: str, query: str, number: int) -> float:
                process, target = gateways[side]
                body, headers = bench.search_request(token, query, number)
                before, started = bench.process_tree_cpu(process.pid), time.perf_counter()
                response = client.post(target, content=body, headers=headers)
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code != 200 or '"isError":true' in response.text:
                    raise RuntimeError(f"{side}: tool_search failed: {response.status_code} {response.text[:300]}")
                spent = bench.process_tree_cpu(process.pid) - before
                if spent == spent:  # nan when a thread ended while /proc was read: that sample is left out
                    cpu[side] += spent
                    cpu_samples[side] += 1
                return elapsed

            for _ in range(3):  # every worker of both loads its model and snapshot
                for number, query in enumerate(queries[:20]):
                    for side in roots:
                        send(side, query, number)
            cpu, cpu_samples = dict.fromkeys(roots, 0.0), dict.fromkeys(roots, 0)
            for round_ in range(args.rounds):
                for number, query in enumerate(queries):
                    order = ("base", "new") if (number + round_) % 2 == 0 else ("new", "base")
                    for side in order:
                        latencies[side].append(send(side, query, number))
                    started = time.perf_counter()
                    encoder.encode([query])
                    encode.append((time.perf_counter() - started) * 1000)
    finally:
        for process, _ in gateways.values():
            process.send_signal(signal.SIGINT)
        for process, _ in gateways.values():
            process.wait(60)
    database = "postgres" if url.startswith("postgres") else "sqlite"
    floor = bench.p95(encode)
    print(
        f"\n{args.tools} tools, {database}; {len(queries)} queries ({origin}) x {args.rounds} rounds, each sent to "
        f"both back to back; {os.getloadavg()[0]:.1f} load average at the end"
    )
    print(f"encode one query (interleaved, same moments): p50 {statistics.median(encode):.1f} ms, p95 {floor:.1f} ms")
    for side, root in roots.items():
        values = latencies[side]
        print(
            f"{side:>5} ({root.name}): c=1 p50 {statistics.median(values):6.1f} p95 {bench.p95(values):6.1f} "
            f"p99 {bench.percentile(values, 0.99):6.1f} ms; p95/enc {bench.p95(values) / floor:.2f}; "
            f"srv cpu {cpu[side] * 1000 / max(1, cpu_samples[side]):.1f} ms/request"
        )
    gaps = [b - n for b, n in zip(latencies["base"], latencies["new"], strict=True)]
    print(
        f"paired (base - new): median {statistics.median(gaps):+.1f} ms, mean {statistics.fmean(gaps):+.1f} ms; "
        f"new faster in {sum(gap > 0 for gap in gaps)} of {len(gaps)}"
    )
    if json_path:
        json_path.write_text(json.dumps({"latencies": latencies, "encode": encode}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
