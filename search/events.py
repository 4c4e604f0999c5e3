"""Fallback events: logged every time, stored as a SearchEvent at most once a minute per kind and process."""

import logging
import threading
import time

from .models import SearchEvent

logger = logging.getLogger("search")
THROTTLE_SECONDS = 60.0
_last: dict[str, float] = {}
_lock = threading.Lock()
counters: dict[str, int] = {}


def search_event_record(*, kind: str, detail: str) -> None:
    """Log a fallback, count it, and store it unless the same kind was stored in the last minute."""
    logger.warning("search fallback %s: %s", kind, detail)
    now = time.monotonic()
    with _lock:
        counters[kind] = counters.get(kind, 0) + 1
        if now - _last.get(kind, -THROTTLE_SECONDS) < THROTTLE_SECONDS:
            return
        _last[kind] = now
    try:
        SearchEvent.objects.create(kind=kind, detail=detail[:2000])
    except Exception:  # recording must never break a search (e.g. a read-only replica)
        logger.exception("search: could not store event %s", kind)


def search_events_reset() -> None:
    with _lock:
        _last.clear()
        counters.clear()
