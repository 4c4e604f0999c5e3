"""What one warmed tool_search costs the database and the cache: statements, round trips, connections, Redis
commands, and CPU per thread kind (a benchmark tool, not a test; the counts do not depend on the machine's load).

    .venv/bin/python bench/count_round_trips.py --tools 300 --requests 200
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scout_bench REDIS_URL=redis://127.0.0.1:6379/3 \
        .venv/bin/python bench/count_round_trips.py --tools 300 --requests 200

The gateway runs as bench_mcp_http.py runs it (uvicorn, the run command's protocol, request-vector cache off) on a
small catalog it prepares. It is warmed, then ``--requests`` tool_searches are sent one at a time, and what they
cost is counted from outside the request path:

- Postgres: the gateway talks to the database through a proxy here that reads the frontend protocol: connections
  (startup messages), simple queries ('Q'), extended-protocol statements (Parse/Execute) and round trips (a 'Q'
  or a Sync waits for the server), each statement's text by kind (BEGIN, COMMIT, SAVEPOINT, SET, SELECT <table>);
- Redis: the same, a proxy reading RESP: connections and each command by name and key prefix;
- SQLite: every statement the library runs (``set_trace_callback``, installed by a ``sitecustomize`` on the
  gateway's path), which includes BEGIN and COMMIT;
- CPU: each worker thread's from /proc, by kind (event loop, ORM threads, write-behind, others).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_mcp_http as bench  # noqa: E402
from profile_gateway_load import thread_cpu  # noqa: E402

# Put on the gateway's path as sitecustomize.py: thread names for /proc (Python 3.11 gives the kernel none), and on
# SQLite every statement the library runs, with its thread's name.
GATEWAY_HOOKS = """
import ctypes, os, threading

_libc = ctypes.CDLL(None)
_bootstrap = threading.Thread._bootstrap_inner

