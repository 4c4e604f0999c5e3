"""tool_search over HTTP at 10k tools, against the encoder floor of the same run (a benchmark, not a test).

    .venv/bin/python bench/bench_mcp_http.py [--tools 10000] [--queries 200] [--workers 2] [--db PATH]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scout_bench .venv/bin/python bench/bench_mcp_http.py

1. A throwaway SQLite database (``--db``, default var/bench-mcp-<tools>.sqlite3, reused when it already
   holds the catalog), or the Postgres database named by DATABASE_URL (use one of your own: it is
   migrated and filled), gets a catalog of ``--tools`` tools: the public catalogs under ../shared/eval
   (SCOUT_EVAL_DIR) read at run time, then perturbed copies on renamed servers until the size is reached;
   a small template catalog when the data is absent. The search index is built once with the real model
   (10k tools, 21k texts: 12 to 17 minutes on the shared 2-core machine; ``--prepare-only`` stops there).
2. The gateway runs as ``uvicorn scoutsite.asgi:application --workers N`` on a free port, and one user with
   discover on every server calls ``tool_search`` over Streamable HTTP (protocol 2026-07-28, raw JSON-RPC
   POSTs, bearer token).
3. Figures, all from this run: errors, p50/p95/p99 and throughput at concurrency 1, 16 and 64 (64 for
   ``--duration`` seconds), and
   - encode p95: the model encoding one query in this process (one torch thread, as in the server);
   - p95 at concurrency 1, and its ratio to the encode p95 (target <= 2x);
   - throughput at concurrency 16, against the encode-bound ceiling 2 cores / mean encode time
     (target >= 70%), and against the ceiling measured in the same run (thr/meas: 2 processes encoding
     one query at a time together; on a shared machine the nominal one assumes cores nobody else uses);
   - concurrency 64: 0 errors, p99 against the encode p95 (target <= 10x);
   - the gateway processes' CPU per answered request (srv cpu) against the CPU of one encode (cpu/enc):
     a shared machine stretches wall times, much less CPU times, so this says what the gateway costs
     beyond the model whatever the load;
   - how each run's gateway CPU fell on the workers (workers, busiest first in percent): a run whose load
     landed on one worker ("100/0") had one core, and its throughput says so, not the gateway's cost.
   The server's cache of recent request vectors is off (SCOUT_SEARCH_QUERY_CACHE_SIZE=0) unless
   ``--query-cache``: the load repeats its queries, and every request must pay the model to compare
   with the encode floor.
Queries are the public query files' request texts (read at run time, never stored) when present, else
requests built from tool names.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# SCOUT_BENCH_ROOT: another checkout to measure (e.g. the base commit, for a before/after in one sitting).
ROOT = Path(os.environ.get("SCOUT_BENCH_ROOT") or Path(__file__).resolve().parent.parent)
MODERN = "2026-07-28"
CORES = 2
NO_PROGRESS = False  # --no-progress: plain lines even on a terminal
# --timeline: every timed request as (concurrency, seconds from its run's start to its send, latency ms, and
# the wall clock at its send, to set beside the server's logs)
TIMELINE: list[tuple[int, float, float, float]] = []


def _setup(db: Path) -> None:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["SQLITE_PATH"] = str(db.resolve())  # unused when DATABASE_URL names a Postgres database
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "0"  # nothing reindexes behind our back; we build once
    os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
    sys.path.insert(0, str(ROOT))
    # Celery's Django fixup puts the working directory first on sys.path at setup: from ROOT, the measured
    # checkout's code is imported (the encode floor, the syncs), not the code of the directory it was run from.
    os.chdir(ROOT)
    import django

    django.setup()


def eval_dir() -> Path:
    return Path(os.environ.get("SCOUT_EVAL_DIR") or ROOT.parent / "shared" / "eval")


def base_tools() -> tuple[list[dict], str]:
    paths = sorted(eval_dir().glob("catalog-*.jsonl"))
    tools: list[dict] = []
    for path in paths:
        with path.open(encoding="utf-8") as handle:
            tools += [json.loads(line) for line in handle if line.strip()]
    tools = [t for t in tools if isinstance(t.get("server"), str) and isinstance(t.get("name"), str)]
    if tools:
        return tools, f"{len(paths)} public catalogs"
    verbs = ["get", "list", "create", "update", "delete", "search", "send", "export", "archive", "sync"]
    nouns = ["issue", "file", "message", "invoice", "user", "event", "report", "order", "ticket", "page"]
    for verb in verbs:
        for noun in nouns:
            tools.append(
                {
                    "server": f"{noun}s",
                    "name": f"{verb}_{noun}",
                    "description": f"{verb.title()} a {noun} by id or by its attributes.",
                    "inputSchema": {"type": "object", "properties": {f"{noun}_id": {"type": "string"}}},
                }
            )
    return tools, "a template catalog (../shared/eval absent)"


def _perturb(text: str, rng: random.Random) -> str:
    words = text.split()
    if len(words) > 4:
        words = [w for w in words if rng.random() > 0.15]
    return " ".join(words)


def catalog(size: int, seed: int = 7) -> tuple[dict[str, list[dict]], str]:
    """``size`` raw tools grouped by server slug: the base tools, then perturbed copies on renamed servers."""
    from catalog.services.imports import normalize_server_slug

    tools, origin = base_tools()
    rng = random.Random(seed)
    picked = list(tools)
    replica = 0
    while len(picked) < size:
        replica += 1
        for tool in tools:
            if len(picked) >= size:
                break
            picked.append(
                {
                    **tool,
                    "server": f"{tool['server']}-r{replica}",
                    "description": _perturb(str(tool.get("description") or ""), rng),
                }
            )
    servers: dict[str, list[dict]] = {}
    for tool in picked[:size]:
        raw = {k: tool[k] for k in ("name", "description", "inputSchema", "annotations", "title") if k in tool}
        servers.setdefault(normalize_server_slug(tool["server"]), []).append(raw)
    return servers, origin + (f" + copies on {replica} renamed server sets" if replica else "")


def prepare_db(size: int) -> tuple[int, str]:
    """Import the catalog and build the index unless the database already holds it. Returns (tools, origin)."""
    from django.conf import settings
    from django.core.management import call_command

    from catalog.models import Server, Tool

    call_command("migrate", verbosity=0)
    existing = Tool.objects.filter(removed_at__isnull=True).count()
    if existing == size:
        _analyze()
        return existing, "reused"
    from catalog.definitions import normalize_listing
    from catalog.services.apply import catalog_apply_listing
    from search.services import index_rebuild

    servers, origin = catalog(size)
    started = time.monotonic()
    with _progress("importing", unit="servers") as progress:
        for done, (slug, raws) in enumerate(servers.items(), start=1):
            server, _ = Server.objects.get_or_create(slug=slug, defaults={"name": slug, "transport": "imported"})
            max_bytes = settings.SCOUT_MAX_TOOL_DEFINITION_BYTES
            definitions, _rejected, mentioned = normalize_listing(raws, max_bytes=max_bytes)
            catalog_apply_listing(server=server, definitions=definitions, keep_names=mentioned, notify=False)
            progress(done, len(servers))
    print(f"imported {Tool.objects.count()} tools on {len(servers)} servers in {time.monotonic() - started:.0f}s")
    started = time.monotonic()
    with _progress("encoding", unit="texts") as progress:
        index_rebuild(progress=progress)
    print(f"built the index in {time.monotonic() - started:.0f}s")
    _analyze()
    return Tool.objects.filter(removed_at__isnull=True).count(), origin


def database_name(db: Path) -> str:
    """Where the catalog is: the SQLite file, or the Postgres database DATABASE_URL names (no password shown)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return str(db)
    params = connection.settings_dict
    return f"Postgres database {params['NAME']} on {params['HOST'] or 'localhost'}:{params['PORT'] or 5432}"


