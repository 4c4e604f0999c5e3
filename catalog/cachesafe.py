"""Cache calls that never fail a request (SECURITY-TESTS F4).

Django's RedisCache raises on a connection error, so a Redis outage would turn every search and execute
into an error. On the hot path the cache is only an accelerator: a read that fails is a miss, a write that
fails is skipped, and the caller computes from the database instead (authorization never trusts the cache
to allow anything). After a failure the cache is left alone for ``SCOUT_CACHE_RETRY_SECONDS`` so an
unreachable Redis costs one connection timeout, not one per call; then the next call tries it again, which
is how traffic recovers once Redis is back. The state is per process.

The calls go to one cache object per process (``shared_cache``), not to ``django.core.cache.cache``: that one is
kept per context (asgiref's ``Local``), and under ASGI every request is a context of its own, so every request
built its own backend, for Redis its own connection pool: a new TCP connection (connect, handshake, close) in each
thread a request's cache calls ran on, the rate guard's and the search's (issue 9: 23 connections for 12 requests;
a read on a new connection cost 2.1 ms of CPU against 0.6 on a pooled one, at load 17).
redis-py's pool is shared safely by threads, and LocMemCache objects of one LOCATION share one store, so one
object serves the whole process the same values.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, caches
from django.core.cache.backends.base import BaseCache
from django.core.signals import setting_changed
from django.dispatch import receiver

logger = logging.getLogger(__name__)

T = TypeVar("T")
_down_until = 0.0
_shared: BaseCache | None = None


def shared_cache() -> BaseCache:
    """The default cache, one object for the whole process (module note); made anew after CACHES changes."""
    global _shared
    if _shared is None:
        _shared = caches.create_connection(DEFAULT_CACHE_ALIAS)
    return _shared


@receiver(setting_changed)
def _caches_changed(*, setting: str, **kwargs: Any) -> None:
    global _shared
    if setting == "CACHES":
        _shared = None


def cache_call(method: str, *args: Any, default: Any = None, **kwargs: Any) -> Any:
    """``cache.<method>(*args, **kwargs)``, or ``default`` when the cache fails (or failed moments ago)."""
    return cache_run(lambda cache: getattr(cache, method)(*args, **kwargs), default=default)


def cache_run(work: Callable[[BaseCache], T], *, default: T) -> T:
    """``work(shared_cache())``, or ``default`` when the cache fails (or failed moments ago): for work the
    cache API has no one call for (a Redis script)."""
    global _down_until
    if time.monotonic() < _down_until:
        return default
    try:
        return work(shared_cache())
    except Exception as exc:  # noqa: BLE001 - any backend error (connection, timeout, protocol) is an outage
        _down_until = time.monotonic() + float(settings.SCOUT_CACHE_RETRY_SECONDS)
        logger.warning("cache unavailable (%s: %s); computing without it", type(exc).__name__, exc)
        return default


def cache_available() -> bool:
    """False while a recent failure keeps the cache out of use."""
    return time.monotonic() >= _down_until


def cache_reset() -> None:
    """Forget a recent failure (tests; an operator who knows the cache is back)."""
    global _down_until
    _down_until = 0.0
