"""execute_tool over HTTP against the same upstream called directly, in the same run (a benchmark, not a test).

    .venv/bin/python bench/bench_execute.py [--calls 200] [--workers 2] [--db PATH] [--base ../wt-main]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scout_bench .venv/bin/python bench/bench_execute.py

1. A throwaway SQLite database (``--db``, default var/bench-execute.sqlite3) or the Postgres database named by
   DATABASE_URL (use one of your own: it is migrated and filled) gets two upstream servers, synced through the
   catalog as an operator's would be: bench/execute_upstream.py served over Streamable HTTP (uvicorn, a process
   of its own) and the same file started over stdio by the gateway. Their one tool, ``lookup_order``, is marked
   read-only, so no approval is needed, and it answers at once. One user may discover and execute both servers.
2. The gateway runs as ``uvicorn scoutsite.asgi:application --workers N`` on a free port (SCOUT_MCP_EXPOSURE=meta).
3. At concurrency 1, 16 and 64 (``--concurrency``), for each upstream, the SDK client (one ``mcp.Client``, the
   calls ``concurrency`` at a time) sends ``--calls`` calls (x4 at 64) two ways, one after the other:
   - direct: ``lookup_order`` on the upstream itself (HTTP: its URL; stdio: the SDK starting its own process);
   - gateway: ``execute_tool(tool_id="bench-http::lookup_order", ...)`` through Scout, the full path: token
     check, re-authorization, argument check (the id's ``pattern``), approval policy, durable audit insert,
     upstream session from the pool, output policy, secret redaction, query-log link.
   Figures: errors, p50/p95/p99 ms, calls/s, p50 and p95 against the direct call's (Scout's overhead as a ratio),
   and the gateway processes' CPU per call (srv cpu; the stdio upstream's processes not counted), the figure a
   shared machine stretches least.
``--base PATH``: a second gateway from another checkout (e.g. a worktree of main) on the same database; each
gateway row is then measured on both, alternating base/new within one run ``--rounds`` times (a paired A/B:
compare the ratios, not the absolute times).
``--idempotency``: every gateway call carries a fresh idempotency_key (the claim and the stored result).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_mcp_http as bench  # noqa: E402

UPSTREAM = Path(__file__).resolve().parent / "execute_upstream.py"
HTTP_SLUG, STDIO_SLUG = "bench-http", "bench-stdio"
TOOL = "lookup_order"


def start_upstream(port: int) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, str(UPSTREAM), "http", str(port)])
    _wait_port(port, process)
    return process


def _wait_port(port: int, process: subprocess.Popen) -> None:
    import socket

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"nothing answers on port {port}")


def prepare(upstream_url: str) -> str:
    """Migrate, register and sync both upstream servers (the HTTP one at ``upstream_url``), and return a token of
    a user who may discover and execute them."""
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.utils import timezone

    from catalog.models import Server
    from catalog.services.sync import server_sync
    from governance.services.permissions import permission_grant
    from governance.services.tokens import api_token_create

    call_command("migrate", verbosity=0)
    fields = {
        HTTP_SLUG: {"transport": "http", "url": upstream_url},
        STDIO_SLUG: {"transport": "stdio", "command": sys.executable, "args": [str(UPSTREAM), "stdio"]},
    }
    admin, _ = User.objects.get_or_create(
        username="bench-exec-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    user, _ = User.objects.get_or_create(username="bench-exec")
    for slug, values in fields.items():
        server, _ = Server.objects.update_or_create(slug=slug, defaults={"name": slug, **values})
        run = server_sync(server_pk=server.pk, trigger="bench")
        if run.status not in ("success", "partial") or not server.tools.filter(name=TOOL).exists():
            raise RuntimeError(f"{slug}: sync {run.status}: {run.error}")
        for action in ("discover", "execute"):
            permission_grant(actor=admin, target=server, action=action, holder=user)
    _, raw = api_token_create(
        user=user, name="bench-exec", scopes=["discover", "execute"], expires_at=timezone.now() + timedelta(hours=3)
    )
    bench._analyze()
    return raw


def gateway_cpu(pid: int) -> float:
    """CPU seconds of the gateway's processes, without the stdio upstreams its workers started."""
    total, todo = 0.0, [pid]
    ticks = os.sysconf("SC_CLK_TCK")
    try:
        while todo:
            current = todo.pop()
            if b"execute_upstream" in bench._cmdline(current):
                continue
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
    except (OSError, ValueError):
        return float("nan")
    return total


