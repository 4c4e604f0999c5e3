"""The visibility cache's global version: bumped on every change that can alter who sees what.

Entries are keyed by this version, so a bump invalidates every principal's cached set at once. The bump runs
immediately and again after commit: a reader that computed a set from pre-commit rows can only have stored
it under the old version. If the cache is down, callers compute from the database (never fail open).
"""

import logging
import time

from django.core.cache import cache
from django.db import transaction

from .constants import VISIBILITY_VERSION_KEY

logger = logging.getLogger(__name__)


def visibility_version() -> int | None:
    """The current version, or None when the cache cannot be reached (callers then skip caching)."""
    try:
        version = cache.get(VISIBILITY_VERSION_KEY)
        if version is None:
            # Start from the clock, not 1: after an eviction, old entries must never become current again.
            cache.add(VISIBILITY_VERSION_KEY, time.time_ns(), timeout=None)
            version = cache.get(VISIBILITY_VERSION_KEY)
        return version
    except Exception:  # noqa: BLE001 - a cache outage must not break authorization, only slow it
        logger.warning("visibility cache unavailable; computing from the database", exc_info=True)
        return None


def _bump() -> None:
    try:
        try:
            cache.incr(VISIBILITY_VERSION_KEY)
        except ValueError:  # key missing
            cache.set(VISIBILITY_VERSION_KEY, time.time_ns(), timeout=None)
    except Exception:  # noqa: BLE001
        logger.error("could not bump the visibility cache version", exc_info=True)


def visibility_invalidate() -> None:
    """Invalidate every cached visible set, now and once the current transaction commits."""
    _bump()
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        return  # autocommit: the change is already committed, the bump above came after it
    # One bump per transaction is enough after commit; a sync may invalidate thousands of times.
    if not any(func is _bump for _, func, _ in connection.run_on_commit):
        transaction.on_commit(_bump)


def visibility_cache_reset() -> None:
    """Start a new version without a transaction (tests: a shared Redis outlives each test's database)."""
    _bump()
