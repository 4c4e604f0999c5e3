"""Where one tool_search's time goes: in process (token check + gateway_search), or over HTTP (``--http``).

    .venv/bin/python bench/profile_gateway_search.py [--tools 10000] [--queries 60] [--db PATH]
    .venv/bin/python bench/profile_gateway_search.py --http [--tools 10000] [--queries 200] [--db PATH]

Uses the database bench_mcp_http.py prepares (run it with --prepare-only first).

In process: the CPU per request of each stage of the request path (the kept token's confirmation, as the
gateway's token cache serves every request after a token's first; visibility, encode, ranking, the answer, query
log, audit); the same by kind of request (single-step, multi-step, retried: withheld, then its parts encoded alone
and ranked again) and for the slowest 5%, which set the c=1 p95, beside the encode floor of the same texts; the
same requests again, their matched tools' descriptors now kept (the first pass reads and builds them, as
bench_mcp_http.py's c=1 run does for most of its requests); then cProfile's top functions by cumulative CPU time
over the same requests. ``SCOUT_SEARCH_WITHHOLD_THRESHOLD=0 SCOUT_SEARCH_WITHHOLD_FLAT_THRESHOLD=0`` keeps random
tool vectors (bench/random_vectors_db.py) from withholding, and so retrying, every multi-step request.

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
import gc
import os
import pstats
import statistics
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
    "answer": ("mcpgateway.services.discovery", "_answer"),  # descriptors (read and built, or kept), why lines
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
    try:  # the gateway's warm-up builds this table (mcpgateway.server.gateway_warm_up); before perf11 it did not
        from governance.sanitize import as_read_warm_up

        as_read_warm_up()
    except ImportError:
        pass
    gc.collect()  # as the gateway's warm-up leaves its heap (mcpgateway.server.gateway_warm_up)
    gc.freeze()
    for values in stage_ms.values():
        values.clear()

    def timed_pass() -> list[tuple[str, float, dict[str, float]]]:
        """Each request's (kind, CPU ms, CPU ms per stage)."""
        per_request = []
        for query in timed_queries:
            before = {name: (len(values), sum(values)) for name, values in stage_ms.items()}
            request_started = time.thread_time()
            search(query)
            spent = (time.thread_time() - request_started) * 1000
            stages = {name: sum(values) - before[name][1] for name, values in stage_ms.items()}
            rankings = len(stage_ms["rank (backend.search)"]) - before["rank (backend.search)"][0]
            per_request.append((_request_kind(query, rankings), spent, stages))
        return per_request

    per_request = timed_pass()
    total = sum(ms for _, ms, _ in per_request) / len(timed_queries)
    print(f"\nCPU per request (kept token confirmed + gateway_search), in process: {total:.1f} ms")
    for name, values in stage_ms.items():
        if values:
            print(f"  {name:<24} {sum(values) / len(timed_queries):7.2f} ms/request  ({len(values)} calls)")
    _print_by_kind(per_request, timed_queries)
    # The first pass shows most matched tools for the first time (their descriptors read and built: bench_mcp_http's
    # c=1 run, after a warm-up of 32 requests, does the same); the second shows them from SearchDescriptors.
    again = timed_pass()
    print(
        f"\nThe same requests again (descriptors kept): {sum(ms for _, ms, _ in again) / len(again):.1f} ms a request, "
        f"answer {statistics.fmean(stages['answer'] for _, _, stages in again):.2f} ms "
        f"(first pass {statistics.fmean(stages['answer'] for _, _, stages in per_request):.2f} ms)"
    )
    print("\ncProfile of the same requests again (CPU time, thread_time; its overhead inflates Python-heavy code):")
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    for query in timed_queries:
        search(query)
    profile.disable()
    pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)
    if args.save:
        profile.dump_stats(args.save)


def _request_kind(query: str, rankings: int) -> str:
    """single-step, multi-step (served from its first search) or retried (withheld, its parts encoded alone and
    ranked again: a second model call and ranking)."""
    from search.engine.decompose import request_part_spans

    if rankings > 1:
        return "retried"
    return "multi-step" if request_part_spans(" ".join(query.split())) else "single-step"


def _print_by_kind(per_request: list[tuple[str, float, dict[str, float]]], queries: list[str]) -> None:
    """The c=1 p95 is set by the slowest twentieth of the requests: their CPU by kind and stage, against the same
    texts' encode floor (``encode([query])``, as bench_mcp_http.py times it), p95 over p95 as its ratio."""
    from search.encoder import encoder_get

    encoder = encoder_get()
    floor = []
    for query in queries:
        started = time.thread_time()
        encoder.encode([query])
        floor.append((time.thread_time() - started) * 1000)
    spent = [ms for _, ms, _ in per_request]
    print(
        f"\nCPU per request: p50 {bench.percentile(spent, 0.5):.2f}, p95 {bench.p95(spent):.2f} ms; "
        f"encode floor of the same texts: p50 {bench.percentile(floor, 0.5):.2f}, p95 {bench.p95(floor):.2f} ms; "
        f"p95/p95 {bench.p95(spent) / bench.p95(floor):.2f}"
    )
    tail = bench.p95(spent)
    groups = {
        "single-step": [r for r in per_request if r[0] == "single-step"],
        "multi-step": [r for r in per_request if r[0] == "multi-step"],
        "retried": [r for r in per_request if r[0] == "retried"],
        "slowest 5%": [r for r in per_request if r[1] >= tail],
    }
    names = [name for name in STAGES if name != "encode"] + ["encode"]
    # rest: the answer, the retry's second model call (encode_queries of the parts alone), the rest of the request
    print(
        f"  {'kind':<12} {'n':>4} {'mean':>7} {'p95':>7}  " + " ".join(f"{name[:12]:>12}" for name in [*names, "rest"])
    )
    for kind, rows in groups.items():
        if not rows:
            continue
        cpu = [ms for _, ms, _ in rows]
        means = [statistics.fmean(stages[name] for _, _, stages in rows) for name in names]
        means.append(statistics.fmean(cpu) - sum(means))
        print(
            f"  {kind:<12} {len(rows):>4} {statistics.fmean(cpu):7.2f} {bench.p95(cpu):7.2f}  "
            + " ".join(f"{value:12.2f}" for value in means)
        )


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
