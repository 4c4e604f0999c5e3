"""The embedded backend: an in-process snapshot (sparse matrix + vector table) built from the database.

Every process keeps one immutable ``IndexSnapshot``. Before a search it compares the snapshot's
generation token with the current one (a cached value, refreshed every few seconds), rebuilds a new
snapshot aside when it changed and swaps the reference; concurrent searches keep using the old snapshot
until the swap, so none sees a half-built index. Works on SQLite and Postgres alike.
"""

import ctypes
import gc
import logging
import threading
from collections.abc import Collection, Sequence

from django.conf import settings

from ..choices import SearchEventKind
from ..encoder import model_key
from ..engine.snapshot import IndexSnapshot
from ..events import search_event_record
from ..selectors import current_generation_token, stored_vectors, tool_docs_load
from .base import BackendStatus, IndexedTool, SearchBackend, SearchRequest, SearchResult
from .ranked import SnapshotDense, rank_request

logger = logging.getLogger(__name__)


def release_memory() -> None:
    """Return memory freed by a snapshot build (or a replaced snapshot) to the OS.

    A build allocates millions of small transient objects (tokens, per-tool vector blocks); glibc keeps
    the freed arenas, so without a trim the process stays ~300 MB larger at 100k tools
    (bench/bench_search.py). Runs only when a generation changes, never per search.
    """
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to trim
        pass


class EmbeddedBackend(SearchBackend):
    name = "embedded"

    def __init__(self) -> None:
        self._snapshot: IndexSnapshot | None = None
        self._build_lock = threading.Lock()
        self.builds = 0  # snapshots built by this process (tests and diagnostics)

    # -- index -------------------------------------------------------------------------------------------
    def snapshot(self) -> IndexSnapshot | None:
        """The snapshot of the current generation, rebuilding it if the generation moved."""
        token = current_generation_token()
        if token is None:
            return None
        current = self._snapshot
        if current is not None and current.generation == token:
            return current
        # Only one thread builds; the others keep answering from the old snapshot meanwhile.
        if self._build_lock.acquire(blocking=current is None):
            try:
                if self._snapshot is None or self._snapshot.generation != token:
                    self._snapshot = self._build(token)
                    release_memory()  # the build's garbage and the replaced snapshot
            finally:
                self._build_lock.release()
        return self._snapshot

    def _build(self, token: str) -> IndexSnapshot:
        docs = tool_docs_load()
        key = model_key()
        vectors = stored_vectors(docs=docs, model_key=key)
        snapshot = IndexSnapshot(
            docs,
            vectors if vectors else None,
            generation=token,
            model_key=key,
            half=settings.SCOUT_SEARCH_VECTOR_PRECISION == "float16",
            spill_dir=settings.SCOUT_SEARCH_VECTOR_SPILL_DIR,
        )
        self.builds += 1
        if docs and len(vectors) < len(docs):
            search_event_record(
                kind=SearchEventKind.VECTORS_MISSING,
                detail=f"{len(docs) - len(vectors)} of {len(docs)} tools have no {key} vectors (generation {token})",
            )
        logger.info("search: loaded generation %s (%d tools, %d with vectors)", token, len(docs), len(vectors))
        return snapshot

    def publish(self, *, generation: str, tools: Sequence[IndexedTool], removed: Collection[int], full: bool) -> None:
        # The vectors are in the database already; rebuild this process's snapshot now rather than on the
        # next search. Other processes follow when they see the new generation token. A process that has
        # never searched (a Celery worker) builds nothing: it would only hold an unused index in memory.
        if self._snapshot is None:
            return
        snapshot = self._build(generation)
        with self._build_lock:
            self._snapshot = snapshot
        del snapshot
        release_memory()  # the build's garbage and the replaced snapshot

    def status(self) -> BackendStatus:
        snapshot = self.snapshot()
        if snapshot is None:
            return BackendStatus(False, None, 0)
        return BackendStatus(len(snapshot) > 0, snapshot.generation, len(snapshot))

    def reset(self) -> None:
        with self._build_lock:
            self._snapshot = None

    # -- search ------------------------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> SearchResult:
        snapshot = self.snapshot()
        if snapshot is None or len(snapshot) == 0:
            return SearchResult([], index_ready=False, backend=self.name)
        return rank_request(snapshot, request, self.dense_source(snapshot, request), backend=self.name)

    @staticmethod
    def dense_source(snapshot: IndexSnapshot, request: SearchRequest) -> SnapshotDense | None:
        """The snapshot's vector table for this request; None (BM25 only) without a usable query vector."""
        vector = request.query_vector
        if vector is None or snapshot.dense is None or vector.shape[0] != snapshot.dense.dim:
            return None  # no model, no vectors, or vectors from another model: never compare across models
        parts = [part for _, part in request.parts]
        if any(part is None for part in parts):
            return None
        return SnapshotDense(snapshot, vector, parts)
