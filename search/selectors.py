"""Reads: tool documents for indexing, stored vectors, the current index generation."""

import threading
from collections.abc import Collection, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from time import monotonic

from django.conf import settings
from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet

from catalog.models import Tool, ToolExample
from governance.cache import ReadOnce
from governance.models import ServerUserObjectPermission
from governance.principals import Principal

from .choices import GenerationKind, GenerationStatus, LearnedStatus
from .documents import MIN_CENTROID_REQUESTS, ToolDoc, tool_doc_from_tool
from .engine.snapshot import DocVectors
from .models import IndexGeneration, LearnedConfirmation, LearnedRequest, ToolEmbedding

# The generation token read by the search in progress (``generation_read_once``).
_generation_once = ReadOnce("scout_generation_read_once")


def indexable_tools() -> "Iterable[Tool]":
    """Tools search may return: still listed upstream and enabled. Visibility is applied per caller."""
    return Tool.objects.live().filter(enabled=True)


PREFETCHED_CHILDREN = ("aliases", "keywords", "examples", "negative_examples")


def learned_to_decide(learned: QuerySet[LearnedRequest]) -> QuerySet[LearnedRequest]:
    """Among ``learned``, those waiting for a curator's decision: learned, and not already a curated example request
    of their tool (case aside; a curator typed it, or attached it from the workbench): promoting such a one adds
    nothing, so it is no decision to ask for."""
    curated = ToolExample.objects.filter(tool=OuterRef("tool"), text__iexact=OuterRef("text"))
    return learned.filter(status=LearnedStatus.LEARNED).exclude(Exists(curated))


def tool_docs_load(*, pks: Collection[int] | None = None) -> list[ToolDoc]:
    """ToolDocs for indexable tools (all, or those among ``pks``), children prefetched: 5 queries in all
    (6 when a tool has several learned requests)."""
    queryset = indexable_tools()
    if pks is not None:
        queryset = queryset.filter(pk__in=list(pks))
    in_use = LearnedRequest.objects.filter(status=LearnedStatus.LEARNED, principal_count__gt=0).order_by("pk")
    # Into plain lists (to_attr): a prefetch kept behind each related manager clones a queryset per tool
    # and relation, which was most of a snapshot build (6.7 of 9.2 s at 2k tools on a loaded machine).
    queryset = queryset.select_related("server", "policy").prefetch_related(
        *(Prefetch(name, to_attr=f"prefetched_{name}") for name in PREFETCHED_CHILDREN),
        Prefetch("learned_requests", queryset=in_use, to_attr="learned_in_use"),
    )
    tools = list(queryset.order_by("pk"))
    # Who taught each learned request of a tool with several (one more query, only then): the distinct
    # principals over all of a tool's learned requests weigh its centroid, which is their mean over teachers
    # (``search.documents.teachers_mean``); BM25 counts a learned word agreed by distinct teachers only.
    centroid_pks = [t.pk for t in tools if len(t.learned_in_use) >= MIN_CENTROID_REQUESTS]
    teachers: dict[int, list[str]] = {}
    if centroid_pks:
        confirmations = LearnedConfirmation.objects.filter(
            learned__in=in_use, learned__tool__in=centroid_pks, counts=True
        )
        for learned_pk, key in confirmations.order_by("learned", "principal_key").values_list(
            "learned", "principal_key"
        ):
            teachers.setdefault(learned_pk, []).append(key)
    for tool in tools:
        for row in tool.learned_in_use:
            row.teachers = tuple(teachers.get(row.pk, ())) or (f"#{row.pk}",)  # none recorded: its own
        tool.learned_principals = len({key for row in tool.learned_in_use for key in teachers.get(row.pk, ())})
    return [tool_doc_from_tool(tool) for tool in tools]


