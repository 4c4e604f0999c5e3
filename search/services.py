"""Search's public services: ``tool_search`` for callers, ``index_update`` / ``index_rebuild`` for indexing."""

import logging
from collections.abc import Collection

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from .backends import IndexedTool, SearchRequest, SearchResult, backend_get
from .choices import GenerationKind, GenerationStatus, SearchEventKind
from .documents import ToolDoc
from .encoder import EncoderUnavailable, encoder_get, model_key
from .engine.decompose import request_parts
from .engine.ranking import FUSIONS
from .engine.snapshot import DocVectors
from .events import search_event_record
from .models import IndexGeneration, ToolEmbedding
from .selectors import GENERATION_CACHE_KEY, stored_vectors, tool_docs_load
from .text import strip_control, tokenize

logger = logging.getLogger(__name__)
TOP_K_MIN, TOP_K_MAX = 1, 20


class SearchQueryError(ValueError):
    """The request cannot be searched (empty, too long, no words, bad argument). The message says why."""


def _clean_query(query: object) -> str:
    if not isinstance(query, str):
        raise SearchQueryError("query must be a string")
    limit = settings.SCOUT_SEARCH_MAX_QUERY_CHARS
    if len(query) > limit:
        raise SearchQueryError(f"query is {len(query)} characters long; the limit is {limit}")
    cleaned = " ".join(strip_control(query).split())
    if not cleaned:
        raise SearchQueryError("query is empty")
    if not tokenize(cleaned) and not any(ch.isalnum() for ch in cleaned):
        raise SearchQueryError("query contains no words to search for")
    return cleaned


def _clamp_top_k(top_k: object) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise SearchQueryError("top_k must be an integer")
    return min(max(top_k, TOP_K_MIN), TOP_K_MAX)


def _encode_query(query: str, parts: list[str]) -> tuple[np.ndarray | None, list[np.ndarray | None]]:
    """The request's vector and its parts' vectors, in one batch; Nones when the model is unavailable."""
    try:
        vectors = encoder_get().encode([query, *parts])
    except EncoderUnavailable as exc:
        search_event_record(kind=SearchEventKind.MODEL_UNAVAILABLE, detail=str(exc))
        return None, [None] * len(parts)
    return vectors[0], list(vectors[1:])


def tool_search(
    *,
    query: str,
    visible: Collection[int],
    top_k: int = 5,
    fusion: str | None = None,
    explain: bool = True,
    enforce_abstention: bool = True,
) -> SearchResult:
    """Rank the tools in ``visible`` (Tool pks the caller may see) for a natural-language request.

    ``top_k`` is clamped to 1..20; fewer come back when scores fall off, none when nothing is relevant
    (``abstained``). Raises SearchQueryError for an unusable query (empty, over
    SCOUT_SEARCH_MAX_QUERY_CHARS, no words, a non-integer top_k, a missing visible set). Never raises
    because of the index or the model: ``index_ready=False`` when there is no index (list tools
    directly), ``degraded=True`` when only BM25 could run. ``enforce_abstention=False`` (the curator
    preview) keeps the ranking where it would abstain, with ``abstained`` still set.
    """
    cleaned = _clean_query(query)
    k = _clamp_top_k(top_k)
    if visible is None or isinstance(visible, str | bytes):
        raise SearchQueryError("visible must be a collection of tool ids the caller may see")
    fusion = fusion or settings.SCOUT_SEARCH_FUSION
    if fusion not in FUSIONS:
        raise SearchQueryError(f"fusion must be one of {', '.join(FUSIONS)}")
    backend = backend_get()
    if not backend.status().ready:
        search_event_record(kind=SearchEventKind.INDEX_NOT_READY, detail=f"backend {backend.name}: no index yet")
        return SearchResult([], index_ready=False, backend=backend.name)
    parts = request_parts(cleaned)
    vector, part_vectors = _encode_query(cleaned, parts)
    result = backend.search(
        SearchRequest(
            query=cleaned,
            visible=visible,
            top_k=k,
            fusion=fusion,
            query_vector=vector,
            parts=tuple(zip(parts, part_vectors, strict=True)),
            explain=explain,
            enforce_abstention=enforce_abstention,
        )
    )
    if result.degraded and vector is not None:
        search_event_record(kind=SearchEventKind.VECTORS_MISSING, detail="index has no vectors: BM25 only")
    return result


