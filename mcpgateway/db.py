"""ORM access from the async MCP handlers.

The work runs on the gateway's own ORM threads (``OrmThreads``), not asgiref's single thread-sensitive
thread: that thread made every search of a worker wait for the one before it (model, ranking and ORM alike),
so a worker served one request at a time however many were waiting. Each piece of work is self-contained
(its own transaction), which is all thread-sensitivity protected.

Each ORM thread keeps its database connection between pieces of work, for up to
SCOUT_MCP_DB_CONN_MAX_AGE seconds (``catalog.connections``; issue 9: a new connection per piece of work cost
~2 ms on SQLite and ~18 ms on Postgres, twice per tool_search). A connection is closed at once when the work
left it in a transaction or broken, and every connection is closed when the threads stop (the gateway's
lifespan ends).
The threads are few and live as long as the process, so the connections are bounded: one per thread.
A kept connection the server ended (a restart, a failover, an operator's pg_terminate_backend) within the idle
check's seconds fails the next work's first statement: that work is run once more on a new connection when it
had written nothing but pieces declared ``repeatable`` (``_once_more_if_lost``), so a read (tool_search,
tool_inspect, the check before a call) does not fail for it (opsux9), nor a sent call's outcome (redteam44).
Django's CONN_MAX_AGE still governs everything else (Django views under ASGI get a new thread per request,
where a kept connection would leak).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import re
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import DatabaseError, InterfaceError, OperationalError, connections

from catalog.connections import connections_checked, connections_close, connections_ready
from catalog.dbbusy import database_busy

T = TypeVar("T")
logger = logging.getLogger(__name__)
THREADS = 6  # the size asyncio's default executor had on these 2-core machines (cores + 4)


class OrmThreads(Executor):
    """A fixed set of threads for ORM work, each keeping its connection between calls (module note)."""

    def __init__(self, size: int = THREADS) -> None:
        self._size = size
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], Future] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future:
        with self._lock:
            if not self._threads:  # the first call, or the first after a shutdown
                self._threads = [
                    threading.Thread(target=self._run, args=(self._queue,), name=f"scout-orm-{i}", daemon=True)
                    for i in range(self._size)
                ]
                for thread in self._threads:
                    thread.start()
            future: Future = Future()
            self._queue.put((lambda: fn(*args, **kwargs), future))
        return future

    @staticmethod
    def _run(work_queue: queue.SimpleQueue) -> None:
        try:
            while (item := work_queue.get()) is not None:
                work, future = item
                if not future.set_running_or_notify_cancel():
                    continue
                connections_ready()
                try:
                    future.set_result(_once_more_if_lost(work))
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request
                    future.set_exception(exc)
                finally:
                    connections_checked()
        finally:
            connections_close()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the threads once the work queued so far is done; each closes its connections first."""
        with self._lock:
            threads, work_queue = self._threads, self._queue
            self._threads, self._queue = [], queue.SimpleQueue()
        for _ in threads:
            work_queue.put(None)
        if wait:
            for thread in threads:
                thread.join()


_threads = OrmThreads()


def orm_threads_stop() -> None:
    """Close the ORM threads' connections and stop them (the gateway's lifespan end; tests). The next
    ``run_orm`` starts new threads."""
    _threads.shutdown()