def stored_vectors(*, docs: Iterable[ToolDoc], model_key: str) -> dict[int, DocVectors]:
    """Stored vectors whose hash still matches the tool's current texts (stale rows are ignored): for indexing."""
    docs = list(docs)
    wanted = {doc.pk: doc.dense_hash() for doc in docs}
    rows = ToolEmbedding.objects.filter(model_key=model_key, tool_id__in=list(wanted))
    return {row.tool_id: _doc_vectors(row) for row in rows if wanted.get(row.tool_id) == row.dense_hash}


def snapshot_vectors(*, docs: Iterable[ToolDoc], model_key: str) -> tuple[list[ToolDoc], dict[int, DocVectors]]:
    """The documents and stored vectors a snapshot read for searching (never indexing) ranks with.

    A tool whose curated texts and negative count are those its vectors were made from, and only its learned
    requests changed since, is read as last indexed until the batched learned flush (SCOUT_LEARNED_INDEX_INTERVAL)
    encodes it again: its stored vectors, and the learned requests they were made from (``ToolEmbedding.learned``:
    texts, weights, who taught) in place of those waiting, so that BM25's learned words and the explanations
    match the vectors. The process that learned them ranks it so until the flush; any other process reading the
    catalog in that interval now ranks it the same (it ranked the waiting requests' words, and before that, the
    tools just used on words only). A row stored before ``learned`` was kept keeps the document's own requests."""
    docs = list(docs)
    wanted = {doc.pk: doc.dense_hash() for doc in docs}
    by_pk = {doc.pk: doc for doc in docs}
    rows = ToolEmbedding.objects.filter(model_key=model_key, tool_id__in=list(wanted))
    vectors = {}
    for row in rows:
        doc = by_pk[row.tool_id]
        if wanted[row.tool_id] != row.dense_hash:
            if not _only_learned_changed(doc, row):
                continue
            if row.learned is not None:
                by_pk[row.tool_id] = doc.with_learned_indexed(row.learned)
        vectors[row.tool_id] = _doc_vectors(row)
    return [by_pk[doc.pk] for doc in docs], vectors


def _doc_vectors(row: ToolEmbedding) -> DocVectors:
    matrix = row.matrix()
    count = len(row.kinds)
    return DocVectors(
        matrix[:count], tuple(row.kinds), tuple(row.texts), matrix[count:] if row.negative_count else None
    )


def _only_learned_changed(doc: ToolDoc, row: ToolEmbedding) -> bool:
    """Whether ``row`` was made from ``doc``'s curated texts (all but its learned rows) and negative count."""
    curated = [(kind, text) for kind, text in doc.dense_texts() if kind != "learned"]
    stored = [(kind, text) for kind, text in zip(row.kinds, row.texts, strict=True) if kind != "learned"]
    return curated == stored and row.negative_count == len(doc.negatives)


@dataclass(frozen=True)
class GenerationMark:
    """The generations a snapshot includes: every one up to ``id`` except ``pending``, which were still
    building when it was made (their vectors were not stored yet)."""

    id: int
    pending: frozenset[int] = frozenset()


def generation_mark(token: str) -> GenerationMark | None:
    """The mark of a snapshot read whole from the database at generation ``token``."""
    target = IndexGeneration.objects.filter(token=token).values_list("id", flat=True).first()
    if target is None:
        return None
    building = IndexGeneration.objects.filter(id__lt=target, status=GenerationStatus.BUILDING)
    return GenerationMark(target, frozenset(building.values_list("id", flat=True)))