# -- indexing -------------------------------------------------------------------------------------------


def _vectors_for(docs: list[ToolDoc]) -> tuple[dict[int, DocVectors], int, bool]:
    """Stored vectors where the texts are unchanged; encode and store the rest. (vectors, encoded, degraded)"""
    key = model_key()
    vectors = stored_vectors(docs=docs, model_key=key)
    todo = [doc for doc in docs if doc.pk not in vectors]
    if not todo:
        return vectors, 0, False
    try:
        encoder = encoder_get()
    except EncoderUnavailable as exc:
        search_event_record(kind=SearchEventKind.MODEL_UNAVAILABLE, detail=f"indexing without vectors: {exc}")
        return vectors, 0, True
    texts: list[str] = []
    for doc in todo:
        texts += [t for _, t in doc.dense_texts()] + list(doc.negatives)
    matrix = encoder.encode(texts)
    offset = 0
    for doc in todo:
        pairs = doc.dense_texts()
        count = len(pairs) + len(doc.negatives)
        block = matrix[offset : offset + count].astype(np.float32, copy=True)
        offset += count
        block[: len(pairs)] *= np.asarray(doc.vector_weights(), dtype=np.float32)[:, None]
        ToolEmbedding.objects.update_or_create(
            tool_id=doc.pk,
            model_key=key,
            defaults={
                "dense_hash": doc.dense_hash(),
                "dim": block.shape[1],
                "kinds": [k for k, _ in pairs],
                "texts": [t for _, t in pairs],
                "negative_count": len(doc.negatives),
                "vectors": block.astype(np.float32).tobytes(),
            },
        )
        vectors[doc.pk] = DocVectors(
            block[: len(pairs)],
            tuple(k for k, _ in pairs),
            tuple(t for _, t in pairs),
            block[len(pairs) :] if doc.negatives else None,
        )
    return vectors, len(todo), False


def _index(*, kind: str, pks: Collection[int] | None) -> IndexGeneration:
    generation = IndexGeneration.objects.create(kind=kind, model_key=model_key())
    try:
        docs = tool_docs_load(pks=pks)
        vectors, encoded, degraded = _vectors_for(docs)
    except Exception as exc:
        IndexGeneration.objects.filter(pk=generation.pk).update(
            status=GenerationStatus.FAILED, error=str(exc)[:2000], finished_at=timezone.now()
        )
        search_event_record(kind=SearchEventKind.REINDEX_FAILED, detail=str(exc))
        raise
    generation.status = GenerationStatus.READY
    generation.tool_count = len(docs)
    generation.encoded = encoded
    generation.reused = len(vectors) - encoded
    generation.degraded = degraded
    generation.finished_at = timezone.now()
    generation.save()
    token = str(generation.token)
    removed = set(pks or ()) - {doc.pk for doc in docs}
    tools = [IndexedTool(doc, vectors.get(doc.pk)) for doc in docs]

    def _announce() -> None:
        cache.set(GENERATION_CACHE_KEY, token, timeout=settings.SCOUT_SEARCH_GENERATION_CHECK_SECONDS)
        backend_get().publish(generation=token, tools=tools, removed=removed, full=pks is None)

    transaction.on_commit(_announce)
    return generation


def index_update(*, tool_pks: Collection[int]) -> IndexGeneration:
    """Reindex the given tools (changed, added, removed or disabled) and publish a new generation.

    Only tools whose vector texts changed are encoded. With the model down the generation is published
    without new vectors (``degraded``): the changed text is searchable by BM25 at once.
    """
    pks = {int(pk) for pk in tool_pks}
    return _index(kind=GenerationKind.INCREMENTAL, pks=pks)


def index_rebuild() -> IndexGeneration:
    """Index every indexable tool and publish a new generation (stored vectors are reused)."""
    return _index(kind=GenerationKind.FULL, pks=None)
