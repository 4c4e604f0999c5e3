"""A named, non-blocking lock with a TTL: Redis when REDIS_URL is set, else the Django cache.

The TTL bounds how long a crashed holder can block others; keep it above the longest run it guards.
"""

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)

KEY_PREFIX = "scout:lock:"


@contextmanager
def named_lock(name: str, *, ttl: int) -> Iterator[bool]:
    """Try once to take the lock; yields whether it was taken, and releases it on exit if so."""
    if settings.REDIS_URL:
        with _redis_lock(name, ttl=ttl) as acquired:
            yield acquired
    else:
        with _cache_lock(name, ttl=ttl) as acquired:
            yield acquired


@contextmanager
def _redis_lock(name: str, *, ttl: int) -> Iterator[bool]:
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    lock = client.lock(KEY_PREFIX + name, timeout=ttl, blocking=False)
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
        client.close()


@contextmanager
def _cache_lock(name: str, *, ttl: int) -> Iterator[bool]:
    key = KEY_PREFIX + name
    token = uuid.uuid4().hex
    acquired = cache.add(key, token, timeout=ttl)  # add is atomic: only one caller creates the key
    try:
        yield acquired
    finally:
        # Delete only our own token, so an expired-and-retaken lock is not released from under its new holder.
        if acquired and cache.get(key) == token:
            cache.delete(key)