def _named(self):
    _libc.prctl(15, self.name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    _bootstrap(self)

threading.Thread._bootstrap_inner = _named

if os.environ.get("SCOUT_COUNT_SQL_TRACE"):
    from django.db.backends.signals import connection_created

    def _traced(sender, connection, **kwargs):
        if connection.vendor != "sqlite":
            return
        out = open(os.environ["SCOUT_COUNT_SQL_TRACE"] + f".{os.getpid()}", "a", buffering=1)
        connection.connection.set_trace_callback(
            lambda sql: out.write(threading.current_thread().name + "\\t" + " ".join(sql.split()) + "\\n")
        )

    connection_created.connect(_traced, weak=False)

if os.environ.get("SCOUT_COUNT_CONNECTIONS"):
    from django.db.backends.signals import connection_created

    def _opened(sender, connection, **kwargs):
        with open(os.environ["SCOUT_COUNT_CONNECTIONS"] + f".{os.getpid()}", "a") as out:
            out.write(threading.current_thread().name + "\\n")

    connection_created.connect(_opened, weak=False)
"""


def statement_kind(sql: str) -> str:
    """A statement's kind: its verb, with the table for reads and writes."""
    words = sql.strip().split()
    verb = words[0].upper() if words else "?"
    if verb in ("SELECT", "INSERT", "UPDATE", "DELETE"):
        match = re.search(r'\b(?:FROM|INTO|UPDATE)\s+"?([a-z_0-9]+)"?', sql, re.IGNORECASE)
        return f"{verb} {match.group(1)}" if match else " ".join(words)[:60]
    if verb in ("RELEASE", "ROLLBACK") and "SAVEPOINT" in sql.upper():
        return f"{verb} SAVEPOINT"
    return verb


class Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()

    def snapshot(self) -> tuple[Counter[str], Counter[str]]:
        with self.lock:
            return Counter(self.events), Counter(self.kinds)

    def add(self, event: str, kind: str | None = None) -> None:
        with self.lock:
            self.events[event] += 1
            if kind:
                self.kinds[kind] += 1


def postgres_messages(counts: Counts, data: bytes, started: list[bool]) -> bytes:
    """Count the complete frontend messages in ``data``; return the incomplete rest."""
    while True:
        if not started[0]:
            if len(data) < 8:
                return data
            length, code = struct.unpack("!II", data[:8])
            if len(data) < length:
                return data
            if code == 196608:  # protocol 3.0: the startup message
                counts.add("connections")
                started[0] = True
            data = data[length:]
            continue
        if len(data) < 5:
            return data
        tag, length = data[:1], struct.unpack("!I", data[1:5])[0]
        if len(data) < 1 + length:
            return data
        body, data = data[5 : 1 + length], data[1 + length :]
        if tag == b"Q":
            sql = body.rstrip(b"\0").decode(errors="replace")
            counts.add("simple queries", statement_kind(sql))
            counts.add("round trips")
        elif tag == b"P":
            sql = body.split(b"\0", 2)[1].decode(errors="replace")
            counts.add("parses", statement_kind(sql))
        elif tag == b"E":
            counts.add("executes")
        elif tag == b"S":
            counts.add("round trips")
        elif tag == b"X":
            counts.add("terminations")


def redis_commands(counts: Counts, data: bytes, _state: list[bool]) -> bytes:
    """Count the complete RESP commands in ``data``; return the incomplete rest."""
    while data.startswith(b"*"):
        head, sep, rest = data.partition(b"\r\n")
        if not sep:
            return data
        parts = []
        for _ in range(int(head[1:])):
            size_line, sep, rest = rest.partition(b"\r\n")
            if not sep or len(rest) < int(size_line[1:]) + 2:
                return data
            size = int(size_line[1:])
            parts.append(rest[:size])
            rest = rest[size + 2 :]
        data = rest
        name = parts[0].decode(errors="replace").upper()
        key = parts[1].decode(errors="replace") if len(parts) > 1 else ""
        if name in ("EVAL", "EVALSHA"):
            key = f"(a script) {' '.join(p.decode(errors='replace') for p in parts[3 : 3 + int(parts[2])])}"
        key = re.sub(r"[0-9a-f]{16,}|\d{5,}", "#", key.split(":", 1)[-1])  # :1:mcp-rate:<hash>:<slot> -> shape
        counts.add("commands", f"{name} {key}".strip())
        if name == "HELLO":
            counts.add("connections")
    return data


def start_proxy(target: tuple[str, int], counts: Counts, parse) -> int:
    """A TCP proxy to ``target`` in a thread, feeding what clients send to ``parse``; returns its port."""
    port = bench.free_port()

    async def pipe(reader, writer, state=None):
        pending = b""
        try:
            while chunk := await reader.read(65536):
                if state is not None:
                    pending = parse(counts, pending + chunk, state)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def client(reader, writer):
        up_reader, up_writer = await asyncio.open_connection(*target)
        await asyncio.gather(pipe(reader, up_writer, [False]), pipe(up_reader, writer))

    async def serve():
        server = await asyncio.start_server(client, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
    for _ in range(50):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return port
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the proxy did not start")


def proxied(url: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


def sqlite_counts(trace: Path) -> tuple[Counter[str], Counter[str]]:
    events: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for path in trace.parent.glob(trace.name + ".*"):
        for line in path.read_text(errors="replace").splitlines():
            thread, _, sql = line.partition("\t")
            events["statements"] += 1
            events["statements on " + re.sub(r"-\d+$", "", thread)] += 1
            kinds[statement_kind(sql)] += 1
    return events, kinds


def connections_opened(trace_dir: Path) -> Counter[str]:
    """Database connections the gateway's workers opened so far, by thread kind (the hook's files)."""
    return Counter(
        re.sub(r"-\d+$", "", line) for path in trace_dir.glob("connections.*") for line in path.read_text().splitlines()
    )


def thread_names(pid: int) -> dict[int, str]:
    """Each thread's name as the kernel has it (Python 3.14 names its threads there, cut to 15 characters)."""
    names = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            names[int(task.name)] = (task / "comm").read_text().strip()
        except OSError:
            continue
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=300)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--db", type=Path)
    args = parser.parse_args()
    db = args.db or bench.ROOT / "var" / f"bench-mcp-{args.tools}.sqlite3"
    bench.NO_PROGRESS = True
    bench._setup(db)
    bench.prepare_db(args.tools)
    token = bench.bench_user()
    queries, _ = bench.bench_queries(args.requests)
    database, redis = Counts(), Counts()
    trace_dir = Path(tempfile.mkdtemp(prefix="count-round-trips-"))
    trace = trace_dir / "sql"
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        url = urlsplit(os.environ["DATABASE_URL"])
        port = start_proxy((url.hostname or "127.0.0.1", url.port or 5432), database, postgres_messages)
        os.environ["DATABASE_URL"] = proxied(os.environ["DATABASE_URL"], port)
    else:
        os.environ["SCOUT_COUNT_SQL_TRACE"] = str(trace)
    os.environ["SCOUT_COUNT_CONNECTIONS"] = str(trace_dir / "connections")
    (trace_dir / "sitecustomize.py").write_text(GATEWAY_HOOKS)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(trace_dir), os.environ.get("PYTHONPATH")]))
    if os.environ.get("REDIS_URL"):
        url = urlsplit(os.environ["REDIS_URL"])
        port = start_proxy((url.hostname or "127.0.0.1", url.port or 6379), redis, redis_commands)
        os.environ["REDIS_URL"] = proxied(os.environ["REDIS_URL"], port)
    port = bench.free_port()
    gateway = bench.start_gateway(port, args.workers, query_cache=False)
    endpoint = f"http://127.0.0.1:{port}/mcp"
    flush_wait = 1.0 + 2 * float(os.environ.get("SCOUT_WRITE_BEHIND_SECONDS", 0.25))
    try:
        bench.warm_up(endpoint, token, queries, 4)
        asyncio.run(bench.run_load(endpoint, token, queries[:20], 1))
        time.sleep(flush_wait)  # the warm-up's queued records written
        workers = list(bench.worker_cpu(gateway.pid))
        before = {pid: thread_cpu(pid) for pid in workers}
        names = {pid: thread_names(pid) for pid in workers}
        db_before, redis_before = database.snapshot(), redis.snapshot()
        sqlite_before = sqlite_counts(trace)
        opened_before = connections_opened(trace_dir)
        latencies, elapsed, errors = asyncio.run(bench.run_load(endpoint, token, queries, 1))
        time.sleep(flush_wait)  # this run's queued records written
        after = {pid: thread_cpu(pid) for pid in workers}
        for pid in workers:  # threads started during the run too (a thread that ended is not counted)
            names[pid] = thread_names(pid) | names[pid]
        db_after, redis_after = database.snapshot(), redis.snapshot()
        sqlite_after = sqlite_counts(trace)
        opened_after = connections_opened(trace_dir)
    finally:
        gateway.send_signal(signal.SIGINT)
        gateway.wait(60)
    n = len(latencies) + len(errors)
    vendor = "Postgres" if database.events else "SQLite"
    cache = "Redis" if redis.events else "LocMem"
    print(f"\n{n} tool_searches one at a time ({len(errors)} errors), {vendor}, {cache}")
    if vendor == "SQLite":
        db_before, db_after = sqlite_before, sqlite_after
    for title, (events0, kinds0), (events1, kinds1) in (
        ("database", db_before, db_after),
        ("redis", redis_before, redis_after),
    ):
        events, kinds = events1 - events0, kinds1 - kinds0
        if not events and not kinds:
            continue
        print(f"{title} per request:")
        for name, count in sorted(events.items()):
            print(f"  {name:<48} {count / n:7.3f}")
        for name, count in kinds.most_common():
            print(f"    {name:<46} {count / n:7.3f}")
    opened = opened_after - opened_before
    print("database connections opened per request, by thread:", {k: round(v / n, 3) for k, v in opened.items()})
    by_kind: Counter[str] = Counter()
    for pid in workers:
        for tid, seconds in after[pid].items():
            name = "event loop" if tid == pid else re.sub(r"-\d+$", "", names[pid].get(tid, "?"))
            by_kind[name] += seconds - before[pid].get(tid, 0.0)
    print(f"CPU ms per request by thread (/proc), {elapsed:.1f} s, load {os.getloadavg()[0]:.1f}:")
    for kind, seconds in by_kind.most_common():
        print(f"  {kind:<48} {seconds * 1000 / n:7.2f}")
    if errors:
        print("first error:", errors[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