def _analyze() -> None:
    """Planner statistics for the freshly filled tables (Postgres; SQLite plans without them). Without them the
    visible-set query at 10k tools took 1.1 s instead of 0.1 s (a bitmap scan of every live tool per server),
    and concurrent first searches ran into the statement timeout ("database is busy" answers at c=16)."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")


def bench_user() -> str:
    """A user with discover on every server (through a group); returns a fresh API token."""
    from datetime import timedelta

    from django.contrib.auth.models import Group, User
    from django.utils import timezone

    from catalog.models import Server
    from governance.models import ServerGroupObjectPermission
    from governance.services.permissions import permission_for
    from governance.services.tokens import api_token_create

    user, _ = User.objects.get_or_create(username="bench-mcp")
    group, _ = Group.objects.get_or_create(name="bench-mcp")
    user.groups.add(group)
    permission = permission_for(target=Server.objects.first(), action="discover")
    have = set(ServerGroupObjectPermission.objects.filter(group=group).values_list("content_object_id", flat=True))
    ServerGroupObjectPermission.objects.bulk_create(
        [
            ServerGroupObjectPermission(group=group, permission=permission, content_object_id=pk)
            for pk in Server.objects.exclude(pk__in=have).values_list("pk", flat=True)
        ]
    )
    _, raw = api_token_create(
        user=user, name="bench", scopes=["discover"], expires_at=timezone.now() + timedelta(hours=2)
    )
    return raw


def bench_queries(count: int, seed: int = 3) -> tuple[list[str], str]:
    from catalog.models import Tool

    rng = random.Random(seed)
    texts: list[str] = []
    for path in sorted(eval_dir().glob("queries-*.jsonl")):
        with path.open(encoding="utf-8") as handle:
            texts += [json.loads(line).get("query") for line in handle if line.strip()]
    texts = [t for t in texts if isinstance(t, str) and 0 < len(t) <= 1000]
    if len(texts) >= count:
        return rng.sample(texts, count), "public query files (sampled)"
    names = list(Tool.objects.order_by("?").values_list("name", flat=True)[:count])
    return [f"please {re.sub(r'[_-]+', ' ', n)} for me" for n in names], "requests built from tool names"


def encode_times(queries: list[str]) -> tuple[list[float], float]:
    """Wall milliseconds of encoding each query, and the mean CPU milliseconds per query."""
    from search.encoder import encoder_get

    encoder = encoder_get()
    encoder.encode(["warm up"])
    times = []
    cpu_started = time.process_time()
    with _progress("encode timing", unit="queries") as progress:
        for done, query in enumerate(queries, start=1):
            started = time.perf_counter()
            encoder.encode([query])
            times.append((time.perf_counter() - started) * 1000)
            progress(done, len(queries))
    return times, (time.process_time() - cpu_started) * 1000 / len(queries)


def process_tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its descendants (Linux /proc; nan elsewhere):
    the gateway's cost per request, which other processes on a shared machine do not inflate as they do
    wall times."""
    total, todo = 0.0, [pid]
    try:
        while todo:
            current = todo.pop()
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
    except (OSError, ValueError):
        return float("nan")
    return total


