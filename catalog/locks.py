"""A named, non-blocking lock with a TTL, kept in the process's shared cache: a redis-py lock when that cache is
Redis (REDIS_URL), else an atomic cache add.

The TTL bounds how long a crashed holder can block others; keep it above the longest run it guards. Locks borrow a
connection from the shared cache's pool (catalog.cachesafe.shared_cache) rather than open one each.
"""

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.cache.backends.base import BaseCache

from catalog.cachesafe import shared_cache
from catalog.rediscache import ScoutRedisCache

logger = logging.getLogger(__name__)

KEY_PREFIX = "scout:lock:"


@contextmanager
def named_lock(name: str, *, ttl: int) -> Iterator[bool]:
    """Try once to take the lock; yields whether it was taken, and releases it on exit if so."""
    cache = shared_cache()
    lock = _redis_lock if isinstance(cache, ScoutRedisCache) else _cache_lock
    with lock(cache, name, ttl=ttl) as acquired:
        yield acquired


@contextmanager
def _redis_lock(cache: ScoutRedisCache, name: str, *, ttl: int) -> Iterator[bool]:
    import redis

    # A redis-py lock releases only its own token, atomically (a Lua script), which the cache API cannot do.
    lock = cache.redis_client().lock(KEY_PREFIX + name, timeout=ttl, blocking=False)
    acquired = bool(lock.acquire(blocking=False))
    try:
        yield acquired
    finally:
        if acquired:
            try:
                lock.release()
            except redis.exceptions.LockError:
                # The TTL ran out while we held it: someone else may hold it now; theirs to release.
                logger.warning("lock %s expired before it was released", name)


@contextmanager
def _cache_lock(cache: BaseCache, name: str, *, ttl: int) -> Iterator[bool]:
    key = KEY_PREFIX + name
    token = uuid.uuid4().hex
    acquired = cache.add(key, token, timeout=ttl)  # add is atomic: only one caller creates the key
    try:
        yield acquired
    finally:
        # Delete only our own token, so an expired-and-retaken lock is not released from under its new holder.
        if acquired and cache.get(key) == token:
            cache.delete(key)