def generation_changes(mark: GenerationMark, token: str) -> tuple[GenerationMark, set[int]] | None:
    """The tools changed by the generations after ``mark`` up to ``token``, and the new mark; None when a
    snapshot must be read whole: a full rebuild, a failed generation or one whose tools are not recorded."""
    target = IndexGeneration.objects.filter(token=token).values_list("id", flat=True).first()
    if target is None:
        return None
    rows = IndexGeneration.objects.filter(Q(id__in=mark.pending) | Q(id__gte=mark.id, id__lte=target))
    rows = list(rows.values_list("id", "kind", "status", "tool_pks"))
    # Old rows are pruned (services.generations_prune): every generation since the snapshot's own, and those it
    # left pending, must still be there, or changes the snapshot lacks are gone with them.
    if {row[0] for row in rows} != set(mark.pending) | set(range(mark.id, target + 1)):
        return None
    pks: set[int] = set()
    pending: set[int] = set()
    for pk, kind, status, tool_pks in rows:
        if pk == mark.id:
            continue
        if status == GenerationStatus.BUILDING:
            pending.add(pk)
        elif status == GenerationStatus.FAILED or kind == GenerationKind.FULL or tool_pks is None:
            return None
        else:
            pks.update(int(tool_pk) for tool_pk in tool_pks)
    return GenerationMark(max(target, mark.id), frozenset(pending)), pks


def generation_read_once() -> AbstractContextManager[None]:
    """Within this block ``current_generation_token`` answers one token (issue 9: a search asked for it up to three
    times, for the backend's status, its search and the parts' retry). One search then also ranks on the
    generation it checked was ready. A new generation is seen by the next block. Nested blocks share the outer
    one's."""
    return _generation_once.block()


class _KeptToken:
    """The current generation's token as this process last read it, trusted for
    SCOUT_SEARCH_GENERATION_CHECK_SECONDS (issue 9). It was kept in the default cache, where every search read it:
    on Redis a GET, and since Redis keeps whole seconds only, the 0.5 s timeout was written as a DEL, so each search
    also read the database (three round trips a search, none needed). Kept here, a process reads the database
    once per period and a search reads nothing; the bound is the same: a generation made ready by another process
    is seen at most that much later, one announced by this process (``generation_token_keep``) at once."""

    def __init__(self) -> None:
        self._state: tuple[str, float] = ("", 0.0)  # the token, and the monotonic() it is read again past
        self._lock = threading.Lock()  # one read at a time: a slow read never puts back an older token

    def read(self) -> str | None:
        token, until = self._state
        if monotonic() >= until:
            with self._lock:
                token, until = self._state
                if monotonic() >= until:
                    token = _generation_token_fetch()
                    self._state = (token, monotonic() + settings.SCOUT_SEARCH_GENERATION_CHECK_SECONDS)
        return token or None

    def keep(self, token: str, seconds: float | None) -> None:
        seconds = settings.SCOUT_SEARCH_GENERATION_CHECK_SECONDS if seconds is None else seconds
        with self._lock:
            self._state = (token, monotonic() + seconds)

    def forget(self) -> None:
        with self._lock:
            self._state = ("", 0.0)


_kept = _KeptToken()


def current_generation_token() -> str | None:
    """Token of the latest ready generation, read from the database at most every
    SCOUT_SEARCH_GENERATION_CHECK_SECONDS per process (``_KeptToken``). Read once per ``generation_read_once``
    block."""
    return _generation_once.read(_kept.read)


def generation_token_keep(token: str, *, seconds: float | None = None) -> None:
    """This process serves generation ``token`` from now on, for SCOUT_SEARCH_GENERATION_CHECK_SECONDS (or
    ``seconds``) before it reads the database again: a generation it has just made ready (the announce), or one
    served without a database (tests, benchmarks)."""
    _kept.keep(token, seconds)


def generation_token_forget() -> None:
    """The next ``current_generation_token`` reads the database (tests: a flushed database)."""
    _kept.forget()


def _generation_token_fetch() -> str:
    latest = (
        IndexGeneration.objects.filter(status=GenerationStatus.READY).order_by("-id").values_list("token", flat=True)
    ).first()
    return str(latest) if latest else ""


def server_slugs_granted_to(*, principal: Principal) -> frozenset[str]:
    """The caller's own servers (search scope "my_servers"): servers granted to the user personally, not via a
    group."""
    return frozenset(
        ServerUserObjectPermission.objects.filter(
            user=principal.user, permission__codename="discover_server"
        ).values_list("content_object__slug", flat=True)
    )
