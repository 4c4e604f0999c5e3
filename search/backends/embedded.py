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
from collections.abc import Collection, Mapping, Sequence

from django.conf import settings

from ..choices import SearchEventKind
from ..encoder import model_key
from ..engine.snapshot import DocVectors, IndexSnapshot
from ..events import search_event_record
from ..models import IndexGeneration
from ..selectors import (
    current_generation_token,
    generation_changes,
    generation_mark,
    snapshot_vectors,
    tool_docs_load,
)
from .base import BackendStatus, IndexedTool, SearchBackend, SearchRequest, SearchResult
from .ranked import SnapshotDense, rank_request

logger = logging.getLogger(__name__)
# A generation changing more than this share of the tools is read whole (as fast as an update by then).
MAX_UPDATE_SHARE = 0.25


def release_memory(*, collect: bool = True) -> None:
    """Return memory freed by a snapshot build (or a replaced snapshot) to the OS.

    A build allocates millions of small transient objects (tokens, per-tool vector blocks); glibc keeps
    the freed arenas, so without a trim the process stays ~300 MB larger at 100k tools
    (bench/bench_search.py). Runs only when a generation changes, never per search. ``collect=False``:
    trim only, without a full garbage collection (after an update, which leaves no cycles worth it).
    """
    if collect:
        gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to trim
        pass


def quantized_table(vectors: Mapping[int, DocVectors]) -> bool:
    """Whether a whole build scans an int8 vector table (SCOUT_SEARCH_VECTOR_PRECISION; ``auto``: from
    SCOUT_SEARCH_HALF_MIN_VECTORS stored vectors on). Answers are the same either way; an update keeps the
    precision of the snapshot it updates."""
    mode = settings.SCOUT_SEARCH_VECTOR_PRECISION
    if mode == "auto":
        return sum(len(v.vectors) for v in vectors.values()) >= settings.SCOUT_SEARCH_HALF_MIN_VECTORS
    return mode in ("int8", "float16")  # float16: the former name of the scanned, re-scored table


class EmbeddedBackend(SearchBackend):
    name = "embedded"

    def __init__(self) -> None:
        self._snapshot: IndexSnapshot | None = None
        self._build_lock = threading.Lock()
        self.builds = 0  # snapshots read whole by this process (tests and diagnostics)
        self.updates = 0  # snapshots updated for changed tools only

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
                    self._swap(token)
            finally:
                self._build_lock.release()
        return self._snapshot

    def _swap(self, token: str) -> None:
        """Move to generation ``token`` (the build lock held)."""
        builds = self.builds
        self._snapshot = self._next(self._snapshot, token)
        # A whole build's garbage (millions of small objects) and the replaced snapshot go back to the OS. An
        # update's garbage has no cycles: a trim returns it, while a full collection over every document
        # costs more than the update itself (0.3 of 0.4 s at 10k tools).
        release_memory(collect=self.builds != builds)

    def _next(self, current: IndexSnapshot | None, token: str) -> IndexSnapshot:
        """The snapshot of generation ``token``: ``current`` updated for the tools changed since (their
        documents and vectors read, every other tool's reused), or, when that cannot be known, read whole."""
        mark = getattr(current, "generation_mark", None)
        if (
            mark is None
            or current.dense is None
            or not len(current.dense)
            or current.model_key != model_key()
            or current.dense.spill_waste() > len(current.dense)  # mostly replaced rows: compact
            or current.sparse.unused_words() > len(current.sparse.vocab) // 2
        ):
            return self._build(token)
        changes = generation_changes(mark, token)
        if changes is None or len(changes[1]) > max(MAX_UPDATE_SHARE * len(current), 100):
            return self._build(token)
        mark, pks = changes
        docs, vectors = snapshot_vectors(docs=tool_docs_load(pks=pks), model_key=current.model_key)
        snapshot = current.updated(docs, vectors, pks - {doc.pk for doc in docs}, generation=token)
        snapshot.generation_mark = mark
        self.updates += 1
        if len(vectors) < len(docs):
            search_event_record(
                kind=SearchEventKind.VECTORS_MISSING,
                detail=f"{len(docs) - len(vectors)} of {len(docs)} changed tools have no {current.model_key} "
                f"vectors (generation {token})",
            )
        logger.info("search: updated to generation %s (%d tools changed, %d tools)", token, len(pks), len(snapshot))
        return snapshot

    def _build(self, token: str) -> IndexSnapshot:
        mark = generation_mark(token)  # read before the documents: a generation finishing meanwhile is redone
        key = model_key()
        docs, vectors = snapshot_vectors(docs=tool_docs_load(), model_key=key)
        snapshot = IndexSnapshot(
            docs,
            vectors if vectors else None,
            generation=token,
            model_key=key,
            quantized=quantized_table(vectors),
            spill_dir=settings.SCOUT_SEARCH_VECTOR_SPILL_DIR,
        )
        snapshot.generation_mark = mark
        self.builds += 1
        if docs and len(vectors) < len(docs):
            search_event_record(
                kind=SearchEventKind.VECTORS_MISSING,
                detail=f"{len(docs) - len(vectors)} of {len(docs)} tools have no {key} vectors (generation {token})",
            )
        logger.info("search: loaded generation %s (%d tools, %d with vectors)", token, len(docs), len(vectors))
        return snapshot

    def publish(self, *, generation: str, tools: Sequence[IndexedTool], removed: Collection[int], full: bool) -> None:
        # The tools of an incremental generation go on its row, for the other processes (they update their
        # snapshots for these tools only when they see the new generation token). The vectors are in the
        # database already; this process updates its own snapshot now rather than on the next search. A
        # process that has never searched (a Celery worker) builds nothing: it would only hold an unused
        # index in memory.
        if not full:
            pks = sorted({tool.doc.pk for tool in tools} | {int(pk) for pk in removed})
            IndexGeneration.objects.filter(token=generation).update(tool_pks=pks)
        if self._snapshot is None:
            return
        with self._build_lock:
            if self._snapshot is not None and self._snapshot.generation != generation:
                self._swap(generation)

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
        return SnapshotDense(snapshot, vector, parts, request.memo)
