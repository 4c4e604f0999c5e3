"""The search backend interface: what an engine must do, nothing about how.

The service (``search.services``) validates the request, encodes the query once (or not, when the model
is down) and hands the backend a ``SearchRequest``. The indexing service stores vectors in the database
and hands the backend the tools of a new generation with ``publish``. A backend:

- applies ``request.visible`` inside its query: a tool outside it must change nothing in the answer
  (results, order, scores, counts), and the backend must not compute statistics over hidden tools;
- answers from one published generation at a time (never a half-built index);
- reports ``index_ready=False`` instead of failing when it has no index.
"""

from abc import ABC, abstractmethod
from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..documents import ToolDoc
from ..engine.ranking import Confidence
from ..engine.snapshot import DocVectors


class RequestMemo:
    """Scores the searches of one request share: tool_search searches a withheld multi-step request again
    with its parts encoded alone, and that search's BM25 scores (the request's and its parts') and the
    request's own dense scores are the first search's. Made per request and dropped with it, never shared
    between requests or callers. A value is kept with its scope, the objects it was computed from (the
    snapshot, the visible set), and reused only for those very objects: a new generation meanwhile, or
    other tools, computes afresh."""

    def __init__(self) -> None:
        # key -> (the scope's ids, the scope itself: held, so no other object takes an id meanwhile, value)
        self._values: dict[Hashable, tuple[tuple[int, ...], tuple[object, ...], Any]] = {}

    def get(self, scope: tuple[object, ...], key: Hashable) -> Any:
        """The value kept under ``key`` for ``scope`` (the same objects); None if none."""
        kept = self._values.get(key)
        return kept[2] if kept is not None and kept[0] == tuple(map(id, scope)) else None

    def put(self, scope: tuple[object, ...], key: Hashable, value: Any) -> None:
        self._values[key] = (tuple(map(id, scope)), scope, value)


@dataclass(frozen=True)
class SearchRequest:
    query: str  # validated, control characters removed
    visible: Collection[int]  # Tool pks the caller may see
    top_k: int  # already clamped to 1..20
    fusion: str  # "convex" | "rrf"
    query_vector: np.ndarray | None  # unit vector from the configured model; None when it is unavailable
    # Steps of a multi-step request with their vectors (may be ignored by a backend that cannot use them).
    parts: tuple[tuple[str, np.ndarray | None], ...] = ()
    explain: bool = True
    # False (curator preview only): keep the ranking where the answer would be withheld; ``confidence``
    # still says so.
    enforce_abstention: bool = True
    # Shared by the searches of one request (tool_search's retry); None: every score computed afresh.
    memo: RequestMemo | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Match:
    tool_pk: int
    tool_id: str
    name: str
    server: str
    title: str
    summary: str
    score: float  # calibrated relevance, 0..1, comparable across queries
    fused_rank: int
    bm25_rank: int | None  # rank among visible tools in the BM25 branch (None: no term matched)
    dense_rank: int | None  # rank among visible tools in the dense branch (None: no dense branch)
    why_matched: dict[str, Any] = field(default_factory=dict)
    # Within the dynamic cut on its own score (``Ranking.on_merit``), not kept only as one of an answer's first
    # few: the gateway shows the full input schema of such matches only.
    on_merit: bool = True


@dataclass(frozen=True)
class SearchResult:
    matches: list[Match]
    index_ready: bool  # False: no usable index; the gateway lists the caller's tools directly
    degraded: bool = False  # True: BM25 only (model unavailable or no vectors)
    # high / low (a ranking the model should check) / none (withheld: no visible tool fits). Decided by
    # search.engine.ranking.answer_confidence; every caller shows this value, none decides its own.
    confidence: Confidence = Confidence.HIGH
    generation: str | None = None
    backend: str = ""
    degraded_reason: str = ""  # why a backend answered degraded besides the model (e.g. its server is down)
    # search_for_principal: the caller's visible set (narrowed by its filters) was empty
    nothing_visible: bool = False

    @property
    def abstained(self) -> bool:
        """Withheld: the caller is told that no tool fits."""
        return self.confidence is Confidence.NONE


@dataclass(frozen=True)
class IndexedTool:
    doc: ToolDoc
    vectors: DocVectors | None  # None when the model was unavailable while indexing


@dataclass(frozen=True)
class BackendStatus:
    ready: bool
    generation: str | None
    tool_count: int


class SearchBackend(ABC):
    name: ClassVar[str]

    @abstractmethod
    def search(self, request: SearchRequest) -> SearchResult:
        """Rank the visible tools for the request. Never raises for a valid request."""

    @abstractmethod
    def publish(self, *, generation: str, tools: Sequence[IndexedTool], removed: Collection[int], full: bool) -> None:
        """Make ``generation`` current. ``full``: ``tools`` is the whole catalog (build aside, then swap);
        otherwise ``tools`` changed and ``removed`` (pks) left the index. Called after the DB commit."""

    @abstractmethod
    def status(self) -> BackendStatus:
        """Whether searches can be answered, from which generation, over how many tools."""

    def warm(self) -> bool:
        """Start preparing, in the background, what searches need; True once prepared. Readiness probes
        call this, so a new process is ready before its first search instead of during it."""
        return True

    def reset(self) -> None:  # noqa: B027 - optional hook
        """Drop in-process state (tests; after a database reset)."""
