"""The one ranking every backend answers with: a request ranked over an in-process snapshot's rows.

A backend contributes only where the dense scores come from (``DenseSource``). Everything else is this
module's, the same code for every backend: BM25 over the caller's visible tools (statistics over those
tools only), the parts of a multi-step request, fusion, calibration, intent, negative examples,
confidence, the dynamic cut and ``why_matched``. So the same candidates give the same answer on every
backend by construction, not by keeping two copies in step.

The embedded backend's dense source is its in-process vector table (every visible tool scored). The
Weaviate backend's is the server's filtered dense head plus the tools it fetches on demand: a tool not
fetched yet is scored at the head's lowest cosine (an upper bound on its true score), and ranking repeats
until every candidate's vectors are known, which gives the answer a full scan gives (see
``search.backends.weaviate.RemoteDense``).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from django.conf import settings

from ..engine.decompose import is_implied
from ..engine.dense import DenseIndex, DenseScores
from ..engine.ranking import Branches, Candidate, RankingOptions, rank, score_explanation
from ..engine.snapshot import IndexSnapshot
from ..text import first_sentence
from .base import Match, RequestMemo, SearchRequest, SearchResult

# A remote dense source fetches missing candidates and ranks again; each round fetches every candidate it
# lacks, so two rounds are usual. Past this many the source is failing to converge: an error, never a guess.
MAX_ROUNDS = 8


def ranking_options(fusion: str, *, enforce_abstention: bool = True) -> RankingOptions:
    return RankingOptions(
        fusion=fusion,
        bm25_weight=settings.SCOUT_SEARCH_BM25_WEIGHT,
        withhold_threshold=settings.SCOUT_SEARCH_WITHHOLD_THRESHOLD,
        withhold_peak=settings.SCOUT_SEARCH_WITHHOLD_PEAK,
        withhold_spread=settings.SCOUT_SEARCH_WITHHOLD_SPREAD,
        withhold_flat_threshold=settings.SCOUT_SEARCH_WITHHOLD_FLAT_THRESHOLD,
        confidence_threshold=settings.SCOUT_SEARCH_CONFIDENCE_THRESHOLD,
        name_share=settings.SCOUT_SEARCH_NAME_SHARE,
        cluster_share=settings.SCOUT_SEARCH_CLUSTER_SHARE,
        enforce_abstention=enforce_abstention,
    )


@dataclass(frozen=True)
class DenseLeg:
    """Dense scores of the request and of each part over the snapshot's rows, and the tables they index."""

    whole: DenseScores
    parts: tuple[DenseScores, ...]
    vectors: DenseIndex  # the table a candidate's ``best_vector`` indexes (kinds, example texts)
    negatives: DenseIndex | None


class DenseSource(Protocol):
    def leg(self) -> DenseLeg:
        """The dense scores as known now."""

    def complete(self, rows: Sequence[int]) -> bool:
        """Make the given rows' scores exact; True when anything changed (rank again)."""


class SnapshotDense:
    """Every visible tool scored from the snapshot's own vector table (the embedded backend). With a
    request's ``memo``, the request vector's scores are those of its first search (``RequestMemo``)."""

    def __init__(
        self, snapshot: IndexSnapshot, vector: np.ndarray, parts: Sequence[np.ndarray], memo: RequestMemo | None = None
    ) -> None:
        assert snapshot.dense is not None
        table = snapshot.dense
        key = ("dense", vector.dtype.str, vector.tobytes())
        kept = memo.get((snapshot,), key) if memo is not None else None
        if kept is not None:
            whole, part_scores = kept.copy(), table.score_all(parts) if parts else []
        else:
            whole, *part_scores = table.score_all([vector, *parts])  # one read of the table for all
            if memo is not None and parts:  # only a multi-step request is searched again
                # Not a copy: ranking refines ``whole`` in place, so the retry starts from the tools this
                # search re-scored exactly (an exact score is the same whichever search asks for it).
                memo.put((snapshot,), key, whole)
        self._leg = DenseLeg(
            whole=whole,
            parts=tuple(part_scores),
            vectors=snapshot.dense,
            negatives=snapshot.negatives,
        )

    def leg(self) -> DenseLeg:
        return self._leg

    def complete(self, rows: Sequence[int]) -> bool:
        return False


