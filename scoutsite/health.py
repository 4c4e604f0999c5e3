"""Health endpoints for orchestrators: ``/healthz`` (the process answers) and ``/readyz`` (it can serve).

Both are unauthenticated, cheap and JSON, and reveal no configuration: only check names and ok / not ok.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from catalog.cachesafe import shared_cache

logger = logging.getLogger(__name__)
READY_PROBE_KEY = "scout:readyz"


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """The process is alive and answering HTTP."""
    return JsonResponse({"status": "ok"})


def _database() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception:  # noqa: BLE001 - any failure means not ready
        logger.warning("readyz: database check failed", exc_info=True)
        return False


def _cache() -> bool:
    # The process's one backend, not Django's per-context ``cache``: that one is a new connection for every probe.
    # Not cache_call: a probe asks Redis itself each time, never a recent failure's answer.
    cache = shared_cache()
    try:
        cache.set(READY_PROBE_KEY, "1", timeout=10)
        return cache.get(READY_PROBE_KEY) == "1"
    except Exception:  # noqa: BLE001
        logger.warning("readyz: cache check failed", exc_info=True)
        return False


def _search_index() -> bool:
    from search.backends import backend_get
    from search.selectors import current_generation_token

    try:
        # warm(): the backend prepares in the background what its searches need (Weaviate: the connection
        # and the BM25 snapshot), so the first search does not.
        return current_generation_token() is not None and backend_get().warm()
    except Exception:  # noqa: BLE001
        logger.warning("readyz: search index check failed", exc_info=True)
        return False


def _model() -> str:
    from search.encoder import encoder_status, encoder_warm_in_background

    status = encoder_status()
    if status == "not_loaded":
        encoder_warm_in_background()  # ready on a later probe, instead of on the first search
        status = "loading"
    return status


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Ready to serve: database, cache (Redis when configured), a built search index and the model loaded.
    503 with the failing checks named when not."""
    database = _database()
    checks = {"database": "ok" if database else "unavailable"}
    if settings.REDIS_URL:
        checks["cache"] = "ok" if _cache() else "unavailable"
    # Which index generation is current is read from the database: without one, nobody knows ("not_built" sent
    # operators looking for an index that was there, opsux3).
    checks["search_index"] = ("ok" if _search_index() else "not_built") if database else "unknown"
    model = _model()
    checks["model"] = "ok" if model == "loaded" else model
    ready = all(value == "ok" for value in checks.values())
    return JsonResponse({"status": "ready" if ready else "not_ready", "checks": checks}, status=200 if ready else 503)
