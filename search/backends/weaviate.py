"""The Weaviate backend (weaviate-client v4): a collection per index generation behind one alias.

Layout. One object per tool; all of a tool's vectors (full document, "name (server): first sentence",
each example request) go into one self-provided *multi-vector* named ``tool``. Weaviate scores a
multi-vector with MaxSim: for a one-row query that is the dot product with the tool's best vector, i.e.
exactly the embedded backend's "a tool scores by its best vector" (our vectors are unit-normalized, so
dot = cosine). Negative examples go into a second multi-vector, ``negatives``, only on tools that have
some. The vectors are the ones stored in the database (``search.models.ToolEmbedding``): Weaviate never
vectorizes anything. Needs Weaviate >= 1.32 (aliases; multi-vectors need 1.29).

Lifecycle. A full build writes ``<prefix>_<generation>`` aside, then points the alias ``<prefix>`` at it
(an atomic swap for queries), then drops the collections the alias no longer points to (never the
target: deleting it would leave the alias dangling). Incremental publishes upsert and delete objects in
the aliased collection by deterministic UUID. Searches go through the alias, so they see the old or the
new collection, never a half-imported one.

Query. One hybrid query (BM25 over the weighted text properties + the multi-vector) with the caller's
visibility filter inside it, ``tool_pk`` contains-any the visible pks: hidden tools are never candidates,
never counted and never returned. The pool Weaviate returns is then re-scored here with the shared
second stage (operation intent, negative-example demotion, calibrated score, abstention, dynamic cut).
Known difference from the embedded backend: Weaviate's BM25 IDF and average length are statistics of the
whole collection, so a hidden tool can shift the keyword branch's relative scores of visible tools (not
which tools are eligible, nor any count). The calibrated score shown to callers uses only
visibility-independent evidence (the tool's own cosine and query-term coverage).

Degrade, never fail (SECURITY-TESTS F5): Weaviate unreachable, slow (query timeout) or erroring ->
the embedded backend's BM25 path over the same visible set, flagged ``degraded``; after a failure the
server is not retried for ``SCOUT_WEAVIATE_RETRY_SECONDS``, so each search falls back at once.
"""

import logging
import re
import threading
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from ..documents import ToolDoc
from ..engine.intent import intent_adjustment, request_operations, tool_operation
from ..engine.ranking import Calibration, Candidate, Confidence, _cut
from ..events import search_event_record
from ..indexes import ToolSearchIndex
from ..text import first_sentence, tokenize
from .base import BackendStatus, IndexedTool, Match, SearchBackend, SearchRequest, SearchResult
from .ranked import ranking_options

logger = logging.getLogger(__name__)

# Recorded with search.events (the kind is a plain string; it is not one of the stored choices yet).
EVENT_BACKEND_UNAVAILABLE = "backend_unavailable"
TOOL_VECTOR = "tool"
NEGATIVES_VECTOR = "negatives"
UUID_NAMESPACE = "scout-tool"
# ToolSearchIndex field -> Weaviate property. "server" is the filterable slug; its searchable label
# (slug + display name) is a separate text property.
FIELD_PROPERTY = {f.name: ("server_label" if f.name == "server" else f.name) for f in ToolSearchIndex.fields}
_COLLECTION_NAME = re.compile(r"^[A-Z][_0-9A-Za-z]*$")
_EXPLAIN = re.compile(r"\(Result Set (keyword|vector)[^)]*\)[^:]*:\s*original score\s*([-+0-9.eE]+)")


class WeaviateUnavailable(RuntimeError):
    """The server could not be reached or answered with an error; searches fall back to embedded BM25."""


class _RetryLater(WeaviateUnavailable):
    """Weaviate failed moments ago: not retried until the pause ends (the pause is not extended)."""


# -- naming, mapping and filters (pure functions) --------------------------------------------------------