def _arguments(number: int) -> dict[str, Any]:
    return {"order_id": f"ORD-{10000 + number}", "limit": 5}


async def run_calls(target: Any, call: Any, count: int, concurrency: int) -> tuple[list[float], float, list[str]]:
    """``count`` calls ``concurrency`` at a time through one SDK client: (latencies ms, elapsed s, errors)."""
    from mcp import Client

    latencies: list[float] = []
    errors: list[str] = []
    numbers = iter(range(count))
    async with Client(target, mode=bench.MODERN, read_timeout_seconds=120) as client:
        # Warm, untimed: the session, and in every gateway worker its upstream session and first-call imports.
        await asyncio.gather(*(call(client, -1 - n) for n in range(max(8, concurrency))))

        async def worker() -> None:
            for number in numbers:
                started = time.perf_counter()
                try:
                    result = await call(client, number)
                except Exception as exc:  # noqa: BLE001 - counted and reported, the load goes on
                    errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                    continue
                if result.is_error:
                    errors.append("isError: " + " ".join(getattr(b, "text", "") for b in result.content)[:200])
                    continue
                latencies.append((time.perf_counter() - started) * 1000)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies, time.perf_counter() - started, errors


def direct_call(client: Any, number: int) -> Any:
    return client.call_tool(TOOL, _arguments(number))


def gateway_call(slug: str, idempotency: bool) -> Any:
    def call(client: Any, number: int) -> Any:
        arguments: dict[str, Any] = {"tool_id": f"{slug}::{TOOL}", "arguments": _arguments(number)}
        if idempotency:
            arguments["idempotency_key"] = f"k-{os.getpid()}-{time.time_ns()}-{number}"
        return client.call_tool("execute_tool", arguments)

    return call


def gateway_target(url: str, token: str) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http_client = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=120,
        limits=httpx2.Limits(max_connections=100, max_keepalive_connections=100),
    )
    return streamable_http_client(url, http_client=http_client)


def stdio_target() -> Any:
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(command=sys.executable, args=[str(UPSTREAM), "stdio"])


def start_gateway(root: Path, port: int, workers: int) -> subprocess.Popen:
    process = bench.start_gateway(port, workers, query_cache=True, root=root)
    # Each worker warms up at start (model, index, gc freeze: mcpgateway/server.py gateway_warm_up): timed runs
    # begin once the workers are idle, so their CPU is not counted as the calls'.
    deadline, last = time.monotonic() + 180, gateway_cpu(process.pid)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = gateway_cpu(process.pid)
        if now - last < 0.05:
            break
        last = now
    return process