async def run_orm(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` run synchronously on an ORM thread, with connection hygiene."""
    return await sync_to_async(fn, thread_sensitive=False, executor=_threads)(*args, **kwargs)


def repeatable(fn: Callable[..., T]) -> Callable[..., T]:
    """Declares ``fn`` safe to run again whole when its database connection is lost while it runs: its writes are
    one transaction, so a failed run left nothing behind, or (only the commit's acknowledgement was lost) they all
    landed, and ``fn`` checks that first when ``running_again()`` (redteam45: the audit event written twice).
    ORM-thread work (``_once_more_if_lost``) that lost its connection inside ``fn``, having written nothing before
    it, is run once more on a new connection: work that must not be lost to a connection that went bad in the few
    seconds ``connections_ready`` does not ping it (a sent call's outcome, redteam44)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        if not _work.tracked or _work.wrote:
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError):
            _work.wrote = False  # what it sent may be sent again (above)
            raise

    return run


def running_again() -> bool:
    """Whether this ORM-thread work is its second run, after its connection was lost: a ``repeatable`` piece's
    first commit may have landed."""
    return _work.tracked and _work.again


def _connection_dropped() -> bool:
    """After an error of the connection's (not of a statement): close this thread's connections, so the next
    statement opens a new one, unless a caller's transaction is open (running again would not undo its writes).
    A connection the server ended may still answer one more statement: it is not asked whether it is usable."""
    if any(connection.in_atomic_block for connection in connections.all(initialized_only=True)):
        return False
    for connection in connections.all(initialized_only=True):
        connection.close()
    return True


class _Work(threading.local):
    """The piece of work this ORM thread runs (``tracked``): whether it sent a statement that may have changed
    something, outside a ``repeatable`` piece that lost its connection, and whether this is its second run."""

    tracked = False
    wrote = False
    again = False


_work = _Work()
READS = ("SELECT", "SAVEPOINT", "RELEASE", "ROLLBACK")  # statements that change nothing a new run would repeat
# A CTE changes data only through one of these (Postgres: a data-modifying WITH); a word in a quoted name counts too.
WRITES_IN_WITH = re.compile(r"\b(INSERT|UPDATE|DELETE|MERGE)\b", re.IGNORECASE)


def _may_write(sql: str) -> bool:
    """Whether a statement may change something (the SQL is Scout's own): every statement but a plain read, and a
    ``WITH ...`` read (a CTE) unless it names a write."""
    head = sql.lstrip()[:9].upper()
    if head.startswith("WITH"):
        return WRITES_IN_WITH.search(sql) is not None
    return not head.startswith(READS)


def _note_writes(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
    if many or _may_write(sql):
        _work.wrote = True
    return execute(sql, params, many, context)


def _once_more_if_lost(work: Callable[[], T]) -> T:
    """``work()``, run once more on a new connection when its connection was lost before it sent anything but
    reads (or ``repeatable`` pieces) and with no transaction left open: the kept connection the server ended within
    the idle check's seconds (module note). Work that sent any other write is not repeated (its outcome is not
    known); an error that is not the connection's (a statement's, "busy") is raised as it is."""
    try:
        return _tracked(work, again=False)
    except (OperationalError, InterfaceError) as exc:
        if _work.wrote or database_busy(exc) or not _connection_dropped():
            raise
        logger.warning("the database connection was lost before the work wrote anything; running it once more")
    return _tracked(work, again=True)


def _tracked(work: Callable[[], T], *, again: bool) -> T:
    _work.tracked, _work.wrote, _work.again = True, False, again
    try:
        with contextlib.ExitStack() as stack:
            for connection in connections.all():
                stack.enter_context(connection.execute_wrapper(_note_writes))
            return work()
    finally:
        _work.tracked = False


class DatabaseBusy(Exception):
    """The database is locked or too slow: the operation did not happen; the client may try again."""


BUSY_TEXT = (
    "Scout's database is busy right now, so this request was not carried out (no tool was called). "
    "Try again in a few seconds."
)


BUSY_CODE = -32000  # JSON-RPC's range for a server's own errors: the database's "not now"
BUSY_RETRY_AFTER = 5  # seconds a client is told to wait when the database could not serve its request


def busy_rpc_error() -> dict[str, Any]:
    """The JSON-RPC error of a request the database could not serve (no tool result to carry ``service_busy``)."""
    return {"code": BUSY_CODE, "message": BUSY_TEXT, "data": {"service_busy": True}}


async def run_orm_or_busy(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``run_orm``, raising DatabaseBusy (and nothing from the database driver) when the database is locked."""
    try:
        return await run_orm(fn, *args, **kwargs)
    except DatabaseError as exc:
        if database_busy(exc):
            raise DatabaseBusy() from exc
        raise
