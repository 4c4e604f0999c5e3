"""Where one execute_tool call's CPU goes, over HTTP (profile_gateway_search.py's ``--http`` pass, for execute).

    .venv/bin/python bench/profile_gateway_execute.py [--calls 200] [--transport http|stdio] [--db PATH] [--top 40]

The database is bench_execute.py's (var/bench-execute.sqlite3, or DATABASE_URL): its upstream servers are
synced again here (the HTTP one on a fresh port). The whole ASGI app runs under uvicorn in this process, and
execute_tool POSTs (protocol 2026-07-28, raw JSON-RPC, bearer token) go one at a time from a client thread;
printed: the gateway's CPU per call, the event loop's share, the CPU by thread, then cProfile of the event-loop
thread and of the ORM threads (each piece of work run_orm hands them) over a second pass of the same calls.
"""

import argparse
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_execute  # noqa: E402
import bench_mcp_http as bench  # noqa: E402
import profile_gateway_search  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--transport", choices=["http", "stdio"], default="http")
    parser.add_argument("--db", type=Path)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--loop", default="auto")
    parser.add_argument("--save", type=Path)
    args = parser.parse_args()
    args.save = args.save.resolve() if args.save else None
    os.environ.setdefault("SCOUT_UPSTREAM_ALLOWED_HOSTS", "127.0.0.1/32")
    os.environ.update(SCOUT_MCP_EXPOSURE="meta", SCOUT_MCP_RATE="1000000/minute")
    db = args.db or bench.ROOT / "var" / "bench-execute.sqlite3"
    bench._setup(db)
    port = bench.free_port()
    upstream = bench_execute.start_upstream(port)
    try:
        token = bench_execute.prepare(f"http://127.0.0.1:{port}/mcp")
        slug = bench_execute.HTTP_SLUG if args.transport == "http" else bench_execute.STDIO_SLUG

        search_request = bench.search_request

        def execute_request(token: str, number: str, request_id: int) -> tuple[str, dict[str, str]]:
            body, headers = search_request(token, "", request_id)
            call = json.loads(body)
            call["params"]["name"] = "execute_tool"
            call["params"]["arguments"] = {
                "tool_id": f"{slug}::{bench_execute.TOOL}",
                "arguments": bench_execute._arguments(int(number)),
            }
            return json.dumps(call), {**headers, "Mcp-Name": "execute_tool"}

        profile_gateway_search.bench.search_request = execute_request
        profile_gateway_search.profile_http(args, token, [str(n) for n in range(args.calls + 10)])
    finally:
        upstream.send_signal(signal.SIGINT)
        upstream.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