class DenseIncomplete(RuntimeError):
    """A dense source kept naming new candidates (it never converged)."""


def rank_request(
    snapshot: IndexSnapshot, request: SearchRequest, dense: DenseSource | None, *, backend: str
) -> SearchResult:
    """Rank the request's visible tools on ``snapshot`` with ``dense`` (None: BM25 only, ``degraded``).

    ``dense`` must score the request's vector and, in order, the vectors of ``request.parts``."""
    options = ranking_options(request.fusion, enforce_abstention=request.enforce_abstention)
    visible, rows = snapshot.visibility(request.visible)
    parts = request.parts if options.decompose else ()
    texts = (request.query, *(text for text, _ in parts))
    scope, memo = (snapshot, request.visible), request.memo
    found = memo.get(scope, ("sparse", texts)) if memo is not None else None
    sparse, *part_sparse = found or snapshot.sparse.score_many(texts, visible)
    if memo is not None and found is None and parts:  # only a multi-step request is searched again
        memo.put(scope, ("sparse", texts), [sparse, *part_sparse])
    vector = request.query_vector if dense is not None else None
    for _ in range(MAX_ROUNDS):
        leg = dense.leg() if dense is not None else None
        branches = Branches(sparse, leg.whole if leg else None, rows)
        clauses = [
            Branches(s, leg.parts[i] if leg else None, rows, implied=is_implied(parts[i][0]))
            for i, s in enumerate(part_sparse)
        ]
        ranking = rank(
            branches,
            query=request.query,
            top_k=request.top_k,
            options=options,
            tie_keys=snapshot.tie_keys,
            tool_ops=snapshot.tool_ops,
            negatives=leg.negatives if leg else None,
            negative_terms=snapshot.negative_terms,
            query_vector=vector,
            clauses=clauses,
            servers=snapshot.server_codes,
            name_words=snapshot.name_words,
            deprecated=snapshot.deprecated,
            read_only=snapshot.read_only,
            takes_input=snapshot.takes_input,
            needs=snapshot.needs,
            gives=snapshot.gives,
            vector_kinds=leg.vectors.kinds if leg else None,
            learned_terms=snapshot.learned_terms,
            vectors=leg.vectors if leg else None,
        )
        if dense is None or not dense.complete([c.row for c in ranking.candidates]):
            break
    else:
        raise DenseIncomplete(f"the dense leg named new candidates for {MAX_ROUNDS} rounds")
    terms = ranking.query_terms if request.explain else None
    table = leg.vectors if leg else None
    return SearchResult(
        [
            _match(snapshot, candidate, terms, table, ranking.fusion, on_merit=ranking.on_merit(candidate))
            for candidate in ranking.kept
        ],
        index_ready=True,
        degraded=vector is None,
        confidence=ranking.confidence,
        generation=snapshot.generation,
        backend=backend,
    )


def _match(
    snapshot: IndexSnapshot,
    candidate: Candidate,
    terms: Sequence[str] | None,
    table: DenseIndex | None,
    fusion: str,
    *,
    on_merit: bool = True,
) -> Match:
    doc = snapshot.docs[candidate.row]
    why = (
        snapshot.explain(candidate.row, candidate.best_vector, terms, table, candidate.own_vector)
        if terms is not None
        else {}
    )
    if candidate.demoted:
        why["demoted"] = "close to a negative example"
    if candidate.intent:
        why["operation_intent"] = round(candidate.intent, 3)
    if terms is not None:
        why["score"] = score_explanation(candidate, fusion=fusion)
    return Match(
        tool_pk=doc.pk,
        tool_id=doc.tool_id,
        name=doc.name,
        server=doc.server,
        title=doc.title or doc.name,
        summary=first_sentence(doc.purpose) or first_sentence(doc.description),
        score=round(candidate.calibrated, 4),
        fused_rank=candidate.fused_rank,
        bm25_rank=candidate.bm25_rank,
        dense_rank=candidate.dense_rank,
        why_matched=why,
        on_merit=on_merit,
    )
