"""Search's public services: ``search_for_principal`` (the one entry point for callers: validation, limits,
visibility, ranking, confidence, degradation and the no-index fallback), ``tool_search`` (ranking over a
given visible set) and ``index_update`` / ``index_rebuild`` for indexing."""

import logging
import re
from collections.abc import Collection
from dataclasses import replace

import numpy as np
from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from catalog.models import Tool
from catalog.progress import ProgressCallback, progress_chain, progress_throttled
from governance.choices import OperationClass
from governance.principals import Principal
from governance.selectors import tool_pks_visible_to
from governance.services.review import tools_hold_for_signal

from .backends import IndexedTool, Match, RequestMemo, SearchRequest, SearchResult, backend_get
from .choices import GenerationKind, GenerationStatus, SearchEventKind
from .documents import TOPIC_SPREAD, ToolDoc, topic_spread_held
from .encoder import EncoderUnavailable, encoder_get, model_key
from .engine.decompose import Part, implied_steps, request_part_spans, with_implied_steps
from .engine.ranking import FUSIONS, Confidence
from .engine.snapshot import DocVectors
from .events import search_event_record
from .models import IndexGeneration, ToolEmbedding
from .selectors import (
    generation_read_once,
    generation_token_keep,
    server_slugs_granted_to,
    stored_vectors,
    tool_docs_load,
)
from .text import first_sentence, function_word, request_terms, request_terms_kept, strip_control

logger = logging.getLogger(__name__)
# The limits of a search request, here only (the gateway, the preview and any API read them from here; the
# query length is the SCOUT_SEARCH_MAX_QUERY_CHARS setting).
TOP_K_MIN, TOP_K_MAX, TOP_K_DEFAULT = 1, 20, 5
SCOPES = ("all", "my_servers")  # my_servers: only servers granted to the user personally
MAX_ENVIRONMENT_CHARS = 50


class SearchQueryError(ValueError):
    """The request cannot be searched (empty, too long, no words, bad argument). The message says why;
    ``field`` names the request field at fault (``query``, ``top_k``, ``operation_class``, ...)."""

    def __init__(self, message: str, field: str = "query") -> None:
        super().__init__(message)
        self.field = field


def _clean_query(query: object) -> str:
    if not isinstance(query, str):
        raise SearchQueryError("query must be a string")
    limit = settings.SCOUT_SEARCH_MAX_QUERY_CHARS
    if len(query) > limit:
        raise SearchQueryError(
            f"query is {len(query)} characters long; the limit is {limit}: describe one step briefly"
        )
    cleaned = " ".join(strip_control(query).split())
    if not cleaned:
        raise SearchQueryError("query is empty: describe the step you need a tool for, in plain words")
    if not request_terms(cleaned) and not any(ch.isalnum() for ch in cleaned):
        raise SearchQueryError("query contains no words to search for")
    return cleaned


def _clamp_top_k(top_k: object) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise SearchQueryError("top_k must be an integer", "top_k")
    return min(max(top_k, TOP_K_MIN), TOP_K_MAX)


# A short and a long request, encoded once at warm-up: the model's first calls allocate its buffers.
WARM_UP_TEXTS = [
    "list open issues",
    "find the invoices of a customer that are overdue by more than thirty days and send each a reminder email",
]


def search_warm_up() -> dict[str, float]:
    """What a process's first search would otherwise pay for, done now: the model loaded and run once, the
    index snapshot read. Seconds per step (``model``, ``index``); a step that fails is left to the first
    search (which degrades and records why), never raised here."""
    import time

    spent: dict[str, float] = {}
    started = time.monotonic()
    try:
        encoder_get().encode(WARM_UP_TEXTS)  # not encode_queries: nothing enters the request-vector cache
    except EncoderUnavailable:
        pass  # recorded by encoder_get; the first search degrades and says so
    spent["model"] = time.monotonic() - started
    started = time.monotonic()
    try:
        backend_get().status()  # the embedded backend reads the current generation's snapshot
    except Exception:  # noqa: BLE001 - an index that cannot be read now is the first search's to report
        logger.warning("search: the index could not be read at warm-up", exc_info=True)
    spent["index"] = time.monotonic() - started
    return spent


def vector_cache_scope(user) -> str:
    """Whose request vectors a search may reuse (``Encoder.encode_queries``): the searching person's only, so the
    time a search takes never tells anyone that someone else asked the same (Z10)."""
    return f"u{user.pk}"


