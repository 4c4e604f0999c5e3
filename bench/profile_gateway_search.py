"""Where one tool_search's time goes: in process (token check + gateway_search), or over HTTP (``--http``).

    .venv/bin/python bench/profile_gateway_search.py [--tools 10000] [--queries 60] [--db PATH]
    .venv/bin/python bench/profile_gateway_search.py --http [--tools 10000] [--queries 200] [--db PATH]

Uses the database bench_mcp_http.py prepares (run it with --prepare-only first).

In process: the CPU per request of each stage of the request path (the kept token's confirmation, as the
gateway's token cache serves every request after a token's first; visibility, encode, ranking, query log,
audit), then cProfile's top functions by cumulative CPU time over the same requests.

``--http``: the whole ASGI app (``scoutsite.asgi:application``) served by uvicorn in this process on the run
command's protocol, and tool_search POSTs sent one at a time from a client thread. It reports CPU per
request: the gateway's (the process, less the client thread) and the event loop's share (the SDK, the ASGI
stack, the guards, h11: everything not handed to the ORM threads or the model). A second pass runs the same
requests with cProfile on the event-loop thread, timing its CPU (``time.thread_time``), so time spent
waiting for the GIL or for the machine does not count; and on the ORM threads (each piece of work run_orm
hands them) and the write-behind thread's inserts, each with its own profiler (``--save``: SAVE.orm). The
CPU per request of every thread of the process is listed too (Linux /proc).
"""

import argparse
import asyncio
import cProfile
import os
import pstats
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_mcp_http as bench  # noqa: E402

STAGES = {
    "token confirm": ("governance.services.tokens", "api_token_confirm"),
    "visibility": ("search.services", "tool_pks_visible_to"),
    "encode": ("search.services", "_encode_query"),
    "rank (backend.search)": ("search.backends.embedded", "EmbeddedBackend.search"),
    "query log": ("search.usage", "query_log_record"),
    "audit": ("governance.services.audit", "audit_record"),
}


def profile_in_process(args: argparse.Namespace, token: str, queries: list[str]) -> None:
    import importlib

    stage_ms: dict[str, list[float]] = {name: [] for name in STAGES}
    for name, (module_name, attribute) in STAGES.items():  # wrap each stage with a timer
        module = importlib.import_module(module_name)
        owner, _, leaf = attribute.rpartition(".")
        holder = getattr(module, owner) if owner else module
        original = getattr(holder, leaf)

        def timed(*a, __original=original, __name=name, **kw):
            started = time.thread_time()  # CPU: in process the model and the database run on this thread
            try:
                return __original(*a, **kw)
            finally:
                stage_ms[__name].append((time.thread_time() - started) * 1000)

        setattr(holder, leaf, timed)
        for loaded in list(sys.modules.values()):  # names imported with "from x import y"
            if loaded is not None and getattr(loaded, "__name__", "").startswith(
                ("search", "mcpgateway", "governance")
            ):
                if getattr(loaded, leaf, None) is original and not owner:
                    setattr(loaded, leaf, timed)
    # Imported after the wrapping, so that the names bound here are the timed ones.
    from governance.cache import visibility_row_read_once
    from governance.services.tokens import api_token_confirm, api_token_verify_versioned
    from mcpgateway.services.discovery import gateway_search

    kept = api_token_verify_versioned(token)  # as the gateway's token cache keeps it after a first request

    def search(query: str) -> None:
        """What a tool_search's ORM thread does, on this thread (its query encoded here, not ahead): the kept
        token confirmed, then the search, sharing one read of the version row."""
        nonlocal kept
        with visibility_row_read_once():
            kept = api_token_confirm(kept, token)
            gateway_search(principal=kept.principal, query=query, top_k=5)

    timed_queries = queries[10:]
    for query in queries[:10]:  # warm: model, snapshot, caches
        search(query)
    for values in stage_ms.values():
        values.clear()
    started = time.thread_time()
    for query in timed_queries:
        search(query)
    total = (time.thread_time() - started) * 1000 / len(timed_queries)
    print(f"\nCPU per request (kept token confirmed + gateway_search), in process: {total:.1f} ms")
    for name, values in stage_ms.items():
        if values:
            print(f"  {name:<24} {sum(values) / len(timed_queries):7.2f} ms/request  ({len(values)} calls)")
    print("\ncProfile of the same requests again (CPU time, thread_time; its overhead inflates Python-heavy code):")
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    for query in timed_queries:
        search(query)
    profile.disable()
    pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)
    if args.save:
        profile.dump_stats(args.save)


