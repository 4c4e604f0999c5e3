"""ORM access from the async MCP handlers.

Django closes stale connections around each of its own requests; MCP messages do not pass through that
cycle, so ``run_orm`` does the same around each piece of ORM work (honouring CONN_MAX_AGE).

The work runs in the event loop's thread pool, not asgiref's single thread-sensitive thread: that thread
made every search of a worker wait for the one before it (model, ranking and ORM alike), so a worker
served one request at a time however many were waiting. Each piece of work is self-contained (its own
connection per thread, its own transaction), which is all thread-sensitivity protected.
"""

from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections

from catalog.dbbusy import database_busy

T = TypeVar("T")


def _with_fresh_connection(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    close_old_connections()
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()


async def run_orm(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` run synchronously off the event loop, with connection hygiene."""
    return await sync_to_async(_with_fresh_connection, thread_sensitive=False)(fn, args, kwargs)


class DatabaseBusy(Exception):
    """The database is locked or too slow: the operation did not happen; the client may try again."""


BUSY_TEXT = (
    "Scout's database is busy right now, so this request was not carried out (no tool was called). "
    "Try again in a few seconds."
)


async def run_orm_or_busy(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``run_orm``, raising DatabaseBusy (and nothing from the database driver) when the database is locked."""
    try:
        return await run_orm(fn, *args, **kwargs)
    except DatabaseError as exc:
        if database_busy(exc):
            raise DatabaseBusy() from exc
        raise
