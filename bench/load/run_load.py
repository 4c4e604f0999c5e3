"""The load suite (SECURITY-TESTS C3, L1–L5): a benchmark, not a test. ``make load`` runs it.

    .venv/bin/python bench/load/run_load.py [--users 50] [--duration 30] [--tools 100] [--slow-calls 20]

Everything stays on loopback and is bounded in time (each phase ``--duration`` seconds):
1. Two mock Streamable HTTP upstreams start (bench/load/mock_upstream.py): "mock" with ``--tools`` tools
   answering in 50 ms, "slowpoke" answering in 30 s.
2. A throwaway SQLite database (var/load/) gets both servers synced for real, ``--users`` agents with
   disjoint grants (each its own tools: the L2 oracle), a burst token and a slow caller; the index is built.
3. The gateway runs as uvicorn on a free port (one worker: its RSS is measured), with SCOUT_API_RATE at
   ``--rate`` so the L3 burst meets the limiter.
4. Headless locust (a separate virtualenv, .venv-load, from requirements-load.txt) runs one phase each:
   L1+L2 baseline (80% search / 20% execute, every search checked against the oracle), L4 (plus calls held
   on the 30 s upstream), L3 (plus one token bursting REST searches), L5 (a full re-sync and index rebuild
   while the agents run).
5. One table: requests, error rate, search p50/p95/p99, execute p95, leaked ids, burst accepted vs limit,
   gateway RSS. The spec's scale (200 agents, 10 min, 10k tools) is reachable with the flags; the defaults
   fit a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PYTHON = str(ROOT / ".venv" / "bin" / "python")
LOCUST = str(ROOT / ".venv-load" / "bin" / "locust")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{what} did not start")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:  # "N/A" when a name saw no requests
        return 0.0


def warm_up(url: str, config: Path) -> None:
    """One search and one call before measuring: the first search loads the embedding model."""
    import httpx

    agent = json.loads(config.read_text())["agents"][0]
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "scout-load", "version": "1"},
    }
    headers = {
        "Authorization": f"Bearer {agent['token']}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
    }
    calls = (
        ("tool_search", {"query": agent["queries"][0]}),
        ("execute_tool", {"tool_id": agent["allowed"][0], "arguments": {"region": "eu"}}),
    )
    for name, arguments in calls:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": meta},
        }
        response = httpx.post(f"{url}/mcp", json=body, headers={**headers, "Mcp-Name": name}, timeout=600)
        response.raise_for_status()


def stats(prefix: Path) -> dict[str, dict[str, float]]:
    rows = {}
    with open(f"{prefix}_stats.csv", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            rows[row["Name"]] = {
                "count": _number(row["Request Count"]),
                "failures": _number(row["Failure Count"]),
                "p50": _number(row["50%"]),
                "p95": _number(row["95%"]),
                "p99": _number(row["99%"]),
            }
    return rows


def resync_and_rebuild(env: dict[str, str]) -> None:
    """L5: what a scheduled full sync does, while the agents run."""
    code = (
        "import django; django.setup()\n"
        "from catalog.models import Server\nfrom catalog.services.sync import server_sync\n"
        "from search.services import index_rebuild\n"
        "for s in Server.objects.all(): server_sync(server_pk=s.pk, trigger='load')\n"
        "index_rebuild()\n"
    )
    subprocess.run([PYTHON, "-c", code], cwd=ROOT, env=env, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=int, default=30, help="seconds per phase")
    parser.add_argument("--tools", type=int, default=100)
    parser.add_argument("--slow-calls", type=int, default=20)
    parser.add_argument("--rate", default="120/minute", help="SCOUT_API_RATE for the L3 burst")
    args = parser.parse_args()
    if not Path(LOCUST).exists():
        print("locust is missing: run `make load` (it installs requirements-load.txt into .venv-load)")
        return 2

    work = ROOT / "var" / "load"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")},
        "DJANGO_SETTINGS_MODULE": "scoutsite.settings",
        "SECRET_KEY": os.environ.get("SECRET_KEY", "load-only-not-a-secret"),
        "SQLITE_PATH": str(work / "load.sqlite3"),
        "SCOUT_MCP_EXPOSURE": "meta",
        "SCOUT_API_RATE": args.rate,
        "SCOUT_MCP_RATE": "1000000/minute",  # the agents' MCP traffic is the load, not a burst to refuse
        "SCOUT_MCP_CALL_TIMEOUT": "40",
        "SCOUT_UPSTREAM_ALLOWED_HOSTS": "127.0.0.1/32",  # the mock and slow MCP servers run on this machine
        "CELERY_TASK_ALWAYS_EAGER": "1",
        "LOG_LEVEL": "WARNING",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONPATH": str(ROOT),
    }
    processes: list[subprocess.Popen] = []
    try:
        mock_port, slow_port, gateway_port = free_port(), free_port(), free_port()
        for port, slug, tools, latency in ((mock_port, "mock", args.tools, "0.05"), (slow_port, "slowpoke", 1, "30")):
            command = [PYTHON, str(HERE / "mock_upstream.py"), "--port", str(port), "--slug", slug]
            process = subprocess.Popen(command + ["--tools", str(tools), "--latency", latency], cwd=ROOT, env=env)
            processes.append(process)
            wait_port(port, process, f"mock upstream {slug}")
        config = work / "config.json"
        subprocess.run(
            [PYTHON, str(HERE / "setup_db.py"), "--users", str(args.users), "--out", str(config)]
            + ["--mock-url", f"http://127.0.0.1:{mock_port}/mcp", "--slow-url", f"http://127.0.0.1:{slow_port}/mcp"],
            cwd=ROOT,
            env=env,
            check=True,
        )
        gateway = subprocess.Popen(
            [PYTHON, "-m", "uvicorn", "scoutsite.asgi:application", "--host", "127.0.0.1", "--port", str(gateway_port)]
            + ["--log-level", "warning", "--no-access-log"],
            cwd=ROOT,
            env=env,
        )
        processes.append(gateway)
        wait_port(gateway_port, gateway, "gateway")
        warm_up(f"http://127.0.0.1:{gateway_port}", config)

        phases = [
            ("L1+L2 baseline", ["Agent"], None),
            ("L4 slow upstream", ["Agent", "SlowCaller"], None),
            ("L3 burst", ["Agent", "Burst"], None),
            ("L5 sync+reindex", ["Agent"], resync_and_rebuild),
        ]
        rows = []
        for label, classes, during in phases:
            prefix = work / label.split()[0].replace("+", "_")
            summary = work / f"{prefix.name}-summary.json"
            extra = args.slow_calls if "SlowCaller" in classes else (1 if "Burst" in classes else 0)
            rss_before = rss_mb(gateway.pid)
            helper = threading.Thread(target=during, args=(env,)) if during else None
            locust = subprocess.Popen(
                [LOCUST, "-f", str(HERE / "locustfile.py"), *classes, "--headless"]
                + ["-u", str(args.users + extra), "-r", str(max(5, args.users // 5))]
                + ["--run-time", f"{args.duration}s", "--host", f"http://127.0.0.1:{gateway_port}"]
                + ["--csv", str(prefix), "--only-summary", "--loglevel", "WARNING"],
                cwd=ROOT,
                env={
                    **env,
                    "LOAD_CONFIG": str(config),
                    "LOAD_SUMMARY": str(summary),
                    "LOAD_SLOW_CALLS": str(args.slow_calls),
                },
                stdout=subprocess.DEVNULL,
            )
            if helper:
                time.sleep(min(5, args.duration / 4))
                helper.start()
            locust.wait()
            if helper:
                helper.join()
            found = stats(prefix)
            counts = json.loads(summary.read_text()) if summary.exists() else {}
            total = found.get("Aggregated", {"count": 0, "failures": 0})
            search = found.get("L1 tool_search", {})
            execute = found.get("L1 execute", {})
            rows.append(
                {
                    "phase": label,
                    "requests": int(total["count"]),
                    "errors %": 100 * total["failures"] / total["count"] if total["count"] else 0.0,
                    "search p50": search.get("p50", 0),
                    "search p95": search.get("p95", 0),
                    "search p99": search.get("p99", 0),
                    "execute p95": execute.get("p95", 0),
                    "leaked ids": counts.get("leaked_ids", 0),
                    "checked": counts.get("checked_responses", 0),
                    "burst ok/429": f"{counts.get('burst_accepted', 0)}/{counts.get('burst_limited', 0)}"
                    if "Burst" in classes
                    else "-",
                    "RSS MB": f"{rss_before:.0f}->{rss_mb(gateway.pid):.0f}",
                }
            )
        print_table(rows, args)
        leaks = sum(row["leaked ids"] for row in rows)
        return 1 if leaks else 0
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()


def print_table(rows: list[dict], args: argparse.Namespace) -> None:
    headers = list(rows[0])
    cells = [[f"{row[h]:.2f}" if isinstance(row[h], float) else str(row[h]) for h in headers] for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    print(f"\nScout load: {args.users} agents, {args.duration}s per phase, {args.tools} mock tools, rate {args.rate}")
    print("latencies in ms (locust percentiles); burst limit = the rate over the phase, +5% allowed")
    print(" | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in cells:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    sys.exit(main())