def worker_cpu(pid: int) -> dict[int, float]:
    """CPU seconds used so far by each direct child of ``pid`` (uvicorn's workers), with its own children."""
    try:
        children = [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return {}
    workers = [child for child in children if b"resource_tracker" not in _cmdline(child)]
    return {child: process_tree_cpu(child) for child in workers}


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def worker_split(before: dict[int, float], after: dict[int, float]) -> str:
    """How a run's gateway CPU fell on the workers, busiest first, in percent ("52/48"). A client opening its
    connections at once can land them all on one worker (its event loop accepts every connection waiting when it
    wakes, and a kept-alive connection stays on it), which halves the CPU the run can use on 2 cores."""
    spent = sorted((after[pid] - before.get(pid, 0.0) for pid in after), reverse=True)
    total = sum(spent)
    if not spent or total <= 0 or total != total:
        return "-"
    return "/".join(f"{100 * value / total:.0f}" for value in spent)


def _encode_for(args: tuple[str, list[str], float]) -> int:
    """In a fresh process: load the encoder, then encode one query at a time for ``seconds``; the count."""
    db, queries, seconds = args
    _setup(Path(db))
    from search.encoder import encoder_get

    encoder = encoder_get()
    encoder.encode(["warm up"])
    done, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        encoder.encode([queries[done % len(queries)]])
        done += 1
    return done


def parallel_encode_rate(db: Path, queries: list[str], processes: int = CORES, seconds: float = 15.0) -> float:
    """Queries per second that ``processes`` processes encoding one query at a time reach together, now: the
    encode-bound ceiling as measured on this (shared) machine, beside the nominal cores / mean encode."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        counts = pool.map(_encode_for, [(str(db), queries, seconds)] * processes)
    return sum(counts) / seconds


def _progress(label: str, *, unit: str) -> Any:
    """A bar on stderr when it is a terminal (else plain lines): done of total, rate, time left."""
    from catalog.progress import progress_reporter

    return progress_reporter(sys.stderr, label, unit=unit, disabled=NO_PROGRESS)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gateway(port: int, workers: int, query_cache: bool, root: Path = ROOT) -> subprocess.Popen:
    """The gateway of the checkout at ``root`` under uvicorn on ``port``, once it accepts connections."""
    command = [
        str(root / ".venv" / "bin" / "uvicorn"),
        "scoutsite.asgi:application",
        "--http",  # the run command's protocol (make run, manage.py demo)
        "scoutsite.serving:BoundedH11Protocol",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    env = {**os.environ, "SCOUT_MCP_EXPOSURE": "meta", "SCOUT_MCP_RATE": "1000000/minute"}  # counted, never reached
    if not query_cache:
        env["SCOUT_SEARCH_QUERY_CACHE_SIZE"] = "0"
    process = subprocess.Popen(command, cwd=root, env=env)
    deadline = time.monotonic() + 600  # a loaded machine: the 10k snapshot read alone took 69 s at load 12
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise RuntimeError("the gateway did not start")


def search_request(token: str, query: str, request_id: int) -> tuple[str, dict[str, str]]:
    """A tool_search call over Streamable HTTP (modern protocol): its JSON body and headers."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    }
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "tool_search", "arguments": {"query": query, "top_k": 5}, "_meta": meta},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "tool_search",
    }
    return json.dumps(body), headers


