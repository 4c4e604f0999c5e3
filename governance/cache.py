"""The visibility cache's version: changes with every write that can alter who sees what.

The source of truth is one database row (``VisibilityVersion``), rewritten with a new random token in the
same transaction as the change. Cached visible sets are keyed by it, so every process (web workers, Celery,
``manage.py shell``, an import) sees a change made by any other on its next request, with the embedded
LocMem cache as with Redis: reading it is one primary-key SELECT. A reader that saw the old token can only
have cached under it; a token written by a transaction that rolled back never comes back.

The cache holds a second part, a generation: ``visibility_cache_reset`` renews it for a shared cache that
outlives a database (tests roll back and repeat primary keys). If the cache is down, callers compute from
the database (never fail open).
"""

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from django.db import connection

from catalog.cachesafe import cache_available, cache_call, shared_cache

from .constants import VISIBILITY_VERSION_KEY

logger = logging.getLogger(__name__)
ROW = 1
T = TypeVar("T")
_NOT_READ = object()


class ReadOnce:
    """A value read at most once per block of work (issue 9: a search asked for the same version or generation
    several times). ``block()`` opens one (a context manager, usable as a decorator; a nested block shares the
    outer one's); within it ``read(fetch)`` calls ``fetch`` the first time and answers that value again;
    ``forget()`` makes the next ``read`` fetch anew. Outside a block every ``read`` fetches. Per context
    (a ``ContextVar``), so concurrent requests on other threads or tasks never share a value."""

    def __init__(self, name: str) -> None:
        self._held: ContextVar[list[Any] | None] = ContextVar(name, default=None)

    @contextmanager
    def block(self) -> Iterator[None]:
        if self._held.get() is not None:
            yield
            return
        marker = self._held.set([_NOT_READ])
        try:
            yield
        finally:
            self._held.reset(marker)

    def read(self, fetch: Callable[[], T]) -> T:
        held = self._held.get()
        if held is None:
            return fetch()
        if held[0] is _NOT_READ:
            held[0] = fetch()
        return held[0]

    def forget(self) -> None:
        held = self._held.get()
        if held is not None:
            held[0] = _NOT_READ


# The row token read by the piece of work in progress (``visibility_row_read_once``).
_row_once = ReadOnce("scout_visibility_row_read_once")


# What one request read about who may see what, by key (``request_memo``): forgotten with the version.
_memo_once = ReadOnce("scout_request_memo")


def request_memo_block() -> AbstractContextManager[None]:
    """Within this block (one request, ``scoutsite.middleware.memo_per_request``) ``request_memo`` answers the
    same dict, which ``visibility_invalidate`` empties: a write in the request that can change who sees what (a
    membership, a grant) is read anew after it, as is every other request."""
    return _memo_once.block()


def request_memo() -> dict[Any, Any]:
    """The block's memo, or outside a block a new empty dict each call (nothing kept)."""
    return _memo_once.read(dict)


def visibility_row_read_once() -> AbstractContextManager[None]:
    """Within this block ``visibility_row_token`` reads the row once and answers that token again (issue 9:
    a search confirms its token, fetches its visible set and its descriptors, each keyed by the version).

    Safe for one short piece of work such as a search: each reader still gets a token read before the data
    it keys on (earlier, not later), so nothing is kept under a version a change committed before the read
    did not rewrite. ``visibility_invalidate`` in the block forgets the token. Nested blocks share the
    outer one's."""
    return _row_once.block()


def visibility_row_token() -> str:
    """The database half of the version alone, read without the cache: what a process-local cache keys on
    when it must follow every change in every process even with the cache down (the gateway's verified
    tokens: token saves, revocations, users, tenants and agents all rewrite it). Read once per
    ``visibility_row_read_once`` block."""
    return _row_once.read(_row_token_per_request)


def _row_token_per_request() -> str:
    # Outside such a block, once per request (``request_memo``, forgotten with the version as the block's is): an
    # approver's inbox read it 5 times, once per selector keying on the version. Read before the data keyed on it.
    memo = request_memo()
    if "visibility_row_token" not in memo:
        memo["visibility_row_token"] = _row_token_fetch()
    return memo["visibility_row_token"]


def _row_token_fetch() -> str:
    from .models import VisibilityVersion

    token = _row_token_read(VisibilityVersion._meta.db_table)
    if token is None:  # a fresh or flushed database
        VisibilityVersion.objects.bulk_create(
            [VisibilityVersion(pk=ROW, token=uuid.uuid4().hex)], ignore_conflicts=True
        )
        token = VisibilityVersion.objects.filter(pk=ROW).values_list("token", flat=True).get()
    return token


def _row_token_read(table: str) -> str | None:
    # Plain SQL: read on every gateway request (once a search), where building the ORM query
    # cost more than running it.
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT token FROM {connection.ops.quote_name(table)} WHERE id = %s", [ROW])
        row = cursor.fetchone()
    return row[0] if row is not None else None


def _cache_generation() -> int | None:
    # A cache outage must not break authorization, only slow it: cache_call answers None instead of raising.
    generation = cache_call("get", VISIBILITY_VERSION_KEY)
    if generation is None and cache_available():
        # Start from the clock, not 1: after an eviction, old entries must never become current again.
        cache_call("add", VISIBILITY_VERSION_KEY, time.time_ns(), timeout=None)
        generation = cache_call("get", VISIBILITY_VERSION_KEY)
    return generation


def visibility_version() -> str | None:
    """The current version, or None when the cache cannot be reached (callers then skip caching)."""
    generation = _cache_generation()
    if generation is None:
        return None
    return f"{generation}.{visibility_row_token()}"


def visibility_invalidate() -> None:
    """Invalidate every cached visible set in every process, as part of the current transaction (if any).

    Called after each change (signal receivers, services, catalog's bulk writes), never before it: a later
    change in the same transaction writes a new token again, so nothing read in between stays current."""
    from .models import VisibilityVersion
    from .signals import visibility_changed

    _row_once.forget()  # the work in progress reads the new token on its next read
    _memo_once.forget()  # ... and a person's tenants (principal_for_user)
    token = uuid.uuid4().hex
    if not VisibilityVersion.objects.filter(pk=ROW).update(token=token):
        VisibilityVersion.objects.bulk_create([VisibilityVersion(pk=ROW, token=token)], ignore_conflicts=True)
        VisibilityVersion.objects.filter(pk=ROW).update(token=token)
    visibility_changed.send(sender=VisibilityVersion)


def visibility_cache_reset() -> None:
    """Start a new cache generation without the database (tests: a shared Redis outlives each test's
    database, and a rolled-back database returns to an earlier token)."""
    cache = shared_cache()  # the backend the version is read from, not a per-context one
    try:
        try:
            cache.incr(VISIBILITY_VERSION_KEY)
        except ValueError:  # key missing
            cache.set(VISIBILITY_VERSION_KEY, time.time_ns(), timeout=None)
    except Exception:  # noqa: BLE001
        logger.error("could not renew the visibility cache generation", exc_info=True)
