"""Search backends by name: ``SCOUT_SEARCH_BACKEND`` picks one ("embedded" by default)."""

import threading

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .base import BackendStatus, IndexedTool, Match, RequestMemo, SearchBackend, SearchRequest, SearchResult

BACKENDS = {
    "embedded": "search.backends.embedded.EmbeddedBackend",
    "weaviate": "search.backends.weaviate.WeaviateBackend",
}
_instances: dict[str, SearchBackend] = {}
_lock = threading.Lock()


def backend_get(name: str | None = None) -> SearchBackend:
    """The process-wide instance of the configured (or named) backend."""
    name = name or settings.SCOUT_SEARCH_BACKEND
    if name not in BACKENDS:
        raise ImproperlyConfigured(f"SCOUT_SEARCH_BACKEND={name!r}; choose one of {sorted(BACKENDS)}")
    with _lock:
        if name not in _instances:
            _instances[name] = import_string(BACKENDS[name])()
        return _instances[name]


def backends_reset() -> None:
    """Forget in-process index state of every backend (tests, after the database was reset)."""
    with _lock:
        for backend in _instances.values():
            backend.reset()


__all__ = [
    "BackendStatus",
    "IndexedTool",
    "Match",
    "RequestMemo",
    "SearchBackend",
    "SearchRequest",
    "SearchResult",
    "backend_get",
    "backends_reset",
]