def row(label: str, concurrency: int, latencies: list[float], elapsed: float, errors: list[str], cpu: float) -> dict:
    return {
        "label": label,
        "c": concurrency,
        "n": len(latencies) + len(errors),
        "errors": errors,
        "p50": statistics.median(latencies) if latencies else float("nan"),
        "p95": bench.p95(latencies),
        "p99": bench.percentile(latencies, 0.99),
        "rate": len(latencies) / elapsed if elapsed else float("nan"),
        "cpu": cpu * 1000 / max(1, len(latencies) + len(errors)) if cpu == cpu else float("nan"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per run at c=1 and c=16 (x4 at c=64)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--transports", nargs="+", default=["http", "stdio"], choices=["http", "stdio"])
    parser.add_argument("--db", type=Path)
    parser.add_argument("--base", type=Path, help="another checkout's gateway, measured alternately (A/B)")
    parser.add_argument("--rounds", type=int, default=1, help="with --base: base/new pairs per row")
    parser.add_argument("--idempotency", action="store_true", help="a fresh idempotency_key on every gateway call")
    args = parser.parse_args()
    os.environ.setdefault("SCOUT_UPSTREAM_ALLOWED_HOSTS", "127.0.0.1/32")
    os.environ.setdefault("SCOUT_MCP_CALL_TIMEOUT_CAP", "120")
    db = args.db or bench.ROOT / "var" / "bench-execute.sqlite3"
    db.parent.mkdir(parents=True, exist_ok=True)
    base = args.base.resolve() if args.base else None
    bench._setup(db)
    upstream_port = bench.free_port()
    upstream = start_upstream(upstream_port)
    gateways: dict[str, tuple[subprocess.Popen, str]] = {}
    rows: list[dict] = []
    try:
        token = prepare(f"http://127.0.0.1:{upstream_port}/mcp")
        for name, root in [("new", bench.ROOT), *([("base", base)] if base else [])]:
            port = bench.free_port()
            gateways[name] = (start_gateway(root, port, args.workers), f"http://127.0.0.1:{port}/mcp")
        order = ["base", "new"] * args.rounds if base else ["new"]
        for concurrency in args.concurrency:
            count = args.calls * (4 if concurrency >= 64 else 1)
            for transport in args.transports:
                slug = HTTP_SLUG if transport == "http" else STDIO_SLUG
                direct = f"http://127.0.0.1:{upstream_port}/mcp" if transport == "http" else stdio_target()
                cpu_before = bench.process_tree_cpu(upstream.pid) if transport == "http" else float("nan")
                result = asyncio.run(run_calls(direct, direct_call, count, concurrency))
                cpu = bench.process_tree_cpu(upstream.pid) - cpu_before if transport == "http" else float("nan")
                rows.append(row(f"{transport} direct", concurrency, *result, cpu))
                for name in order:
                    process, url = gateways[name]
                    cpu_before = gateway_cpu(process.pid)
                    call = gateway_call(slug, args.idempotency)
                    result = asyncio.run(run_calls(gateway_target(url, token), call, count, concurrency))
                    label = f"{transport} gateway" + (f" {name}" if base else "")
                    rows.append(row(label, concurrency, *result, gateway_cpu(process.pid) - cpu_before))
                    print(f"  {label} c={concurrency}: p50 {rows[-1]['p50']:.1f} ms", file=sys.stderr)
    finally:
        for process, _ in gateways.values():
            process.send_signal(signal.SIGINT)
        for process, _ in gateways.values():
            process.wait(60)
        upstream.send_signal(signal.SIGINT)
        upstream.wait(30)
    database = "postgres" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
    print(
        f"\nexecute_tool, uvicorn --workers {args.workers}, {database}; idempotency_key "
        f"{'on' if args.idempotency else 'off'}; load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        "srv cpu: CPU ms per call of the gateway processes (gateway rows; stdio upstreams not counted) or of the "
        "HTTP upstream (direct rows); x direct: the row's p50 / p95 over the same concurrency's direct call"
    )
    print(
        f"{'transport':<20} {'c':>3} {'calls':>6} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
        f"{'calls/s':>8} {'p50 x':>6} {'p95 x':>6} {'srv cpu':>8}"
    )
    directs: dict[tuple[str, int], dict] = {}
    for item in rows:
        transport = item["label"].split()[0]
        if item["label"].endswith("direct"):
            directs[(transport, item["c"])] = item
        reference = directs[(transport, item["c"])]
        print(
            f"{item['label']:<20} {item['c']:>3} {item['n']:>6} {len(item['errors']):>6} {item['p50']:>8.1f} "
            f"{item['p95']:>8.1f} {item['p99']:>8.1f} {item['rate']:>8.1f} {item['p50'] / reference['p50']:>6.2f} "
            f"{item['p95'] / reference['p95']:>6.2f} {item['cpu']:>8.2f}"
        )
        for message in sorted(set(item["errors"]))[:3]:
            print(f"{'':>20} error: {message}")
    if base:
        print("\nA/B (new / base, medians over the rounds of each row):")
        for concurrency in args.concurrency:
            for transport in args.transports:
                pick = [r for r in rows if r["c"] == concurrency and r["label"].startswith(f"{transport} gateway")]
                new = [r for r in pick if r["label"].endswith("new")]
                old = [r for r in pick if r["label"].endswith("base")]
                ratios = {
                    key: statistics.median(n[key] for n in new) / statistics.median(o[key] for o in old)
                    for key in ("p50", "p95", "rate", "cpu")
                }
                print(
                    f"  {transport} c={concurrency}: p50 {ratios['p50']:.3f}, p95 {ratios['p95']:.3f}, "
                    f"calls/s {ratios['rate']:.3f}, srv cpu {ratios['cpu']:.3f}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