async def _search(client, url: str, token: str, query: str, request_id: int) -> float:
    body, headers = search_request(token, query, request_id)
    started = time.perf_counter()
    response = await client.post(url, content=body, headers=headers)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200 or '"isError":true' in response.text or '"error"' in response.text[:200]:
        raise RuntimeError(f"tool_search failed: {response.status_code} {response.text[:300]}")
    return elapsed


async def run_load(
    url: str, token: str, queries: list[str], concurrency: int, duration: float | None = None
) -> tuple[list[float], float, list[str]]:
    """Every query once (or cycling through them until ``duration`` seconds), ``concurrency`` at a time.
    Returns (latencies of the successful requests in ms, elapsed seconds, error messages)."""
    import httpx

    latencies: list[float] = []
    errors: list[str] = []
    work = list(enumerate(queries))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    label = f"searching c={concurrency}" + (f" for {duration:.0f}s" if duration else "")
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        with _progress(label, unit="s" if duration else "requests") as progress:
            started = time.perf_counter()
            deadline = started + duration if duration else None
            counter = iter(range(10**9))

            def report() -> None:
                # The duration run counts elapsed whole seconds (its request count is not known ahead).
                if duration:
                    progress(min(int(time.perf_counter() - started), int(duration)), int(duration))
                else:
                    progress(len(latencies) + len(errors), len(queries))

            async def worker() -> None:
                while True:
                    if deadline is not None:
                        if time.perf_counter() >= deadline:
                            return
                        request_id = next(counter)
                        query = queries[request_id % len(queries)]
                    elif work:
                        request_id, query = work.pop()
                    else:
                        return
                    try:
                        sent, sent_at = time.perf_counter() - started, time.time()
                        latencies.append(await _search(client, url, token, query, request_id))
                        TIMELINE.append((concurrency, sent, latencies[-1], sent_at))
                    except Exception as exc:  # noqa: BLE001 - counted and reported, the load goes on
                        errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                    report()

            await asyncio.gather(*(worker() for _ in range(concurrency)))
            elapsed = time.perf_counter() - started
            if duration:
                progress(int(duration), int(duration))
        return latencies, elapsed, errors


def warm_up(url: str, token: str, queries: list[str], concurrency: int, rounds: int = 8) -> None:
    """Load the model and the snapshot in every worker before timing: rounds of concurrent requests (so
    each worker gets some) until one round has no request far slower than its median (no worker was still
    loading), at most ``rounds`` rounds."""
    for _ in range(rounds):
        latencies, _, _ = asyncio.run(run_load(url, token, queries[: concurrency * 2], concurrency))
        if latencies and max(latencies) < 4 * statistics.median(latencies):
            return