def alias_name(prefix: str) -> str:
    """The alias searches go through. Weaviate class names start with an upper-case letter."""
    if not _COLLECTION_NAME.match(prefix):
        raise ImproperlyConfigured(f"SCOUT_WEAVIATE_PREFIX={prefix!r}: letters, digits, _; starting upper-case")
    return prefix


def collection_name(prefix: str, generation: str) -> str:
    """``<prefix>_<generation without dashes>``: one collection per full index generation."""
    cleaned = re.sub(r"[^0-9A-Za-z]", "", generation)
    if not cleaned:
        raise ValueError(f"generation {generation!r} has no usable characters")
    return f"{alias_name(prefix)}_{cleaned}"


def is_generation_collection(prefix: str, name: str) -> bool:
    return name.startswith(f"{prefix}_") and len(name) > len(prefix) + 1


def tool_uuid(pk: int) -> str:
    """Deterministic object id, so an incremental publish replaces a tool's object in place."""
    from weaviate.util import generate_uuid5

    return str(generate_uuid5(f"{UUID_NAMESPACE}:{int(pk)}"))


def tool_properties(doc: ToolDoc, kinds: Sequence[str] = (), texts: Sequence[str] = ()) -> dict[str, Any]:
    """The object stored for one tool: identity, the weighted text fields, and what explanations read."""
    properties: dict[str, Any] = {"tool_pk": int(doc.pk), "tool_id": doc.tool_id, "server": doc.server}
    for field_name, text in doc.field_texts().items():
        properties[FIELD_PROPERTY[field_name]] = text
    properties.update(
        {
            "tool_name": doc.name,
            "display_title": doc.title or doc.name,
            "summary": first_sentence(doc.purpose) or first_sentence(doc.description),
            "operation": sorted(tool_operation(doc.name, doc.purpose or doc.description)),
            "vector_kinds": list(kinds),
            "vector_texts": list(texts),
            "negatives": list(doc.negatives),
        }
    )
    return properties


def tool_vectors(tool: IndexedTool) -> dict[str, list[list[float]]] | None:
    """Named multi-vectors for one tool (None when it has no vectors: BM25 still finds it)."""
    if tool.vectors is None or not len(tool.vectors.vectors):
        return None
    named = {TOOL_VECTOR: np.asarray(tool.vectors.vectors, dtype=np.float32).tolist()}
    if tool.vectors.negatives is not None and len(tool.vectors.negatives):
        named[NEGATIVES_VECTOR] = np.asarray(tool.vectors.negatives, dtype=np.float32).tolist()
    return named


def query_properties() -> list[str]:
    """BM25 properties with their field weights (``name^3``), from ToolSearchIndex."""
    return [
        f"{FIELD_PROPERTY[f.name]}^{f.weight}" if f.weight != 1 else FIELD_PROPERTY[f.name]
        for f in ToolSearchIndex.fields
        if f.weight > 0
    ]


def visibility_filter(visible: Iterable[int]):
    """The caller's visible set as a filter applied inside the query (never a post-filter)."""
    from weaviate.classes.query import Filter

    pks = sorted({int(pk) for pk in visible})
    if not pks:
        raise ValueError("an empty visible set matches nothing; do not query")
    return Filter.by_property("tool_pk").contains_any(pks)


def query_arguments(request: SearchRequest) -> tuple[str, dict[str, Any]]:
    """(query method, keyword arguments) for one search: hybrid with a query vector, bm25 without.

    The visibility filter is the query's ``filters``: Weaviate applies it to both branches before
    ranking, so hidden tools are never candidates (a post-filter would leak through short pages)."""
    from weaviate.classes.query import HybridFusion, MetadataQuery

    options = ranking_options(request.fusion)
    arguments: dict[str, Any] = {
        "query_properties": query_properties(),
        "filters": visibility_filter(request.visible),
        "limit": max(options.second_stage, options.overfetch * request.top_k),
        "return_metadata": MetadataQuery(score=True, explain_score=True),
    }
    if request.query_vector is None:
        return "bm25", arguments
    arguments.update(
        {
            # One row: Weaviate's MaxSim against the tool's multi-vector is its best vector's cosine.
            "vector": [np.asarray(request.query_vector, dtype=np.float32).tolist()],
            "target_vector": TOOL_VECTOR,
            "alpha": 1.0 - options.bm25_weight,
            "fusion_type": HybridFusion.RELATIVE_SCORE if request.fusion == "convex" else HybridFusion.RANKED,
            "include_vector": [TOOL_VECTOR, NEGATIVES_VECTOR],
        }
    )
    return "hybrid", arguments


