"""A named, non-blocking lock with a TTL, kept in the process's shared cache: a redis-py lock when that cache is
Redis (REDIS_URL), else an atomic cache add.

The TTL bounds how long a crashed holder can block others; keep it above the longest run it guards, or ask for the
lock to be ``renewed``: a thread of the holder's puts its TTL back every third of it while it is held, so a short TTL
runs out soon after the holder's process dies (a killed worker) and never while it lives. Locks borrow a connection
from the shared cache's pool (catalog.cachesafe.shared_cache) rather than open one each.
"""

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.core.cache.backends.base import BaseCache

from catalog.cachesafe import shared_cache
from catalog.rediscache import ScoutRedisCache

logger = logging.getLogger(__name__)

KEY_PREFIX = "scout:lock:"


@contextmanager
def named_lock(name: str, *, ttl: int, renewed: bool = False) -> Iterator[bool]:
    """Try once to take the lock; yields whether it was taken, and releases it on exit if so. ``renewed``: its TTL
    is put back every third of it while it is held (module note)."""
    cache = shared_cache()
    lock = _redis_lock if isinstance(cache, ScoutRedisCache) else _cache_lock
    with lock(cache, name, ttl=ttl) as renew:
        if not renew or not renewed:
            yield bool(renew)
            return
        with _renewing(renew, name, every=ttl / 3):
            yield True


@contextmanager
def _renewing(renew: Callable[[], bool], name: str, *, every: float) -> Iterator[None]:
    """``renew()`` every ``every`` seconds on a thread of its own until the block ends or it says the lock is lost."""
    done = threading.Event()

    def run() -> None:
        while not done.wait(every):
            try:
                if not renew():
                    logger.warning("lock %s expired before it was renewed", name)
                    return
            except Exception:  # the cache unreachable for a moment: the next round tries again
                logger.warning("lock %s could not be renewed", name, exc_info=True)

    thread = threading.Thread(target=run, name=f"lock-renew:{name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@contextmanager
def _redis_lock(cache: ScoutRedisCache, name: str, *, ttl: int) -> Iterator[Callable[[], bool] | None]:
    """Yields, when the lock was taken, what puts its TTL back (False once it is no longer this holder's)."""
    import redis

    # A redis-py lock releases only its own token, atomically (a Lua script), which the cache API cannot do.
    # Not thread-local: the renewing thread uses the token the taking thread got.
    lock = cache.redis_client().lock(KEY_PREFIX + name, timeout=ttl, blocking=False, thread_local=False)
    acquired = bool(lock.acquire(blocking=False))

    def renew() -> bool:
        try:
            return bool(lock.reacquire())
        except redis.exceptions.LockNotOwnedError:
            return False

    try:
        yield renew if acquired else None
    finally:
        if acquired:
            try:
                lock.release()
            except redis.exceptions.LockError:
                # The TTL ran out while we held it: someone else may hold it now; theirs to release.
                logger.warning("lock %s expired before it was released", name)


@contextmanager
def _cache_lock(cache: BaseCache, name: str, *, ttl: int) -> Iterator[Callable[[], bool] | None]:
    key = KEY_PREFIX + name
    token = uuid.uuid4().hex
    acquired = cache.add(key, token, timeout=ttl)  # add is atomic: only one caller creates the key

    def renew() -> bool:  # two steps, not atomic: only the TTL running out between them could renew another's
        return cache.get(key) == token and cache.touch(key, ttl)

    try:
        yield renew if acquired else None
    finally:
        # Delete only our own token, so an expired-and-retaken lock is not released from under its new holder.
        if acquired and cache.get(key) == token:
            cache.delete(key)