def sync_to_visible(url: str, token: str, rounds: int) -> list[float]:
    """Seconds from the end of a sync (a new tool applied to a server's listing and its index generation
    published, as the reindex task does) until the live server's tool_search answers with that tool."""
    import httpx

    from catalog.definitions import normalize_listing
    from catalog.models import Server, Tool
    from catalog.services.apply import catalog_apply_listing
    from search.services import index_update

    server = Server.objects.order_by("pk").first()
    delays = []
    for round_ in range(rounds):
        word = f"zorblax{os.getpid()}x{round_}"
        current = [
            {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
            for t in Tool.objects.filter(server=server, removed_at__isnull=True)
        ]
        new = {"name": f"{word}_ledger", "description": f"Frobnicate the {word} ledger quarterly.", "inputSchema": {}}
        definitions, _rejected, mentioned = normalize_listing([*current, new], max_bytes=10**6)
        applied = catalog_apply_listing(server=server, definitions=definitions, keep_names=mentioned, notify=False)
        index_update(tool_pks=applied.touched_pks)
        synced = time.perf_counter()  # the sync's end: its generation is committed and published
        tool_id = f"{server.slug}::{word}_ledger"
        with httpx.Client(timeout=60) as client:
            while time.perf_counter() - synced < 60:
                body, headers = search_request(token, f"frobnicate the {word} ledger", 1)
                if tool_id in client.post(url, content=body, headers=headers).text:
                    break
        delays.append(time.perf_counter() - synced)
        # The original listing again: the tool is removed and the catalog keeps its size for the next run.
        definitions, _rejected, mentioned = normalize_listing(current, max_bytes=10**6)
        applied = catalog_apply_listing(server=server, definitions=definitions, keep_names=mentioned, notify=False)
        index_update(tool_pks=applied.touched_pks)
    return delays


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def p95(values: list[float]) -> float:
    return percentile(values, 0.95)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--high-concurrency", type=int, default=64)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of the high-concurrency run")
    parser.add_argument("--query-cache", action="store_true", help="keep the server's request-vector cache on")
    parser.add_argument("--sync-rounds", type=int, default=5, help="syncs timed until visible (0: none)")
    parser.add_argument("--db", type=Path)
    parser.add_argument("--prepare-only", action="store_true", help="build the database and index, then stop")
    parser.add_argument("--no-progress", action="store_true", help="plain progress lines instead of bars")
    parser.add_argument(
        "--timeline", type=Path, help="write each timed request (concurrency, sent at s, latency ms) as JSON lines"
    )
    args = parser.parse_args()
    global NO_PROGRESS
    NO_PROGRESS = args.no_progress
    if args.timeline:
        args.timeline = args.timeline.resolve()  # before _setup changes the working directory
    db = args.db or ROOT / "var" / f"bench-mcp-{args.tools}.sqlite3"
    db.parent.mkdir(parents=True, exist_ok=True)
    _setup(db)
    size, origin = prepare_db(args.tools)
    if args.prepare_only:
        print(f"{size} tools ready in {database_name(db)}")
        return 0
    token = bench_user()
    queries, query_origin = bench_queries(args.queries)
    encode, encode_cpu = encode_times(queries)
    measured_ceiling = parallel_encode_rate(db, queries)
    port = free_port()
    gateway = start_gateway(port, args.workers, args.query_cache)
    url = f"http://127.0.0.1:{port}/mcp"
    runs = []
    try:
        warm_up(url, token, queries, args.concurrency)
        TIMELINE.clear()
        high = args.high_concurrency
        for concurrency, load, duration in (
            (1, queries, None),
            (args.concurrency, queries * 2, None),
            (high, queries, args.duration),
        ):
            cpu_before, workers_before = process_tree_cpu(gateway.pid), worker_cpu(gateway.pid)
            result = asyncio.run(run_load(url, token, load, concurrency, duration=duration))
            split = worker_split(workers_before, worker_cpu(gateway.pid))
            runs.append((concurrency, *result, process_tree_cpu(gateway.pid) - cpu_before, split))
        freshness = sync_to_visible(url, token, args.sync_rounds) if args.sync_rounds else []
    finally:
        gateway.send_signal(signal.SIGINT)
        gateway.wait(60)
    if args.timeline:
        with args.timeline.open("w", encoding="utf-8") as handle:
            for concurrency, sent, latency, sent_at in TIMELINE:
                line = {"c": concurrency, "sent_s": round(sent, 4), "ms": round(latency, 2), "at": round(sent_at, 4)}
                handle.write(json.dumps(line) + "\n")
    encode_p95, encode_mean = p95(encode), statistics.fmean(encode)
    ceiling = CORES / (encode_mean / 1000)
    database = "postgres" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
    print(
        f"\n{size} tools ({origin}); {len(queries)} queries ({query_origin}); uvicorn --workers {args.workers}; "
        f"{database}; request-vector cache {'on' if args.query_cache else 'off'}"
    )
    print(
        f"encode one query (same run): p50 {statistics.median(encode):.1f} ms, p95 {encode_p95:.1f} ms, "
        f"mean {encode_mean:.1f} ms; encode-bound ceiling {CORES} cores / mean = {ceiling:.1f} req/s"
    )
    print(
        f"measured encode-bound ceiling ({CORES} processes encoding at once, same run): {measured_ceiling:.1f} req/s "
        f"(the machine is shared: {os.getloadavg()[0]:.1f} load average at the end)"
    )
    print(
        f"encode CPU per query (same run): {encode_cpu:.1f} ms; srv cpu: the gateway processes' CPU ms per "
        "answered request, and its ratio to the encode CPU (the part of the gateway's cost that is not the model)"
    )
    print(
        f"{'concurrency':>11} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
        f"{'req/s':>7} {'p95/enc':>8} {'p99/enc':>8} {'thr/ceil':>8} {'thr/meas':>8} {'srv cpu':>8} {'cpu/enc':>8} "
        f"{'workers':>8}"
    )
    for concurrency, latencies, elapsed, errors, cpu, split in runs:
        cpu_ms = cpu * 1000 / max(1, len(latencies) + len(errors))
        throughput = len(latencies) / elapsed
        print(
            f"{concurrency:>11} {len(latencies) + len(errors):>8} {len(errors):>6} "
            f"{statistics.median(latencies) if latencies else float('nan'):>8.1f} {p95(latencies):>8.1f} "
            f"{percentile(latencies, 0.99):>8.1f} {throughput:>7.1f} {p95(latencies) / encode_p95:>8.2f} "
            f"{percentile(latencies, 0.99) / encode_p95:>8.2f} {throughput / ceiling:>8.2f} "
            f"{throughput / measured_ceiling:>8.2f} {cpu_ms:>8.1f} {cpu_ms / encode_cpu:>8.2f} {split:>8}"
        )
        for message in sorted(set(errors))[:3]:
            print(f"{'':>11} error: {message}")
    if freshness:
        print(
            f"sync end -> visible in the live server's answer, {len(freshness)} syncs: median "
            f"{statistics.median(freshness):.2f} s, max {max(freshness):.2f} s (target <= 1 s)"
        )
    serial, loaded, high_run = runs
    # Little's law: with c requests always in flight, the mean latency is c / throughput, and p99 >= the mean.
    # The gateway's CPU per request bounds the throughput (2 cores / CPU), so p99 at c=64 >= 32 x that CPU.
    high_mean = high_run[0] / (len(high_run[1]) / high_run[2]) * 1000
    print(
        f"c={high_run[0]} by Little's law: mean latency = concurrency / throughput = {high_mean:.0f} ms "
        f"= {high_mean / encode_p95:.1f} x encode p95 (the p99 cannot be lower); p99 / that mean "
        f"{percentile(high_run[1], 0.99) / high_mean:.2f}"
    )
    print(
        "targets: c=1 p95/enc <= 2.0 (" + f"{p95(serial[1]) / encode_p95:.2f}); "
        f"c={args.concurrency} thr/ceil >= 0.70 ({len(loaded[1]) / loaded[2] / ceiling:.2f}); "
        f"c={high_run[0]} errors 0 ({len(high_run[3])}) and p99/enc <= 10 "
        f"({percentile(high_run[1], 0.99) / encode_p95:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
