"""Cache calls that never fail a request (SECURITY-TESTS F4).

Django's RedisCache raises on a connection error, so a Redis outage would turn every search and execute
into an error. On the hot path the cache is only an accelerator: a read that fails is a miss, a write that
fails is skipped, and the caller computes from the database instead (authorization never trusts the cache
to allow anything). After a failure the cache is left alone for ``SCOUT_CACHE_RETRY_SECONDS`` so an
unreachable Redis costs one connection timeout, not one per call; then the next call tries it again, which
is how traffic recovers once Redis is back. The state is per process.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)

_down_until = 0.0


def cache_call(method: str, *args: Any, default: Any = None, **kwargs: Any) -> Any:
    """``cache.<method>(*args, **kwargs)``, or ``default`` when the cache fails (or failed moments ago)."""
    global _down_until
    if time.monotonic() < _down_until:
        return default
    try:
        return getattr(cache, method)(*args, **kwargs)
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