def profile_http(args: argparse.Namespace, token: str, queries: list[str]) -> None:
    import httpx
    import uvicorn

    from scoutsite.serving import PROTOCOL

    port = bench.free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    config = uvicorn.Config(
        "scoutsite.asgi:application", host="127.0.0.1", port=port, http=PROTOCOL, loop=args.loop, log_level="warning"
    )
    server = uvicorn.Server(config)
    profile = cProfile.Profile(time.thread_time)  # CPU of the event-loop thread, not waits for the GIL or the OS
    orm_profiles = _profile_orm_threads()
    figures: dict[str, float] = {}

    def on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the event-loop thread and wait for it (thread CPU and cProfile are per thread)."""
        done = threading.Event()
        loop.call_soon_threadsafe(lambda: (fn(), done.set()))
        done.wait()

    def send_all(client: httpx.Client, texts: list[str]) -> None:
        for number, query in enumerate(texts):
            body, headers = bench.search_request(token, query, number)
            response = client.post(url, content=body, headers=headers)
            if response.status_code != 200 or '"isError":true' in response.text:
                raise RuntimeError(f"tool_search failed: {response.status_code} {response.text[:300]}")

    def client(loop: asyncio.AbstractEventLoop) -> None:
        try:
            with httpx.Client(timeout=120) as http:
                send_all(http, queries[:10])  # warm: model, snapshot, caches
                timed = queries[10:]
                on_loop(loop, lambda: figures.update(loop_cpu=time.thread_time()))
                process_cpu, client_cpu = time.process_time(), time.thread_time()
                threads_before = _threads_cpu()
                send_all(http, timed)
                client_cpu = time.thread_time() - client_cpu
                figures["threads"] = _threads_cpu(since=threads_before)
                figures["process_cpu"] = time.process_time() - process_cpu - client_cpu
                on_loop(loop, lambda: figures.update(loop_cpu=time.thread_time() - figures["loop_cpu"]))
                on_loop(loop, profile.enable)
                orm_profiles["on"] = True
                send_all(http, timed)
                orm_profiles["on"] = False
                on_loop(loop, profile.disable)
        finally:
            server.should_exit = True

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        starter = threading.Thread(target=lambda: _when_started(server, lambda: client(loop)), daemon=True)
        starter.start()
        await server.serve()
        starter.join()

    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:  # the loop uvicorn's run would use
        loop_name = type(runner.get_loop()).__module__
        runner.run(serve())
    count = len(queries[10:])
    gateway_ms = figures["process_cpu"] * 1000 / count
    loop_ms = figures["loop_cpu"] * 1000 / count
    print(f"\n{count} tool_search requests over HTTP, one at a time, uvicorn in process ({PROTOCOL}, {loop_name} loop)")
    print(f"  gateway CPU per request (process less the client thread): {gateway_ms:6.2f} ms")
    print(f"  of which the event-loop thread (SDK, ASGI stack, guards, h11): {loop_ms:6.2f} ms")
    print(f"  the rest (ORM threads: token check, search, model, answer):    {gateway_ms - loop_ms:6.2f} ms")
    by_name: dict[str, float] = {}
    for name, seconds in figures["threads"].items():
        by_name[name] = by_name.get(name, 0.0) + seconds
    print("  CPU per request by thread (ms; the client thread and the event loop included):")
    for name, seconds in sorted(by_name.items(), key=lambda item: -item[1]):
        if seconds * 1000 / count >= 0.05:
            print(f"    {name:<40} {seconds * 1000 / count:6.2f}")
    print("\ncProfile of the event-loop thread's CPU (second pass, same requests):")
    pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)
    if args.save:
        profile.dump_stats(args.save)
    threads = [p for key, p in orm_profiles.items() if key != "on"]
    if threads:
        print(
            "\ncProfile of the ORM threads' CPU (second pass, same requests; the work run_orm hands them) and of the "
            "write-behind inserts:"
        )
        stats = pstats.Stats(threads[0])
        for more in threads[1:]:
            stats.add(more)
        stats.sort_stats("cumulative").print_stats(args.top)
        if args.save:
            stats.dump_stats(f"{args.save}.orm")


def _threads_cpu(since: dict[str, float] | None = None) -> dict[str, float]:
    """CPU seconds (user + system) of each thread of this process, by thread name (Python's name where it knows
    the thread, else ``native-<id>``, e.g. the model runtime's own threads); less ``since``'s when given."""
    names = {thread.native_id: thread.name for thread in threading.enumerate()}
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = f"{names.get(int(task.name), 'native')}-{task.name}"
        found[name] = (int(fields[11]) + int(fields[12])) / ticks - (since or {}).get(name, 0.0)
    return found


def _profile_orm_threads() -> dict:
    """Wrap each piece of work the gateway hands its ORM threads in that thread's own profiler (cProfile is
    per thread), switched on by the ``"on"`` key of the returned dict (thread ident -> profiler)."""
    from mcpgateway import db

    profiles: dict = {"on": False}
    submit = db.OrmThreads.submit

    def profiled_submit(self, fn, /, *args, **kwargs):
        def work(*a, **kw):
            if not profiles["on"]:
                return fn(*a, **kw)
            profiler = profiles.setdefault(threading.get_ident(), cProfile.Profile(time.thread_time))
            profiler.enable()
            try:
                return fn(*a, **kw)
            finally:
                profiler.disable()

        return submit(self, work, *args, **kwargs)

    db.OrmThreads.submit = profiled_submit
    from governance import writebehind

    insert = writebehind._insert

    def profiled_insert(batch):
        if not profiles["on"]:
            return insert(batch)
        profiler = profiles.setdefault(threading.get_ident(), cProfile.Profile(time.thread_time))
        profiler.enable()
        try:
            return insert(batch)
        finally:
            profiler.disable()

    writebehind._insert = profiled_insert
    return profiles


def _when_started(server, then: Callable[[], None]) -> None:
    while not server.started and not server.should_exit:
        time.sleep(0.05)
    then()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--http", action="store_true", help="over HTTP: the event loop's CPU per request")
    parser.add_argument("--loop", default="auto", help="uvicorn's --loop for --http (auto, asyncio, uvloop)")
    parser.add_argument(
        "--save",
        type=Path,
        help="also write the cProfile stats here (pstats, snakeviz; --http: the ORM threads' in SAVE.orm)",
    )
    args = parser.parse_args()
    db = args.db or bench.ROOT / "var" / f"bench-mcp-{args.tools}.sqlite3"
    args.save = args.save.resolve() if args.save else None  # before _setup changes the working directory
    # every request pays the model, as distinct requests do
    os.environ.update(SCOUT_SEARCH_QUERY_CACHE_SIZE="0", SCOUT_MCP_EXPOSURE="meta")
    bench._setup(db)
    token = bench.bench_user()
    queries, _ = bench.bench_queries(args.queries + 10)
    if args.http:
        profile_http(args, token, queries)
    else:
        profile_in_process(args, token, queries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