def collection_properties() -> list:
    from weaviate.classes.config import DataType, Property, Tokenization

    def text(name: str, searchable: bool = True) -> "Property":
        return Property(
            name=name,
            data_type=DataType.TEXT,
            tokenization=Tokenization.WORD,
            index_searchable=searchable,
            index_filterable=False,
        )

    def stored(name: str, data_type) -> "Property":
        return Property(name=name, data_type=data_type, index_searchable=False, index_filterable=False)

    return [
        Property(name="tool_pk", data_type=DataType.INT, index_filterable=True, index_range_filters=False),
        Property(name="tool_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD, index_searchable=False),
        Property(name="server", data_type=DataType.TEXT, tokenization=Tokenization.FIELD, index_searchable=False),
        *[text(FIELD_PROPERTY[f.name]) for f in ToolSearchIndex.fields],
        stored("tool_name", DataType.TEXT),
        stored("display_title", DataType.TEXT),
        stored("summary", DataType.TEXT),
        stored("operation", DataType.TEXT_ARRAY),
        stored("vector_kinds", DataType.TEXT_ARRAY),
        stored("vector_texts", DataType.TEXT_ARRAY),
        stored("negatives", DataType.TEXT_ARRAY),
    ]


def parse_explain(explain: str | None) -> dict[str, float]:
    """Weaviate's hybrid explanation -> {"keyword": bm25 score, "vector": vector score} when present."""
    found: dict[str, float] = {}
    for branch, value in _EXPLAIN.findall(explain or ""):
        try:
            found.setdefault(branch, float(value))
        except ValueError:
            continue
    return found


# -- re-scoring the pool Weaviate returned (pure) --------------------------------------------------------


@dataclass
class PoolHit:
    """One object of the hybrid answer, in Weaviate's fused order."""

    properties: dict[str, Any]
    score: float  # Weaviate's fused score
    vectors: np.ndarray | None  # (n, dim) the tool's vectors
    negatives: np.ndarray | None
    explain: dict[str, float]


def coverage(query_terms: Sequence[str], properties: dict[str, Any]) -> float:
    """Share of the request's distinct terms found in the tool's text (no corpus statistics at all)."""
    if not query_terms:
        return 0.0
    words: set[str] = set()
    for f in ToolSearchIndex.fields:
        words.update(tokenize(str(properties.get(FIELD_PROPERTY[f.name]) or "")))
    return sum(1 for t in query_terms if t in words) / len(query_terms)


def rank_pool(
    hits: Sequence[PoolHit],
    *,
    query: str,
    query_vector: np.ndarray | None,
    top_k: int,
    fusion: str,
    calibration: Calibration = Calibration(),  # noqa: B008 - frozen, shared default
    enforce_abstention: bool = True,
) -> tuple[list[Candidate], Confidence, int, tuple[str, ...]]:
    """Second stage over the pool: intent, negatives, calibration, confidence and the cut (as embedded)."""
    options = ranking_options(fusion, enforce_abstention=enforce_abstention)
    terms = tuple(dict.fromkeys(tokenize(query)))
    wanted = request_operations(query) if options.intent else frozenset()
    cosines = [_best(hit.vectors, query_vector) for hit in hits]
    candidates = []
    for row, hit in enumerate(hits):
        cosine, best = cosines[row]
        cover = coverage(terms, hit.properties)
        calibrated = calibration.score(None if cosine is None else np.asarray([cosine]), np.asarray([cover]))[0]
        candidate = Candidate(
            row=row,
            score=float(hit.score),
            calibrated=float(calibrated),
            bm25_rank=None,
            dense_rank=None,
            bm25_score=hit.explain.get("keyword", 0.0),
            dense_score=cosine,
            best_vector=best,
        )
        if wanted:
            candidate.intent = intent_adjustment(
                wanted, frozenset(hit.properties.get("operation") or ()), options.intent_agree, options.intent_conflict
            )
            candidate.score += candidate.intent * (1.0 if fusion == "convex" else 2.0 / options.rrf_k)
        negative, _ = _best(hit.negatives, query_vector)
        if negative is not None and negative >= options.negative_threshold and negative > (cosine or -1.0):
            candidate.demoted = True
        candidates.append(candidate)
    _pool_ranks(candidates, hits)
    candidates.sort(key=lambda c: (c.demoted, -c.score, str(hits[c.row].properties.get("tool_id", ""))))
    for position, candidate in enumerate(candidates, start=1):
        candidate.fused_rank = position
    ranking = _cut(candidates, top_k, options, terms)
    return ranking.candidates, ranking.confidence, ranking.cut, terms


def _best(vectors: np.ndarray | None, query_vector: np.ndarray | None) -> tuple[float | None, int]:
    if vectors is None or query_vector is None or not len(vectors) or vectors.shape[1] != query_vector.shape[0]:
        return None, -1
    sims = vectors @ query_vector.astype(np.float32)
    best = int(np.argmax(sims))
    return float(sims[best]), best


def _pool_ranks(candidates: list[Candidate], hits: Sequence[PoolHit]) -> None:
    """Branch ranks within the pool: BM25 by Weaviate's keyword score, dense by the exact cosine."""
    keyed = [(c, hits[c.row].explain.get("keyword")) for c in candidates]
    ordered = sorted((pair for pair in keyed if pair[1] and pair[1] > 0), key=lambda pair: -pair[1])
    for position, (candidate, _) in enumerate(ordered, start=1):
        candidate.bm25_rank = position
    dense = sorted((c for c in candidates if c.dense_score is not None), key=lambda c: -(c.dense_score or 0.0))
    for position, candidate in enumerate(dense, start=1):
        candidate.dense_rank = position


def _why(hit: PoolHit, candidate: Candidate, terms: Sequence[str]) -> dict[str, Any]:
    wanted = set(terms)
    fields: dict[str, list[str]] = {}
    for f in ToolSearchIndex.fields:
        text = str(hit.properties.get(FIELD_PROPERTY[f.name]) or "")
        hits = [t for t in dict.fromkeys(tokenize(text)) if t in wanted] if text else []
        if hits:
            bucket = fields.setdefault(f.label, [])
            bucket += [h for h in hits if h not in bucket]
    why: dict[str, Any] = {"terms": [t for t in terms if any(t in v for v in fields.values())], "fields": fields}
    kinds = hit.properties.get("vector_kinds") or []
    texts = hit.properties.get("vector_texts") or []
    if 0 <= candidate.best_vector < len(kinds):
        why["closest"] = kinds[candidate.best_vector]
        if kinds[candidate.best_vector] == "example" and candidate.best_vector < len(texts):
            why["example_request"] = texts[candidate.best_vector]
    if candidate.demoted:
        why["demoted"] = "close to a negative example"
    if candidate.intent:
        why["operation_intent"] = round(candidate.intent, 3)
    why["ranks"] = "BM25 and dense ranks are within Weaviate's candidate pool"
    return why


# -- the backend -----------------------------------------------------------------------------------------


def connection_settings() -> dict[str, Any]:
    """connect_to_custom() arguments from WEAVIATE_URL (+ WEAVIATE_GRPC_URL, WEAVIATE_API_KEY)."""
    url = settings.WEAVIATE_URL
    if not url:
        raise ImproperlyConfigured("SCOUT_SEARCH_BACKEND=weaviate needs WEAVIATE_URL (e.g. http://localhost:8080)")
    http = urlsplit(url)
    if http.scheme not in ("http", "https") or not http.hostname:
        raise ImproperlyConfigured(f"WEAVIATE_URL must be http(s)://host[:port], got {url!r}")
    http_secure = http.scheme == "https"
    grpc_url = settings.WEAVIATE_GRPC_URL
    grpc = urlsplit(grpc_url) if grpc_url else None
    return {
        "http_host": http.hostname,
        "http_port": http.port or (443 if http_secure else 80),
        "http_secure": http_secure,
        "grpc_host": (grpc.hostname if grpc else None) or http.hostname,
        "grpc_port": (grpc.port if grpc else None) or 50051,
        "grpc_secure": (grpc.scheme in ("https", "grpcs")) if grpc else http_secure,
    }


class WeaviateBackend(SearchBackend):
    name = "weaviate"

    def __init__(self) -> None:
        self._client = None
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._status: tuple[float, BackendStatus] | None = None
        self._generation: str | None = None

    @property
    def prefix(self) -> str:
        """The alias name (and collection prefix), read per call so a settings override takes effect."""
        return alias_name(settings.SCOUT_WEAVIATE_PREFIX)

    # -- connection --------------------------------------------------------------------------------------
    def client(self):
        """The process's client, connected lazily; raises WeaviateUnavailable while the server is down."""
        if self._client is not None:
            return self._client
        with self._lock:
            if self._client is not None:
                return self._client
            if time.monotonic() < self._down_until:
                raise _RetryLater("Weaviate was unreachable moments ago; not retrying yet")
            import weaviate
            from weaviate.classes.init import AdditionalConfig, Auth, Timeout

            api_key = settings.WEAVIATE_API_KEY
            try:
                self._client = weaviate.connect_to_custom(
                    **connection_settings(),
                    auth_credentials=Auth.api_key(api_key) if api_key else None,
                    additional_config=AdditionalConfig(
                        timeout=Timeout(
                            init=settings.SCOUT_WEAVIATE_CONNECT_TIMEOUT,
                            query=settings.SCOUT_WEAVIATE_TIMEOUT,
                            insert=settings.SCOUT_WEAVIATE_INSERT_TIMEOUT,
                        )
                    ),
                )
            except ImproperlyConfigured:
                raise
            except Exception as exc:  # refused, DNS, TLS, timeout, auth: all mean "not usable now"
                self._mark_down()
                raise WeaviateUnavailable(f"cannot connect to Weaviate at {settings.WEAVIATE_URL}: {exc}") from exc
            return self._client

    def _mark_down(self) -> None:
        self._down_until = time.monotonic() + settings.SCOUT_WEAVIATE_RETRY_SECONDS
        self._status = None

    def _drop_client(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a broken connection must not mask the original error
                logger.debug("weaviate: close failed", exc_info=True)

    def reset(self) -> None:
        self._drop_client()
        self._down_until = 0.0
        self._status = None
        self._generation = None

    # -- status ------------------------------------------------------------------------------------------
    def status(self) -> BackendStatus:
        cached = self._status
        if cached is not None and time.monotonic() - cached[0] < settings.SCOUT_SEARCH_GENERATION_CHECK_SECONDS:
            return cached[1]
        try:
            client = self.client()
            target = client.alias.get(alias_name=self.prefix)
            if target is None:
                status = BackendStatus(False, None, 0)
            else:
                total = client.collections.use(self.prefix).aggregate.over_all(total_count=True).total_count
                status = BackendStatus(bool(total), self._generation or target.collection, int(total or 0))
        except Exception as exc:
            # Searches will fall back to embedded BM25, which is ready when the database has a generation.
            self._unavailable(exc)
            return self._fallback().status()
        self._status = (time.monotonic(), status)
        return status

    # -- indexing ----------------------------------------------------------------------------------------
    def publish(self, *, generation: str, tools: Sequence[IndexedTool], removed: Collection[int], full: bool) -> None:
        """Full: build ``<prefix>_<generation>`` aside, swap the alias, drop the old collections.
        Incremental: upsert ``tools`` and delete ``removed`` in the aliased collection (a full build first
        when there is none yet). Raises WeaviateUnavailable; the database stays the source of truth."""
        client = self.client()
        try:
            if full or client.alias.get(alias_name=self.prefix) is None:
                if not full:
                    tools = _all_indexed_tools()
                self._build(client, generation, tools)
            else:
                collection = client.collections.use(self.prefix)
                if removed:
                    collection.data.delete_many(where=visibility_filter(removed))
                self._import(collection, tools)
        except WeaviateUnavailable:
            raise
        except Exception as exc:
            self._unavailable(exc)
            raise WeaviateUnavailable(f"publishing generation {generation} to Weaviate failed: {exc}") from exc
        self._generation = generation
        self._status = None

    def _build(self, client, generation: str, tools: Sequence[IndexedTool]) -> None:
        from weaviate.classes.config import Configure, VectorDistances

        name = collection_name(self.prefix, generation)
        if client.collections.exists(name):  # a retried build: start again from nothing
            client.collections.delete(name)
        vector_index = Configure.VectorIndex.hnsw(distance_metric=VectorDistances.DOT)
        collection = client.collections.create(
            name,
            description=f"Scout tool index, generation {generation}",
            properties=collection_properties(),
            vector_config=[
                Configure.MultiVectors.self_provided(name=TOOL_VECTOR, vector_index_config=vector_index),
                Configure.MultiVectors.self_provided(
                    name=NEGATIVES_VECTOR,
                    vector_index_config=Configure.VectorIndex.hnsw(distance_metric=VectorDistances.DOT),
                ),
            ],
            inverted_index_config=Configure.inverted_index(bm25_k1=1.5, bm25_b=0.75),
        )
        try:
            self._import(collection, tools)
        except Exception:
            client.collections.delete(name)  # never leave a half-built generation behind
            raise
        # The swap: queries through the alias move to the complete new collection in one step.
        if client.alias.get(alias_name=self.prefix) is None:
            client.alias.create(alias_name=self.prefix, target_collection=name)
        else:
            client.alias.update(alias_name=self.prefix, new_target_collection=name)
        self._drop_old(client, keep=name)

    def _drop_old(self, client, *, keep: str) -> None:
        """Drop generations the alias left behind, newest SCOUT_WEAVIATE_KEEP_PREVIOUS kept for rollback."""
        target = client.alias.get(alias_name=self.prefix)
        if target is None or target.collection != keep:
            return  # someone else moved the alias meanwhile: leave everything for their build to clean
        old = [
            name
            for name in client.collections.list_all(simple=True)
            if is_generation_collection(self.prefix, name) and name != keep
        ]
        old.sort(key=lambda name: _generation_order(self.prefix, name), reverse=True)
        for name in old[settings.SCOUT_WEAVIATE_KEEP_PREVIOUS :]:
            client.collections.delete(name)

    @staticmethod
    def _import(collection, tools: Sequence[IndexedTool]) -> None:
        from weaviate.classes.data import DataObject

        batch_size = settings.SCOUT_WEAVIATE_BATCH_SIZE
        for start in range(0, len(tools), batch_size):
            objects = []
            for tool in tools[start : start + batch_size]:
                kinds = tool.vectors.kinds if tool.vectors is not None else ()
                texts = tool.vectors.texts if tool.vectors is not None else ()
                objects.append(
                    DataObject(
                        properties=tool_properties(tool.doc, kinds, texts),
                        uuid=tool_uuid(tool.doc.pk),
                        vector=tool_vectors(tool),
                    )
                )
            result = collection.data.insert_many(objects)
            if result.has_errors:
                first = next(iter(result.errors.values()))
                raise RuntimeError(f"{len(result.errors)} of {len(objects)} objects failed: {first.message}")

    def drop_all(self) -> None:
        """Delete the alias, then every generation collection under the prefix (alias first: none dangles)."""
        client = self.client()
        client.alias.delete(alias_name=self.prefix)
        for name in client.collections.list_all(simple=True):
            if is_generation_collection(self.prefix, name):
                client.collections.delete(name)
        self._status = None
        self._generation = None

    # -- search ------------------------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> SearchResult:
        if not request.visible:
            return SearchResult(
                [], index_ready=True, confidence=Confidence.NONE, generation=self._generation, backend=self.name
            )
        try:
            hits = self._query(request)
        except Exception as exc:
            self._unavailable(exc)
            result = self._fallback().search(replace(request, query_vector=None))
            return replace(result, degraded=True)
        candidates, confidence, cut, terms = rank_pool(
            hits,
            query=request.query,
            query_vector=request.query_vector,
            top_k=request.top_k,
            fusion=request.fusion,
            enforce_abstention=request.enforce_abstention,
        )
        matches = [self._match(hits[c.row], c, terms if request.explain else None) for c in candidates[:cut]]
        return SearchResult(
            matches,
            index_ready=True,
            degraded=request.query_vector is None,
            confidence=confidence,
            generation=self._generation,
            backend=self.name,
        )

    def _query(self, request: SearchRequest) -> list[PoolHit]:
        collection = self.client().collections.use(self.prefix)
        method, arguments = query_arguments(request)
        response = getattr(collection.query, method)(request.query, **arguments)
        return [_pool_hit(obj) for obj in response.objects]

    @staticmethod
    def _match(hit: PoolHit, candidate: Candidate, terms: Sequence[str] | None) -> Match:
        props = hit.properties
        return Match(
            tool_pk=int(props["tool_pk"]),
            tool_id=str(props.get("tool_id", "")),
            name=str(props.get("tool_name", "")),
            server=str(props.get("server", "")),
            title=str(props.get("display_title") or props.get("tool_name", "")),
            summary=str(props.get("summary", "")),
            score=round(candidate.calibrated, 4),
            fused_rank=candidate.fused_rank,
            bm25_rank=candidate.bm25_rank,
            dense_rank=candidate.dense_rank,
            why_matched=_why(hit, candidate, terms) if terms is not None else {},
        )

    # -- fallback ----------------------------------------------------------------------------------------
    def _unavailable(self, exc: Exception) -> None:
        if isinstance(exc, _RetryLater):
            return  # already recorded when it failed; keep the original retry time
        self._mark_down()
        self._drop_client()
        search_event_record(kind=EVENT_BACKEND_UNAVAILABLE, detail=f"weaviate: {exc}"[:500])

    @staticmethod
    def _fallback() -> SearchBackend:
        from . import backend_get

        return backend_get("embedded")


def _pool_hit(obj) -> PoolHit:
    vectors = obj.vector or {}
    return PoolHit(
        properties=dict(obj.properties),
        score=float(obj.metadata.score or 0.0),
        vectors=_matrix(vectors.get(TOOL_VECTOR)),
        negatives=_matrix(vectors.get(NEGATIVES_VECTOR)),
        explain=parse_explain(obj.metadata.explain_score),
    )


def _matrix(value) -> np.ndarray | None:
    if value is None:
        return None
    matrix = np.asarray(value, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    return matrix if matrix.size else None


def _generation_order(prefix: str, name: str) -> int:
    """Age of a generation collection: its IndexGeneration's id (0, the oldest, when unknown)."""
    from ..models import IndexGeneration

    token = name[len(prefix) + 1 :]
    for generation in IndexGeneration.objects.values_list("id", "token").order_by("-id")[:200]:
        if generation[1].hex == token.lower():
            return int(generation[0])
    return 0


def _all_indexed_tools() -> list[IndexedTool]:
    """Every indexable tool with its stored vectors (a first build triggered by an incremental publish)."""
    from ..encoder import model_key
    from ..selectors import stored_vectors, tool_docs_load

    docs = tool_docs_load()
    vectors = stored_vectors(docs=docs, model_key=model_key())
    return [IndexedTool(doc, vectors.get(doc.pk)) for doc in docs]