def _encode_query(
    query: str, parts: list[Part], implied: list[str], scope: str
) -> tuple[np.ndarray | None, list[np.ndarray | None], list[np.ndarray]]:
    """The request's vector, its parts' and its implied steps' (encoded alone), in one model call; Nones (and no
    implied vectors) when the model is unavailable."""
    try:
        vectors = encoder_get().encode_request(query, parts, scope, implied)
    except EncoderUnavailable as exc:
        search_event_record(kind=SearchEventKind.MODEL_UNAVAILABLE, detail=str(exc))
        return None, [None] * len(parts), []
    return vectors[0], list(vectors[1 : 1 + len(parts)]), list(vectors[1 + len(parts) :])


@request_terms_kept()  # the request's texts are tokenized once, and forgotten when it ends
@generation_read_once()  # the index generation read once: status, search and the parts' retry share it
def tool_search(
    *,
    query: str,
    visible: Collection[int],
    top_k: int = TOP_K_DEFAULT,
    fusion: str | None = None,
    explain: bool = True,
    enforce_abstention: bool = True,
    cache_scope: str = "",
) -> SearchResult:
    """Rank the tools in ``visible`` (Tool pks the caller may see) for a natural-language request.

    Callers acting for a principal use ``search_for_principal``; this is the ranking step it calls (and
    the curator preview, over the set it chooses). ``top_k`` is clamped to 1..20; fewer come back when
    scores fall off. ``confidence`` says how the answer is served: ``high``, ``low`` (a ranking to check)
    or ``none`` (withheld: near-certain that no visible tool fits; no matches). Raises SearchQueryError for
    an unusable query (empty, over SCOUT_SEARCH_MAX_QUERY_CHARS, no words, a non-integer top_k, a missing
    visible set). Never raises because of the index or the model: ``index_ready=False`` when there is no
    index, ``degraded=True`` when only BM25 could run. ``enforce_abstention=False`` (the curator preview)
    keeps the ranking where it would be withheld, with ``confidence`` still ``none``. ``cache_scope``: whose
    cached request vectors may serve it (``vector_cache_scope(user)`` for a person's search; "" for tools and tests).
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
    parts = request_part_spans(cleaned)
    vector, part_vectors, implied = _encode_query(cleaned, parts, implied_steps(cleaned), cache_scope)
    own = [(part.text, part_vector) for part, part_vector in zip(parts, part_vectors, strict=True)]
    steps = with_implied_steps(cleaned, vector, own, lambda _texts: implied)  # encoded above, with the request
    request = SearchRequest(
        query=cleaned,
        visible=visible,
        top_k=k,
        fusion=fusion,
        query_vector=vector,
        parts=tuple(steps),
        explain=explain,
        enforce_abstention=enforce_abstention,
        memo=RequestMemo() if steps else None,  # the retry below reuses the request's own scores
    )
    result = backend.search(request)
    if parts and vector is not None and result.confidence is Confidence.NONE and encoder_get().one_pass:
        # Parts pooled from their request's pass score lower than parts encoded alone, and rank worse where
        # the evidence is weakest: an answer that would be withheld is the one the parts encoded alone give
        # (as without SCOUT_SEARCH_ONE_PASS_PARTS). Any other answer is served from the one pass (issue 9:
        # one model run per request on the request's path). Only the pooled vectors are asked for again: the
        # request's and its implied steps' were encoded alone already, so a request without parts (a single
        # step and the steps it implies) would be searched again with the very vectors it was searched with.
        try:
            alone = encoder_get().encode_queries([part.text for part in parts], cache_scope)
        except EncoderUnavailable:
            alone = None  # the model went away since the first pass: that answer stands
        if alone is not None:
            again = [(part.text, part_vector) for part, part_vector in zip(parts, alone, strict=True)]
            result = backend.search(replace(request, parts=(*again, *steps[len(parts) :])))
    if result.degraded and vector is not None and not result.degraded_reason:
        search_event_record(kind=SearchEventKind.VECTORS_MISSING, detail="index has no vectors: BM25 only")
    return result


def _check_filters(*, operation_class: object, environment: object, scope: object) -> None:
    if operation_class is not None and operation_class not in OperationClass.values:
        raise SearchQueryError(f"operation_class must be one of: {', '.join(OperationClass.values)}", "operation_class")
    if scope not in SCOPES:
        raise SearchQueryError(f"scope must be one of: {', '.join(SCOPES)}", "scope")
    if environment is not None and (not isinstance(environment, str) or len(environment) > MAX_ENVIRONMENT_CHARS):
        raise SearchQueryError("environment must be a short name such as production or development", "environment")


@request_terms_kept()
def search_for_principal(
    *,
    principal: Principal,
    query: str,
    top_k: int = TOP_K_DEFAULT,
    operation_class: str | None = None,
    environment: str | None = None,
    scope: str = "all",
) -> SearchResult:
    """Search for a verified caller: the one entry point for every client (the MCP gateway, any API).

    Validates the request (SearchQueryError, with a message safe to show), narrows to the tools
    ``principal`` may discover (governance's ``tool_pks_visible_to``, with the filters), ranks them and
    decides the answer's confidence. Without an index it lists the visible tools sharing words with the
    request (``index_ready=False``, ``degraded``, ``low``). Every match is a tool the caller may see;
    ``nothing_visible`` says the caller may see no tool at all (with these filters).
    """
    cleaned = _clean_query(query)
    k = _clamp_top_k(top_k)
    _check_filters(operation_class=operation_class, environment=environment, scope=scope)
    visible = tool_pks_visible_to(
        principal=principal,
        operation_class=operation_class,
        environment=environment or None,
        server_slugs=server_slugs_granted_to(principal=principal) if scope == "my_servers" else None,
    )
    result = tool_search(query=cleaned, visible=visible, top_k=k, cache_scope=vector_cache_scope(principal.user))
    if not result.index_ready:
        result = _listing_fallback(query=cleaned, visible=visible, top_k=k, backend=result.backend)
    # Backends apply ``visible`` themselves; this second lock costs nothing and keeps a backend bug from
    # ever showing a hidden tool.
    matches = [match for match in result.matches if match.tool_pk in visible]
    if len(matches) != len(result.matches) or not visible:
        result = replace(result, matches=matches, nothing_visible=not visible)
    return result


_WORD = re.compile(r"[a-z0-9]+")


def _listing_fallback(*, query: str, visible: frozenset[int], top_k: int, backend: str) -> SearchResult:
    """No index yet: the visible tools sharing the most words with the request (degraded, ``low``). Function
    words ("the", "about", "which") do not count: a tool sharing only those with the request is no match, and
    the answer's why-line would name them as the reason."""
    words = {word for word in _WORD.findall(query.lower()) if len(word) > 2 and not function_word(word)}
    scored = []
    rows = Tool.objects.filter(pk__in=visible).select_related("server")
    for tool in rows.only("pk", "tool_id", "name", "title", "description", "purpose", "server__slug"):
        text = " ".join((tool.tool_id.replace("_", " "), tool.title, tool.purpose, tool.description)).lower()
        shared = sorted(words & set(_WORD.findall(text)))
        if shared:
            scored.append((-len(shared), tool.tool_id, tool, shared))
    scored.sort(key=lambda row: row[:2])
    matches = [
        Match(
            tool_pk=tool.pk,
            tool_id=tool.tool_id,
            name=tool.name,
            server=tool.server.slug,
            title=tool.title or tool.name,
            summary=first_sentence(tool.purpose) or first_sentence(tool.description),
            score=0.0,  # no calibrated evidence without an index
            fused_rank=rank,
            bm25_rank=None,
            dense_rank=None,
            why_matched={"shared_words": shared[:6]},
        )
        for rank, (_, _, tool, shared) in enumerate(scored[:top_k], start=1)
    ]
    return SearchResult(
        matches,
        index_ready=False,
        degraded=True,
        confidence=Confidence.LOW if matches else Confidence.NONE,
        backend=backend,
    )


# -- indexing -------------------------------------------------------------------------------------------


def _vectors_for(docs: list[ToolDoc], progress: ProgressCallback) -> tuple[dict[int, DocVectors], int, bool]:
    """Stored vectors where the texts are unchanged; encode and store the rest. (vectors, encoded, degraded)
    ``progress(done, total)`` counts the texts encoded."""
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
    # One key, one width: a model of another width configured under the same SCOUT_SEARCH_MODEL_KEY would
    # write rows the index cannot hold beside the stored ones (every search then failed). Write none; keep those.
    stored_dim = ToolEmbedding.objects.filter(model_key=key).values_list("dim", flat=True).first()
    if stored_dim is not None and stored_dim != encoder.dim:
        detail = (
            f"indexing without vectors: the model gives {encoder.dim} dimensions, the vectors stored under "
            f"{key!r} have {stored_dim}: set another SCOUT_SEARCH_MODEL_KEY for this model"
        )
        search_event_record(kind=SearchEventKind.MODEL_UNAVAILABLE, detail=detail)
        return vectors, 0, True
    texts: list[str] = []
    for doc in todo:
        texts += [t for _, t in doc.dense_texts()] + list(doc.negatives)
    progress(0, len(texts))
    matrix = encoder.encode(texts, progress=progress)
    offset = 0
    spread: list[int] = []  # search capture: lines on many unrelated topics (documents.lone_passages)
    for doc in todo:
        pairs = doc.dense_texts()
        count = len(pairs) + len(doc.negatives)
        block = matrix[offset : offset + count].astype(np.float32, copy=True)
        offset += count
        rows, kinds, texts = doc.vector_rows(block[: len(pairs)])
        negatives = block[len(pairs) :]
        ToolEmbedding.objects.update_or_create(
            tool_id=doc.pk,
            model_key=key,
            defaults={
                "dense_hash": doc.dense_hash(),
                "dim": block.shape[1],
                "kinds": list(kinds),
                "texts": list(texts),
                "negative_count": len(doc.negatives),
                "vectors": np.vstack([rows, negatives]).astype(np.float32).tobytes(),
                "learned": doc.learned_indexed(),
            },
        )
        vectors[doc.pk] = DocVectors(rows, kinds, texts, negatives if doc.negatives else None)
        if topic_spread_held([kind for kind, _ in pairs], block[: len(pairs)]):
            spread.append(doc.pk)
    if spread:
        tools_hold_for_signal(tool_pks=spread, marker=TOPIC_SPREAD)
    return vectors, len(todo), False


def _index(*, kind: str, pks: Collection[int] | None, progress: ProgressCallback | None) -> IndexGeneration:
    generation = IndexGeneration.objects.create(kind=kind, model_key=model_key())
    record = progress_throttled(_generation_progress_record(generation.pk))
    try:
        docs = tool_docs_load(pks=pks)
        vectors, encoded, degraded = _vectors_for(docs, progress_chain(record, progress))
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
    generation.save(update_fields=["status", "tool_count", "encoded", "reused", "degraded", "finished_at"])
    token = str(generation.token)
    removed = set(pks or ()) - {doc.pk for doc in docs}
    tools = [IndexedTool(doc, vectors.get(doc.pk)) for doc in docs]

    def _announce() -> None:
        generation_token_keep(token)  # this process serves it at once; the others on their next check
        backend_get().publish(generation=token, tools=tools, removed=removed, full=pks is None)
        generations_prune()

    transaction.on_commit(_announce)
    return generation


def _generation_progress_record(pk: int) -> ProgressCallback:
    # update(), not save(): the row is read by the admin while the build runs, and only these two change.
    def record(done: int, total: int) -> None:
        IndexGeneration.objects.filter(pk=pk).update(progress_done=done, progress_total=total)

    return record


def index_update(*, tool_pks: Collection[int], progress: ProgressCallback | None = None) -> IndexGeneration:
    """Reindex the given tools (changed, added, removed or disabled) and publish a new generation.

    Only tools whose vector texts changed are encoded. With the model down the generation is published
    without new vectors (``degraded``): the changed text is searchable by BM25 at once.
    """
    pks = {int(pk) for pk in tool_pks}
    return _index(kind=GenerationKind.INCREMENTAL, pks=pks, progress=progress)


def index_rebuild(*, progress: ProgressCallback | None = None) -> IndexGeneration:
    """Index every indexable tool and publish a new generation (stored vectors are reused).

    ``progress(done, total)`` hears the texts encoded; the generation row records the same, throttled."""
    return _index(kind=GenerationKind.FULL, pks=None, progress=progress)


def generations_prune() -> int:
    """Delete old generation rows after a build is published; returns how many. Kept: the newest
    SCOUT_SEARCH_GENERATIONS_KEPT generations (at least the current one, the latest ready), any newer than the
    current one, any still building, and the newest SCOUT_WEAVIATE_KEEP_PREVIOUS + 1 ready full builds (the
    Weaviate collections kept through the rollback window, and the size ``/metrics`` reports). A process whose
    snapshot is at a deleted generation, or missed one, reads the index whole (selectors.generation_changes)."""
    ready = IndexGeneration.objects.filter(status=GenerationStatus.READY).order_by("-id")
    current = ready.values_list("id", flat=True).first()
    if current is None:
        return 0
    newest = IndexGeneration.objects.order_by("-id").values_list("id", flat=True)
    cutoff = min(current, *newest[: max(settings.SCOUT_SEARCH_GENERATIONS_KEPT, 1)])
    fulls = ready.filter(kind=GenerationKind.FULL).values_list("id", flat=True)
    kept_fulls = list(fulls[: settings.SCOUT_WEAVIATE_KEEP_PREVIOUS + 1])
    old = IndexGeneration.objects.filter(id__lt=cutoff).exclude(status=GenerationStatus.BUILDING)
    try:
        deleted, _ = old.exclude(id__in=kept_fulls).delete()
    except DatabaseError:  # the build is published; the rows go after the next one
        logger.warning("search: old index generations not pruned", exc_info=True)
        return 0
    return deleted


def index_reconcile() -> dict[str, int]:
    """Repair drift between the configured backend's server-side index and the database (Weaviate: objects
    missing, stale or left over after a failed write; no collection or another model's: a rebuild).
    Backends without a server-side index have nothing to reconcile."""
    backend = backend_get()
    reconcile = getattr(backend, "reconcile", None)
    return reconcile() if reconcile is not None else {}
