"""Ranking over one immutable index snapshot: branch scores, fusion, second stage, calibration, cut.

Everything here sees only the visible rows: branch ranks, normalization statistics and BM25 statistics
are computed over them, and ties break on the tool id, so a hidden tool changes nothing a caller sees.
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from ..text import compound_parts, request_terms, unreadable_for_english_model
from .dense import DenseIndex, DenseScores, refine_together
from .intent import DELETE, READ, UPDATE, VERBS, intent_adjustment, request_operations
from .producers import singular
from .sparse import SparseIndex, SparseScores

FUSIONS = ("convex", "rrf")
MODES = ("bm25", "dense", *FUSIONS)


class Confidence(StrEnum):
    """How sure an answer is that its first tools fit the request (decided by ``answer_confidence`` only).
    The one definition: the query log's field takes its choices from ``choices()``."""

    HIGH = "high"
    LOW = "low"  # a ranking is returned; the model should check the schemas or rephrase
    NONE = "none"  # withheld: near-certain that no visible tool fits ("no tool fits")

    @property
    def label(self) -> str:
        return _CONFIDENCE_LABELS[self]

    @classmethod
    def choices(cls) -> list[tuple[str, str]]:
        """(value, label) pairs, as Django's ``choices`` takes them."""
        return [(member.value, member.label) for member in cls]


_CONFIDENCE_LABELS = {
    Confidence.HIGH: "High",
    Confidence.LOW: "Low: check the schemas or rephrase",
    Confidence.NONE: "Withheld: no tool fits",
}


# A match of a served answer is shown with its inputSchema (``Ranking.on_merit``) only when its fused score is at
# least this share of the best of its step: in a small catalog the first five held tools far below the first, each
# with its whole schema (the demo: 40-60% of a search answer's tokens). It changes no ranking, cut or confidence. On
# ETOM and LiveMCPBench+MCPVerse (top_k 5, high answers) no relevant tool lost its schema (0.6 lost one) and 59 of
# 9,669 and 2 of 540 schemas went (bench/schemas_shown.py): in a large catalog the first five score alike.
LEAD_SHARE = 0.5


@dataclass(frozen=True)
class RankingOptions:
    fusion: str = "convex"  # convex | rrf | bm25 | dense (the last two are single-branch, for evaluation)
    bm25_weight: float = 0.3  # convex: 0.3 BM25 / 0.7 dense measured best (RETRIEVAL-NOTES)
    rrf_k: int = 60
    overfetch: int = 3  # RRF: each branch contributes its top overfetch * top_k (SCOUT §6.4)
    second_stage: int = 30  # candidates the second stage re-ranks
    decompose: bool = True  # multi-step requests: also score each part (see engine/decompose.py)
    clause_discount: float = 0.9
    # Convex fusion: a step the request implies without wording it (``Branches.implied``, ``decompose.implied_steps``)
    # scores this share of a worded step's: the implied file write still reaches the top 10, while its siblings
    # (edit_file, create_directory) no longer push out the weakest worded step's tool (bench/NOTES-rank14.md).
    implied_share: float = 0.9
    clause_rescale: bool = False  # rescaling each part to the top measured worse on ETOM levels 3-4
    intent: bool = True
    intent_agree: float = 0.06
    intent_conflict: float = 0.04
    # Second stage, convex fusion: a tool also scores this share of the best fused score among the candidates
    # of its server (``_apply_server``): a server that fits the request lifts its other tools, as the next step
    # of a task is often on the server of the first. Tuned on ETOM and ToolBench (0.2: slot recall up, no
    # figure down).
    server_share: float = 0.2
    # Second stage: a tool gains this share times the part of its name's words the request says (``_apply_name``):
    # "read the file", "list_directory". Small: it decides between tools the branches scored about equal.
    name_share: float = 0.03
    # Second stage: a tool its upstream marks deprecated loses this (``_apply_deprecated``), more than the gaps
    # by which a deprecated tool led its replacement (server-filesystem's read_file, 0.01-0.05: its shorter name
    # and text match as well or better), so the replacement comes first; still ranked, and first when nothing
    # else fits.
    deprecated_penalty: float = 0.1
    # Second stage, convex fusion: a tool gains this share times its closeness to the other candidates: the mean
    # cosine of its document vector to the ``cluster_neighbours`` closest of theirs (``_apply_cluster``), for a
    # one-step request whose candidates are a selection of the visible tools.
    cluster_share: float = 0.4
    cluster_neighbours: int = 10
    # Second stage, convex fusion, multi-step requests: a tool that finds an identifier one of the first
    # ``producer_consumers`` candidates of its server requires and the request does not say (``_apply_producers``)
    # gains this share of that candidate's score, at most up to just below it. LiveMCPBench+MCPVerse slot
    # recall@10 .571 -> .589, every other served figure within 0.05 point (bench/NOTES-rank20.md).
    producer_share: float = 0.3
    producer_consumers: int = 5
    negative_threshold: float = 0.55  # cosine to a negative example that demotes a tool
    # See ``answer_confidence``: withheld when nothing stands out (the request's peak below ``withhold_peak``
    # and its spread below ``withhold_spread``) and the best calibrated score of the visible candidates is
    # below ``withhold_threshold``, or below ``withhold_flat_threshold`` where the spread was measured (flat);
    # served as ``low`` below ``confidence_threshold``.
    withhold_threshold: float = 0.3
    withhold_peak: float = 0.145
    withhold_spread: float = 0.065
    withhold_flat_threshold: float = 0.4
    confidence_threshold: float = 0.5
    # ``high`` also needs the first tool's own evidence (``Calibration.evidence``, from its curated text and the
    # request's words other than its operation verbs: ``curated_evidence``) at least this: see ``answer_confidence``.
    confidence_evidence: float = 0.4
    # ``high`` also needs the first tool to lead the next of its step by at least this fused score (convex fusion only):
    # see ``undecided``.
    confidence_lead: float = 0.01
    # False: report that it would withhold but keep the ranking, uncut (the curator preview shows why).
    enforce_abstention: bool = True
    dynamic_cut: bool = True
    # Keep matches within ``cut_drop`` calibrated score of the best of their step (``_step_floors``; the best
    # overall for a single-step request), and always the first ``cut_keep``. No absolute floor: a tool of
    # another step of a multi-step request often has weak evidence of its own. Chosen on ETOM as the tightest
    # cut costing under half a point of any as-served figure there (the former 0.25 above an absolute floor
    # cost 3 points of slot recall@10; 0.5 cost 1).
    cut_drop: float = 0.7
    # 3 kept matches far below the best (git_status for "what time is it in Tokyo", shown with key inputs only):
    # tokens and a wrong lead for a model. 1 left every as-served figure identical on ETOM (2,075 requests),
    # LiveMCPBench+MCPVerse and Apify (bench/NOTES-agentux13.md); MetaTool and ToolBench not run.
    cut_keep: int = 1
    # A candidate's dense rank is reported when it is within this many of the visible tools (None beyond):
    # a server-side dense leg returns this deep a head, so both backends report the same ranks. Must exceed
    # ``overfetch`` * the largest top_k (the RRF head), ``Calibration.peak_depth`` and ``spread_depth``.
    dense_rank_depth: int = 64


@dataclass(frozen=True)
class Calibration:
    """Logistic map from raw, visibility-independent evidence to a 0..1 relevance score.

    Evidence: the tool's best cosine to the request (independent of every other tool), a quarter of the
    share of the request's IDF mass it matches, and half the request's peak: how far its best cosine
    stands above its 20th best (statistics over the visible set only). Raw RRF values carry no such
    information: they only encode ranks. The peak is what generalizes across query styles: an off-topic
    request is about as close to its best tool as to its 20th, while a short or human-written request
    with a modest best cosine still stands out from the rest. Centre chosen on ETOM (infeasible level 5
    against levels 1-2): 96% of level 5 abstains for 0.4% / 2.7% of levels 1 / 2; checked, not tuned,
    on human-written sets (false abstention LiveMCPBench+MCPVerse .27 -> .17, MetaTool .46 -> .29).
    """

    slope: float = 12.0
    coverage_share: float = 0.25
    peak_share: float = 0.5
    peak_depth: int = 20
    # The request's spread (``spread_of_head``): its ``spread_top``-th best cosine above its ``spread_depth``-th.
    spread_top: int = 10
    spread_depth: int = 50
    center: float = 0.48
    lexical_slope: float = 10.0  # BM25 only (model down): coverage alone
    lexical_center: float = 0.30

    def peak(self, cosine: np.ndarray | None) -> float:
        """How far the request's best cosine stands above its ``peak_depth``-th best (visible rows only)."""
        if cosine is None or not len(cosine):
            return 0.0
        depth = min(self.peak_depth, len(cosine))
        head = np.partition(cosine, len(cosine) - depth)[len(cosine) - depth :]
        return float(head.max() - head.min())

    def peak_of_head(self, head_values: np.ndarray) -> float:
        """``peak`` from the request's best cosines in descending order (at least ``peak_depth`` of them, or
        every visible one): the same value without selecting the head again."""
        if not len(head_values):
            return 0.0
        depth = min(self.peak_depth, len(head_values))
        return float(head_values[0] - head_values[depth - 1])

    def spread_of_head(self, head_values: np.ndarray) -> float | None:
        """How far the request's ``spread_top``-th best cosine stands above its ``spread_depth``-th best, from its
        best cosines in descending order (visible rows only): whether a group of tools stands out from the bulk,
        where the peak asks it of one tool. None with fewer than ``spread_depth`` of them (a small visible set
        measures its size more than the request)."""
        if len(head_values) < self.spread_depth:
            return None
        return float(head_values[self.spread_top - 1] - head_values[self.spread_depth - 1])

    def score(self, cosine: np.ndarray | None, coverage: np.ndarray, peak: float = 0.0) -> np.ndarray:
        if cosine is None:
            z = self.lexical_slope * (coverage - self.lexical_center)
        else:
            z = self.slope * (self.evidence(cosine, coverage) + self.peak_share * peak - self.center)
        return 1.0 / (1.0 + np.exp(-z))

    def evidence(self, cosine: np.ndarray, coverage: np.ndarray) -> np.ndarray:
        """A tool's own evidence for the request, the part of ``score``'s input that does not depend on the
        request's peak: its best cosine and a quarter of the share of the request's IDF mass it matches."""
        return cosine + self.coverage_share * coverage


@dataclass
class Candidate:
    row: int
    score: float  # fused score after the second stage (comparable within one query only)
    calibrated: float
    bm25_rank: int | None
    dense_rank: int | None
    fused_rank: int = 0
    bm25_score: float = 0.0
    dense_score: float | None = None
    best_vector: int = -1
    # The best of its own texts' vectors (never a learned request's): what a caller who did not teach it is told
    # is closest (``own_vectors``). -1: none, or the same as ``best_vector``.
    own_vector: int = -1
    demoted: bool = False
    intent: float = 0.0
    # What ``score`` is made of (the curator preview shows it): each branch's share of the fused score, the
    # request part that gave it (0: the whole request, n: the n-th step of a multi-step request), what the
    # operation intent added, what its server added (``_apply_server``), what its name added (``_apply_name``)
    # what being deprecated took (``_apply_deprecated``, negative) and what its closeness to the other candidates
    # added (``_apply_cluster``).
    # ``score == bm25_part + dense_part + intent_part + server_part + name_part + deprecated_part + cluster_part``.
    bm25_part: float = 0.0
    dense_part: float = 0.0
    intent_part: float = 0.0
    server_part: float = 0.0
    name_part: float = 0.0
    deprecated_part: float = 0.0
    cluster_part: float = 0.0
    step: int = 0
    # ``Calibration.evidence`` (the best of the request's and its parts'); None without the dense branch.
    evidence: float | None = None
    # Lifted by ``_apply_producers`` (a step the request never words): its own evidence is weak by nature, so the
    # dynamic cut does not end the answer at it (``_cut``).
    producer: bool = False


@dataclass
class Ranking:
    candidates: list[Candidate]  # ordered best first, before withholding and the cut
    confidence: Confidence
    cut: int  # how many candidates survive withholding, the dynamic cut and top_k
    query_terms: tuple[str, ...] = ()
    extras: dict = field(default_factory=dict)
    fusion: str = ""  # the fusion used (bm25 when the dense branch is missing)
    # The request's peak over the visible tools (``Calibration.peak``) as the rule read it; None with fewer
    # visible tools than the peak's depth, where it measures the catalog's size more than the request.
    peak: float | None = None
    # The request's spread (``Calibration.spread_of_head``) as the rule read it: the highest of the whole
    # request's and its parts' (``_standing``); None with fewer visible tools than its depth or without the
    # dense branch.
    spread: float | None = None
    unread: bool = False  # the request is one the model cannot read (never withheld on its evidence)
    # The dynamic cut's floor per step (``_step_floors``); empty when the cut did not run.
    floors: dict[int, float] = field(default_factory=dict)
    # The best fused score per step (``_step_leads``): what ``on_merit`` measures a candidate's lead against.
    leads: dict[int, float] = field(default_factory=dict)

    @property
    def abstained(self) -> bool:
        """Withheld: the caller is told that no tool fits."""
        return self.confidence is Confidence.NONE

    def on_merit(self, candidate: Candidate) -> bool:
        """Whether ``candidate`` passes the dynamic cut's floor of its step: a real candidate, not one kept only
        because an answer always keeps its first ``cut_keep`` (a clearly weaker tool far below the best); and
        scores at least ``LEAD_SHARE`` of its step's best fused score. Calibrated scores near 1 are all alike
        (the floor kept memory::add_observations and git::git_add, 0.98 and 0.84, beside get-sum's 1.0 for "add
        two numbers", on the word "add" alone); the fused scores say 0.99 against 0.49 and 0.34."""
        lead = self.leads.get(candidate.step, 0.0)
        if lead > 0 and candidate.score < LEAD_SHARE * lead:
            return False
        return candidate.calibrated >= self.floors.get(candidate.step, -math.inf)

    @property
    def kept(self) -> list[Candidate]:
        return self.candidates[: self.cut]


@dataclass(frozen=True)
class Branches:
    sparse: SparseScores
    dense: DenseScores | None
    visible_rows: np.ndarray
    # A part of the request it implies without wording it (``decompose.is_implied``): scored at
    # ``RankingOptions.implied_share`` of a worded part.
    implied: bool = False


def score_branches(
    sparse: SparseIndex, dense: DenseIndex | None, query: str, query_vector: np.ndarray | None, visible: np.ndarray
) -> Branches:
    sparse_scores = sparse.score(query, visible)
    dense_scores = dense.score(query_vector) if dense is not None and query_vector is not None else None
    return Branches(sparse_scores, dense_scores, np.flatnonzero(visible))


def _top(values: np.ndarray, tie: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best values, best first, ties by tool id (never by anything a hidden tool
    affects). Same as a full sort cut at ``k``, but only the head is sorted: a full sort of every visible
    row per query was most of the search time at 100k tools."""
    n = len(values)
    if k <= 0 or n == 0:
        return np.zeros(0, np.int64)
    if k >= n:
        return np.lexsort((tie, -values))
    if n >= _SAMPLED_TOP_MIN:
        rows = _at_least_top(values, k)
        if rows is not None:  # every row of the head (and every row tied with the k-th) is among these
            return rows[_top(values[rows], tie[rows], k)]
    negated = -values
    kth = np.partition(negated, k - 1)[k - 1]
    better = np.flatnonzero(negated < kth)  # fewer than k rows
    better = better[np.lexsort((tie[better], negated[better]))]
    # Rows tied with the k-th (with RRF, every unfused row: most of the index): only the lowest tie keys.
    tied = np.flatnonzero(negated == kth)
    need = k - len(better)
    if need < len(tied):
        tied = tied[np.argpartition(tie[tied], need - 1)[:need]]
    return np.concatenate((better, tied[np.argsort(tie[tied])]))


# From this many rows, ``_top`` first keeps the rows at or above a threshold read from a sample of every
# ``_SAMPLE_STEP``-th row: one comparison pass instead of partitioning every row (a 100k-row partition was
# the largest cost of a ranking pass after the dense scan).
_SAMPLED_TOP_MIN = 4096
_SAMPLE_STEP = 16


def _at_least_top(values: np.ndarray, k: int) -> np.ndarray | None:
    """Rows (ascending) of every value at or above a threshold with at least ``k`` values at or above it:
    the k-th best value is then at or above it too, so the head and all its ties are among them. None
    when the sample's threshold keeps too few rows, or too many to gain anything (ties, RRF's zeros)."""
    sample = values[::_SAMPLE_STEP]
    depth = min(len(sample), 2 * k // _SAMPLE_STEP + 8)
    threshold = np.partition(sample, len(sample) - depth)[len(sample) - depth]
    rows = np.flatnonzero(values >= threshold)
    return rows if k <= len(rows) <= len(values) // 4 else None


def _kth_best(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest value (1 <= k <= len(values)), partitioning only the rows that can hold it."""
    rows = _at_least_top(values, k) if len(values) >= _SAMPLED_TOP_MIN else None
    head = values if rows is None else values[rows]
    return np.partition(head, len(head) - k)[len(head) - k]


def _ranks_at(
    values: np.ndarray,
    tie: np.ndarray,
    positions: np.ndarray,
    *,
    positive_only: bool,
    depth: int | None = None,
    head: np.ndarray | None = None,
) -> np.ndarray:
    """1-based rank in the full order (value descending, ties by tool id) of the given positions only;
    0 where ``positive_only`` and the value is not positive, and 0 past ``depth``. Equal to ranking every
    row and reading these, without sorting every row: with ``depth`` only the head is selected, and with
    ``positive_only`` only the positive values (BM25: the rows with a query term) are ranked. ``head``: that
    head, ``_top(values, tie, depth)``, when the caller has it already."""
    ranks = np.zeros(len(positions), np.int64)
    ranked = values[positions] > 0 if positive_only else np.ones(len(positions), bool)
    if not ranked.any():
        return ranks
    if depth is not None:
        head = _top(values, tie, depth) if head is None else head
        if positive_only:
            head = head[values[head] > 0]
        rank_of = {int(row): rank for rank, row in enumerate(head.tolist(), start=1)}
        ranks[ranked] = [rank_of.get(int(row), 0) for row in positions[ranked].tolist()]
        return ranks
    wanted = positions[ranked]
    wanted_values = values[wanted]
    # Only rows at or above the lowest wanted value can be above (or tied with) a wanted row: rank among
    # those (with ``positive_only`` that value is positive, so these are positive rows too).
    rows = np.flatnonzero(values >= wanted_values.min())
    values, tie = values[rows], tie[rows]
    wanted = np.searchsorted(rows, wanted)
    # Rank = 1 + rows with a greater value + rows with an equal value and a lower tie key. A plain sort
    # of the values counts the first (np.sort is ~100x faster than a two-key lexsort of every row).
    ordered = np.sort(values)
    left = np.searchsorted(ordered, wanted_values, side="left")
    right = np.searchsorted(ordered, wanted_values, side="right")
    found = 1 + (len(values) - right)
    tied = np.flatnonzero(right - left > 1)
    if len(tied):  # each tied wanted row: add the rows of its value with a lower tie key, all in one sort
        tied_values = np.unique(wanted_values[tied])
        equal = np.flatnonzero(np.isin(values, tied_values))  # the tied wanted rows among them
        low = int(tie[equal].min())
        span = int(tie[equal].max()) - low + 1
        # (value, tie key) as one integer: the value's place among the tied values, then the tie key.
        keys = np.sort(np.searchsorted(tied_values, values[equal]) * span + (tie[equal] - low))
        group = np.searchsorted(tied_values, wanted_values[tied]) * span
        found[tied] += np.searchsorted(keys, group + (tie[wanted[tied]] - low)) - np.searchsorted(keys, group)
    ranks[ranked] = found
    return ranks


def _bm25_scaled(values: np.ndarray) -> np.ndarray:
    """BM25 over its best visible score (per query, visible rows only); the cosine is mixed in as it is."""
    top = float(values.max())
    return values / top if top > 0 else np.zeros_like(values)


@dataclass
class _Fused:
    fused: np.ndarray  # over visible rows; bm25_part + dense_part
    bm25_part: np.ndarray
    dense_part: np.ndarray | None  # None (convex): ``dense_weight`` * dense, computed where read (``dense_part_at``)
    bm25: np.ndarray
    dense: np.ndarray | None
    tie: np.ndarray  # tie-break keys of the visible rows; branch ranks are computed for candidates only
    peak: float
    coverage: np.ndarray  # of every row (not only the visible ones): read at the candidates only
    rows: np.ndarray  # the visible rows
    calibration: Calibration
    dense_head: np.ndarray | None = None  # ``_top`` of ``dense`` when asked for (``head_depth``)
    spread: float | None = None  # read from ``dense_head`` (the whole request only)
    dense_weight: float = 0.0

    def dense_part_at(self, positions: np.ndarray) -> np.ndarray:
        """The dense branch's share of the fused score at the given visible positions (float64)."""
        if self.dense_part is not None:
            return self.dense_part[positions]
        return np.multiply(self.dense[positions], self.dense_weight, dtype=np.float64)  # elementwise: the same bits

    def calibrated_at(self, positions: np.ndarray) -> np.ndarray:
        """The calibrated score of the given visible positions. Elementwise, so the same values as scoring
        every visible row and reading these, without the logistic of every row (only candidates need one)."""
        dense = self.dense[positions] if self.dense is not None else None
        return self.calibration.score(dense, self.coverage[self.rows[positions]], self.peak)

    def evidence_at(self, positions: np.ndarray) -> np.ndarray | None:
        """``Calibration.evidence`` of the given visible positions (None without the dense branch)."""
        if self.dense is None:
            return None
        return self.calibration.evidence(self.dense[positions], self.coverage[self.rows[positions]])


def _visible(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values[rows]``; the array itself (not a copy) when every row is visible (``rows`` is then 0..n-1)."""
    return values if len(rows) == len(values) else values[rows]


def _fuse(
    branches: Branches,
    fusion: str,
    options: RankingOptions,
    top_k: int,
    tie_keys: np.ndarray,
    calibration: Calibration,
    peak: float | None = None,
    head_depth: int = 0,
    bm25_shares: dict[int, np.ndarray] | None = None,
) -> _Fused:
    """``head_depth``: also select the dense head that deep (``_Fused.dense_head``); the peak is read from it.
    ``bm25_shares``: convex BM25 shares by ``id`` of their sparse scores, kept across the passes of one ranking
    (a refinement changes dense scores only), never written to."""
    rows = branches.visible_rows
    tie = _visible(tie_keys, rows)
    bm25 = _visible(branches.sparse.scores, rows)
    dense = _visible(branches.dense.scores, rows) if branches.dense is not None else None
    if fusion == "bm25":
        bm25_part, dense_part = bm25.astype(np.float64), np.zeros(len(rows))
    elif fusion == "dense":
        bm25_part, dense_part = np.zeros(len(rows)), dense.astype(np.float64)
    elif fusion == "convex":
        bm25_part = bm25_shares.get(id(branches.sparse)) if bm25_shares is not None else None
        if bm25_part is None:
            bm25_part = options.bm25_weight * _bm25_scaled(bm25)
            if bm25_shares is not None:
                bm25_shares[id(branches.sparse)] = bm25_part
        # fused = bm25_part + (1 - w) * dense in float64 (bm25_part is float32: each value exact in float64), made
        # in one array: the dense share of every row is not kept, only the candidates' is read (``dense_part_at``).
        dense_part = None
        fused = np.multiply(dense, 1 - options.bm25_weight, dtype=np.float64)
        fused += bm25_part
    else:  # rrf over each branch's top overfetch * top_k
        depth = options.overfetch * top_k
        bm25_part, dense_part = np.zeros(len(rows)), np.zeros(len(rows))
        head = _top(bm25, tie, depth)
        head = head[bm25[head] > 0]  # no term matched: no BM25 rank
        bm25_part[head] = 1.0 / (options.rrf_k + np.arange(1, len(head) + 1))
        if dense is not None:
            head = _top(dense, tie, depth)
            dense_part[head] = 1.0 / (options.rrf_k + np.arange(1, len(head) + 1))
    if dense_part is not None:
        fused = bm25_part + dense_part
    dense_head = _top(dense, tie, head_depth) if dense is not None and head_depth > 0 else None
    if peak is None:
        if dense_head is not None and len(dense_head) >= min(calibration.peak_depth, len(dense)):
            peak = calibration.peak_of_head(dense[dense_head])
        else:
            peak = calibration.peak(dense)
    spread = calibration.spread_of_head(dense[dense_head]) if dense_head is not None else None
    coverage = branches.sparse.coverage
    return _Fused(
        fused,
        bm25_part,
        dense_part,
        bm25,
        dense,
        tie,
        peak,
        coverage,
        rows,
        calibration,
        dense_head,
        spread,
        1 - options.bm25_weight,
    )


def rank(
    branches: Branches,
    *,
    query: str,
    top_k: int,
    options: RankingOptions,
    tie_keys: np.ndarray,
    tool_ops: list[frozenset[str]] | None = None,
    negatives: DenseIndex | None = None,
    negative_terms: list[frozenset[str]] | None = None,
    query_vector: np.ndarray | None = None,
    calibration: Calibration = Calibration(),  # noqa: B008 - frozen, shared default
    clauses: Sequence[Branches] = (),
    servers: np.ndarray | None = None,
    name_words: Sequence[frozenset[str]] | None = None,
    vector_kinds: Sequence[str] | None = None,
    learned_terms: Sequence[frozenset[str]] | None = None,
    deprecated: np.ndarray | None = None,
    vectors: DenseIndex | None = None,
    read_only: np.ndarray | None = None,
    takes_input: np.ndarray | None = None,
    needs: Sequence[frozenset[str]] | None = None,
    gives: Callable[[int], frozenset[str]] | None = None,
) -> Ranking:
    """Rank the visible rows. ``clauses``: branches of the request's parts (a multi-step request); a tool
    then scores by the best of the whole request and each part (parts slightly discounted). ``servers``: a
    server number per row (``IndexSnapshot.server_codes``), for ``_apply_server``. ``name_words``: each row's
    name words (``text.name_words``), for ``_apply_name``. ``vector_kinds`` (the kind of each vector of the
    dense table, ``DenseIndex.kinds``) and ``learned_terms`` (each row's words from learned requests only): for
    ``curated_evidence``. ``deprecated``: whether each row's upstream marks it deprecated, for
    ``_apply_deprecated``. ``vectors``: the vector table the dense scores index (each tool's first vector is its
    document's), for ``_apply_cluster``. ``read_only``: whether governance classes each row as a read
    (``ToolDoc.read_only``), for ``write_before_read`` and ``change_asked_of_a_read``. ``takes_input``: whether
    each row's input schema has a property (``ToolDoc.parameters``), for ``fixed_tool_for_unknown_object``.
    ``needs`` (each row's required identifiers' words, ``producers.needed_identifiers``) and ``gives`` (a row's
    name and description words, ``producers.produced_words``): for ``_apply_producers``.

    With approximate dense scores (an int8 table, see engine/dense.py) each pass also names the tools
    whose exact score could change its answer; they are re-scored exactly (the request's and its parts' in
    one read) and the pass repeats until it names none, so the answer is the exact scan's. The first pass
    names every tool the answer depends on (``_exact_rows_needed``): two passes (RRF: at most a third, when
    a BM25 head's tool joins the candidates), a few hundred tools re-scored."""
    clauses = clauses if options.decompose else ()
    everything = (branches, *clauses)
    bm25_shares: dict[int, np.ndarray] = {}  # the same in every pass (the branches' sparse scores stay alive)
    floors: dict[tuple[str, int], float] = {}  # lower bounds on exact thresholds, kept across the passes
    refined = False
    while True:
        ranking, needed = _rank_pass(
            branches,
            query=query,
            top_k=top_k,
            options=options,
            tie_keys=tie_keys,
            calibration=calibration,
            clauses=clauses,
            bm25_shares=bm25_shares,
            floors=floors,
            # Convex and dense fusion: the pass after a re-score names no row the first did not (see
            # ``_exact_rows_needed``), so it is the last and does not ask.
            names_rows=not (refined and _fusion_of(branches, options) in ("convex", "dense")),
        )
        if needed is None or not refine_together([b.dense for b in everything], needed):
            break
        refined = True
    if isinstance(ranking, Ranking):
        return ranking
    # The last pass's candidates, read now that nothing more is refined (earlier passes build none).
    candidates = ranking.candidates()
    own_vectors(candidates, branches.dense, vector_kinds)
    fusion = _fusion_of(branches, options)
    if options.server_share and servers is not None and fusion == "convex":  # a share of a score, not of a rank
        _apply_server(candidates, servers, options.server_share)
    if options.intent and tool_ops is not None and fusion in FUSIONS:
        _apply_intent(candidates, query, tool_ops, options, scale=1.0 if fusion == "convex" else 2.0 / options.rrf_k)
    if options.name_share and name_words is not None and fusion in FUSIONS:
        scale = 1.0 if fusion == "convex" else 2.0 / options.rrf_k
        _apply_name(candidates, query, name_words, options.name_share * scale)
    if options.deprecated_penalty and deprecated is not None and fusion in FUSIONS:
        scale = 1.0 if fusion == "convex" else 2.0 / options.rrf_k
        _apply_deprecated(candidates, deprecated, options.deprecated_penalty * scale)
    # Only where the candidates are a selection (at most half the visible tools): where they are most of them, their
    # closeness measures the catalog's centre, not the request's (Apify's 7 tools: Hit@1 .672 -> .641). And only for a
    # one-step request: a multi-step request's steps are apart by design, and pulling its top 10 towards the largest
    # group of alike candidates pushed out a step alone on its server (ETOM level-4 slot recall .769 -> .749).
    selection = 2 * len(candidates) <= len(branches.visible_rows)
    if options.cluster_share and vectors is not None and fusion == "convex" and selection and not clauses:
        _apply_cluster(candidates, vectors, options.cluster_share, options.cluster_neighbours)
    # Multi-step requests only: a one-step request's answer is its one tool (for every request: Apify Hit@5 -1.6).
    if options.producer_share and needs is not None and servers is not None and fusion == "convex" and clauses:
        _apply_producers(candidates, query, servers, needs, gives, tie_keys, options)
    _apply_negatives(candidates, query, query_vector, negatives, negative_terms, options)
    candidates.sort(key=lambda c: (c.demoted, -c.score, tie_keys[c.row]))
    for position, candidate in enumerate(candidates, start=1):
        candidate.fused_rank = position
    enough = len(branches.visible_rows) >= calibration.peak_depth
    peak = ranking.peak if enough else None
    # The English-only model's evidence never withholds a request it cannot read (BM25's, over English tool
    # texts, says as little about it).
    unread = branches.dense is not None and unreadable_for_english_model(query)
    first_evidence = None
    if candidates:
        deletes = tool_ops is not None and DELETE in tool_ops[candidates[0].row]
        first_evidence = curated_evidence(candidates[0], everything, vector_kinds, learned_terms, calibration, deletes)
    terms = branches.sparse.query_terms
    misled = write_before_read(candidates, query, read_only, servers, top_k)
    misled = misled or change_asked_of_a_read(candidates, query, read_only)
    # A catalog where no visible tool declares an input says nothing about inputs (MetaTool's schemas are all empty).
    if takes_input is not None and not takes_input[branches.visible_rows].any():
        takes_input = None
    misled = misled or fixed_tool_for_unknown_object(candidates, branches.sparse, takes_input, query)
    # Convex fusion only: RRF's fused values encode ranks (a lead says which branch ranked first, not by how much).
    misled = misled or (fusion == "convex" and undecided(candidates, options.confidence_lead))
    ranking = _cut(candidates, top_k, options, terms, peak, ranking.spread, unread, first_evidence, misled)
    ranking.fusion = _fusion_of(branches, options)
    return ranking


def write_before_read(
    candidates: Sequence[Candidate],
    query: str,
    read_only: np.ndarray | None,
    servers: np.ndarray | None,
    top_k: int,
) -> bool:
    """Whether a request that names only reads ("list", "show", "what": ``request_operations``) has first a tool
    governance does not class as a read, while a tool of the same server it classes as a read scores at least
    ``LEAD_SHARE`` of the first's fused score among the first ``top_k``. ``answer_confidence`` then serves the
    answer ``low``. On the demo "list all entities in memory" led with memory::delete_entities, high, on the word
    "entities" its name and text have and read_graph's and open_nodes' do not: an agent trusts high and deletes
    where it meant to read. The ranking is kept (the ranking's evidence cannot tell; a near-tie swap measured
    worse), only what the answer promises changes: the read tools are there to choose.

    The classes are governance's (``ToolDoc.read_only``): the upstream's annotations where the tool's own name and
    description do not contradict them, or an admin's. A tool without annotations is a write (the MCP default),
    so a catalog without annotations never meets the rule; a readOnlyHint makes only its own server's other tools'
    answers low, never its own rank higher. Read from the candidates only, which are visible tools."""
    if read_only is None or servers is None or not candidates or read_only[candidates[0].row]:
        return False
    if request_operations(query) != _READS:
        return False
    first = candidates[0]
    server = servers[first.row]
    return any(
        read_only[c.row] and servers[c.row] == server and c.score >= LEAD_SHARE * first.score
        for c in candidates[1:top_k]
    )


_READS = frozenset({READ})


def change_asked_of_a_read(candidates: Sequence[Candidate], query: str, read_only: np.ndarray | None) -> bool:
    """Whether a request that names only changes to what exists (``request_operations`` within update and delete:
    "delete", "edit", "clear", "cancel"; and ``_TAKE_BACK``'s "undo", "forget") has first a tool governance classes
    as a read (``ToolDoc.read_only``). A read changes nothing: on the demo "erase my history" and "clear the logs"
    were served high with git::git_log, "edit the commit message" and "delete the last commit" with git::git_show,
    "update the knowledge graph" with memory::read_graph, where no visible tool does what was asked
    (bench/NOTES-agentux24.md). Not creates or runs:
    a read computes or makes what a request "adds" or "generates" ("add 3 and 4": get-sum; "generate a tiny image").
    ``answer_confidence`` then serves the answer ``low``; the ranking stays. The class is governance's, as for
    ``write_before_read``: a catalog without annotations has no reads and never meets the rule. Read from the first
    candidate only, a visible tool."""
    if read_only is None or not candidates or not read_only[candidates[0].row]:
        return False
    wanted = request_operations(query) | _taken_back(query)
    return bool(wanted) and wanted <= _CHANGES


_CHANGES = frozenset({UPDATE, DELETE})
# Words that ask to take back what exists, read by ``change_asked_of_a_read`` only (confidence): on the demo "undo my
# last commit" and "revert the last commit" were served high with git::git_show, "forget everything you know about
# Dana" with memory::open_nodes, reads all (bench/NOTES-agentux26.md). Not intent verbs: the ranking reads those
# lists, and "forget" there was dropped (bench/NOTES-agentux17.md).
_TAKE_BACK = {"undo": UPDATE, "revert": UPDATE, "forget": DELETE, "wipe": DELETE}


def _taken_back(query: str, limit: int = 12) -> frozenset[str]:
    """The operations ``_TAKE_BACK``'s words name among the first ``limit`` words of a request (as
    ``request_operations``)."""
    return frozenset(_TAKE_BACK[term] for term in request_terms(query)[:limit] if term in _TAKE_BACK)


def fixed_tool_for_unknown_object(
    candidates: Sequence[Candidate], sparse: SparseScores, takes_input: np.ndarray | None, query: str = ""
) -> bool:
    """Whether the request names something no visible tool has a word for (a request word with no visible row,
    ``SparseScores.term_rows``: a file, a name, a thing) and the first tool shares no word with it but its
    operation verbs (``intent.VERBS``) and parts of a compound no visible tool has whole (``text.compound_parts``),
    while it takes no input or shares such a part. A tool with no input does one fixed thing and cannot be
    pointed at what the request names: on the demo "read README.md" and "read my emails" were served high with
    memory::read_graph alone (the whole knowledge graph, no input) on the verb "read". A part of an unknown
    compound names nothing the request does: "list my GitHub issues" was served high with git::git_branch on
    "list" and the "git" of "github" (bench/NOTES-agentux23.md). ``answer_confidence`` then serves the answer
    ``low`` (``misled``), never withheld on it; the ranking stays. Not concerned: a request whose words the
    catalog knows ("read the knowledge graph"), a first tool that shares a word of what the request acts on
    ("generate a tiny image": get-tiny-image) or that takes an input and shares only verbs ("remember that Carol
    prefers tea": create_entities takes the entities). Read from the visible rows only (a hidden tool's words
    count for nothing)."""
    if not candidates or not sparse.term_rows:
        return False
    row = candidates[0].row
    fixed = takes_input is not None and not takes_input[row]
    parts = compound_parts(query)
    known = {term for term, rows in zip(sparse.query_terms, sparse.term_rows, strict=True) if rows is not None}
    unknown = part_shared = False
    for term, rows in zip(sparse.query_terms, sparse.term_rows, strict=True):
        if rows is None:
            unknown = True
        elif term in VERBS or not bool((rows == row).any()):
            continue
        elif parts.get(term, frozenset()) - known:  # a part of a compound no visible row has whole
            part_shared = True
        else:
            return False
    return unknown and (fixed or part_shared)


def undecided(candidates: Sequence[Candidate], lead: float) -> bool:
    """Whether the first candidate leads the next one of its step (``Candidate.step``: the same part of the request)
    by less than ``lead`` fused score: the ranking has not chosen between them, and the first is right about as often
    as the second. ``answer_confidence`` then serves the answer ``low`` (``misled``), never withheld on it; the
    ranking stays, and the agent, told to check the schemas, picks between the two. Such near ties (under .01) are a
    fifth to a quarter of the wrong first tools served high on LiveMCPBench+MCPVerse and ETOM and one in twenty on
    MetaTool, against 0-2.4% of the right ones, often a sibling of the same server: LiveMCPBench's "Show me all the
    column names from the 'WeatherStats' sheet" led by excel_describe_sheets .006 ahead of excel_read_sheet, the one
    wanted (bench/NOTES-agentux25.md). A demoted candidate (``_apply_negatives``) is not a rival. Read from the
    candidates only, which are visible tools."""
    if lead <= 0 or not candidates:
        return False
    first = candidates[0]
    rival = next((c for c in candidates[1:] if c.step == first.step and not c.demoted), None)
    return rival is not None and first.score - rival.score < lead


def own_vectors(candidates: list[Candidate], dense: DenseScores | None, vector_kinds: Sequence[str] | None) -> None:
    """Each candidate whose closest vector is a learned request's: its closest among its own texts' vectors, as
    ``own_vector``. A caller's explanation names that one: "matches requests that led to this tool" told anyone
    that someone else's request close to theirs was followed by a call of the tool (a guess at another person's
    words confirmed, or the topic of their work), which learning never shows them (privacy, issue 8)."""
    if dense is None or vector_kinds is None:
        return
    for candidate in candidates:
        if candidate.best_vector < 0 or vector_kinds[candidate.best_vector] != "learned":
            continue
        first, last = int(dense.offsets[candidate.row]), int(dense.offsets[candidate.row + 1])
        own = [at for at in range(first, last) if vector_kinds[at] != "learned"]
        if own:
            candidate.own_vector = own[int(np.argmax(dense.sims[own]))]


def curated_evidence(
    candidate: Candidate,
    everything: Sequence[Branches],
    vector_kinds: Sequence[str] | None,
    learned_terms: Sequence[frozenset[str]] | None,
    calibration: Calibration,
    deletes: bool = False,
) -> float | None:
    """``candidate.evidence`` from its curated text only and from the words that name what the request acts on,
    the best of the request's and its parts' (``everything``): its learned requests' vectors (kind ``learned``:
    each request, the centroid and the sums, ``ToolDoc.vector_rows``), the words it has only from them
    (``learned_terms``) and the request's operation verbs (``intent.VERBS``: "list", "show", "create") left out.
    What ``answer_confidence`` reads as the first tool's own evidence: see there. A tool never taught that
    shares no operation verb with the request has neither, so this is its ``evidence``, the same number.
    ``deletes``: the tool's operation is a delete (``intent.tool_operation``), see ``_counted_coverage``."""
    dense = everything[0].dense
    if candidate.evidence is None or dense is None:
        return candidate.evidence
    row = candidate.row
    first, last = int(dense.offsets[row]), int(dense.offsets[row + 1])
    curated = [at for at in range(first, last) if vector_kinds is None or vector_kinds[at] != "learned"]
    taught = len(curated) != last - first
    words = learned_terms[row] if learned_terms is not None else frozenset()
    best, uncounted = -math.inf, False
    for branch in everything:
        if branch.dense is None:
            continue
        if taught:
            cosine = float(branch.dense.sims[curated].max()) if curated else -1.0
        else:
            cosine = float(branch.dense.scores[row])
        coverage, less = _counted_coverage(branch.sparse, row, words, deletes)
        uncounted = uncounted or less
        best = max(best, float(calibration.evidence(cosine, coverage)))
    return best if taught or uncounted else candidate.evidence


def _counted_coverage(
    sparse: SparseScores, row: int, learned: frozenset[str], deletes: bool = False
) -> tuple[float, bool]:
    """``row``'s coverage of the request (``SparseScores.coverage``) less the share of the request's IDF mass of
    the words it matches that do not show it fits: words it has only from learned requests (``learned``), and
    the request's operation verbs when the request names an object the visible tools have words for and ``row``
    has none of them. A verb says what to do, not what to do it on: "list files in a directory" matched
    git_branch ("List Git branches") on "list" alone, while "files" and "directory" are words of other tools, and
    its coverage made a cosine of .36 read high on the demo, where no tool lists files. Where the object is words
    no visible tool has (a name, a fact: "remember that Carol prefers tea"), the verb is all a tool can share
    and it still counts, except for a tool that deletes (``deletes``): what it deletes must already be something,
    and a delete verb alone does not show it is the tool's kind of thing. "delete my account" was served high with
    memory::delete_entities on "delete" (cosine .32, coverage .35), where no tool knows accounts; "delete the
    relation between Alice and Acme" stays high on delete_relations' cosine (.51). Whether anything was left out,
    too.

    A delete by its words (``intent.tool_operation``), not by governance's destructive class (an irreversible
    write): that class holds what cannot be taken back, sends and payments too (the demo's simulate-research-query,
    whose text "sends an elicitation request"), whose object is new, as a create's is; and it holds every tool
    without annotations (the MCP default), which would leave the verb out for every create of such a server. Measured
    (bench/NOTES-agentux24.md): with the class, no answer moved on the demo, Apify, LiveMCPBench+MCPVerse or ETOM,
    and one MetaTool-test answer, right first, went from high to low."""
    coverage, mass = float(sparse.coverage[row]), sum(sparse.idf)
    if mass <= 0:
        return coverage, False
    term_rows = sparse.term_rows or (None,) * len(sparse.query_terms)
    terms = list(zip(sparse.query_terms, sparse.idf, term_rows, strict=True))

    def has(term: str, rows: np.ndarray | None) -> bool:
        return term not in learned and rows is not None and bool((rows == row).any())

    objects = [(term, rows) for term, _, rows in terms if term not in VERBS and rows is not None]
    off_object = (bool(objects) or deletes) and not any(has(term, rows) for term, rows in objects)
    left_out = 0.0
    for term, idf, rows in terms:
        if term in learned or (off_object and term in VERBS and has(term, rows)):
            left_out += idf
    if not left_out:
        return coverage, False
    return max(0.0, coverage - left_out / mass), True


def _fusion_of(branches: Branches, options: RankingOptions) -> str:
    return options.fusion if branches.dense is not None or options.fusion == "bm25" else "bm25"


def _approximate(branch: Branches) -> bool:
    return branch.dense is not None and branch.dense.error > 0


def _rank_pass(
    branches: Branches,
    *,
    query: str,
    top_k: int,
    options: RankingOptions,
    tie_keys: np.ndarray,
    calibration: Calibration,
    clauses: Sequence[Branches],
    bm25_shares: dict[int, np.ndarray] | None = None,
    floors: dict[tuple[str, int], float] | None = None,
    names_rows: bool = True,
) -> tuple["_Pass | Ranking", list[np.ndarray] | None]:
    """One ranking pass: the candidates (or an empty Ranking), and for approximate dense scores the rows of
    each branch whose exact score this answer depends on (None when every score is exact or not
    ``names_rows``)."""
    rows = branches.visible_rows
    terms = branches.sparse.query_terms
    if not len(rows):
        return Ranking([], Confidence.NONE, 0, terms), None
    fusion = _fusion_of(branches, options)
    # The dense head serves the peak, the candidates' dense ranks and the re-score band (one selection).
    head_depth = max(options.dense_rank_depth, calibration.peak_depth, Calibration.peak_depth, calibration.spread_depth)
    whole = _fuse(
        branches, fusion, options, top_k, tie_keys, calibration, head_depth=head_depth, bm25_shares=bm25_shares
    )
    fused = whole.fused
    top = float(fused.max()) if len(fused) and options.clause_rescale else 0.0
    scales, fuses = [1.0], [whole]
    # A part's own head: its spread counts for the request's (``_standing``).
    part_depth = calibration.spread_depth
    for clause in clauses:
        part = _fuse(
            clause, fusion, options, top_k, tie_keys, calibration, whole.peak, part_depth, bm25_shares=bm25_shares
        )
        # Each part's best tool lands just under the whole request's best, so every step gets a place.
        scale = options.clause_discount
        if clause.implied and fusion == "convex":  # chosen on convex (RRF's rank values: not measured better)
            scale *= options.implied_share
        if options.clause_rescale and (part_top := float(part.fused.max())) > 0:
            scale *= top / part_top
        scales.append(scale)
        fuses.append(part)
        scaled = scale * part.fused
        fused = np.maximum(fused, scaled, out=scaled)  # a tool scores by the best of the request and its parts

    pool = max(options.second_stage, options.overfetch * top_k)
    order = _top(fused, whole.tie, pool)
    if fusion == "rrf":
        order = order[fused[order] > 0]
    cand_rows = rows[order]
    needed = None
    if names_rows and any(_approximate(b) for b in (branches, *clauses)):
        needed = _exact_rows_needed(
            branches, clauses, scales, fusion, options, top_k, fused, order, pool, cand_rows, fuses, floors
        )
    peak, spread = _standing(fuses)
    return _Pass(branches, options, whole, order, fused[order], fuses, scales, peak, spread), needed


def _standing(fuses: Sequence[_Fused]) -> tuple[float, float | None]:
    """The request's peak and spread as the withholding rule reads them (``fuses``: the whole request's first,
    then each part's): the whole request's peak, and the highest of its own and its parts' spreads. A part of a
    multi-step request is a request of its own: a long request that mixes steps (a game's character, then its
    equipment; a paper, then a figure in it) blurs its one vector, while the step a tool serves can still have
    a group of related tools above the bulk. Not a part's peak: a part is often a few words ("can you recommend
    some options?"), and one tool whose name echoes its verb stands out from the rest for it without anything
    in the catalog fitting. A part's calibrated scores keep the whole request's peak (``_fuse``); only whether
    the answer is withheld reads the parts' spreads.

    Chosen on LiveMCPBench+MCPVerse and ETOM with every threshold unchanged: answerable LiveMCPBench requests
    withheld 7 -> 4 of 141 (each released has a part with a spread of .069-.084; the whole requests' .053-.061),
    ETOM level-5 (no tool) requests withheld 75 -> 73 of 91 (.066 and .074), ETOM levels 1-2 unchanged. With
    the parts' peaks too: LiveMCPBench 3 of 141, ETOM level 5 72 of 91."""
    whole, parts = fuses[0], fuses[1:]
    spread = whole.spread
    for part in parts:
        if part.spread is not None and spread is not None:
            spread = max(spread, part.spread)
    return whole.peak, spread


@dataclass
class _Pass:
    """A ranking pass's candidates (visible positions ``order``) and their values, before the diagnostics
    (branch ranks, closest vector) that only the last pass needs."""

    branches: Branches
    options: RankingOptions
    whole: _Fused
    order: np.ndarray
    fused: np.ndarray  # per candidate
    fuses: Sequence[_Fused]  # the request's, then each part's
    scales: Sequence[float]  # the factor of each of ``fuses`` in the fused score
    peak: float  # the request's
    spread: float | None  # the highest of the request's and its parts' (``_standing``)

    def candidates(self) -> list[Candidate]:
        whole, order, dense, fuses, scales = self.whole, self.order, self.branches.dense, self.fuses, self.scales
        # Per candidate only, and only for the last pass (the others are repeated after a re-score): the
        # calibrated score (the best of the request's and its parts'), the step that gave the fused score (the
        # first of the best, as the running maximum of ``_rank_pass``) and its branch shares (scaled as the fused
        # score was).
        calibrated, evidence = whole.calibrated_at(order), whole.evidence_at(order)
        for part in fuses[1:]:
            calibrated = np.maximum(calibrated, part.calibrated_at(order))
            if evidence is not None:
                evidence = np.maximum(evidence, part.evidence_at(order))
        cand_step, best = np.zeros(len(order), np.int64), whole.fused[order]
        for which in range(1, len(fuses)):
            scaled = scales[which] * fuses[which].fused[order]
            wins = scaled > best
            best = np.where(wins, scaled, best)
            cand_step[wins] = which
        bm25_part, dense_part = whole.bm25_part[order], whole.dense_part_at(order)
        for which in np.unique(cand_step[cand_step > 0]).tolist():
            at = cand_step == which
            bm25_part[at] = scales[which] * fuses[which].bm25_part[order[at]]
            dense_part[at] = scales[which] * fuses[which].dense_part_at(order[at])
        cand_rows = self.branches.visible_rows[order]
        bm25_ranks = _ranks_at(whole.bm25, whole.tie, order, positive_only=True)
        dense_ranks = (
            _ranks_at(
                whole.dense,
                whole.tie,
                order,
                positive_only=False,
                depth=self.options.dense_rank_depth,
                head=whole.dense_head[: self.options.dense_rank_depth],
            )
            if whole.dense is not None
            else np.zeros(len(order), np.int64)
        )
        # Python numbers read once per array (tolist), not one numpy scalar at a time: the same values.
        rows = cand_rows.tolist()
        columns = zip(
            rows,
            self.fused.tolist(),
            calibrated.tolist(),
            bm25_ranks.tolist(),
            dense_ranks.tolist(),
            whole.bm25[order].tolist(),
            whole.dense[order].tolist() if whole.dense is not None else [None] * len(rows),
            bm25_part.tolist(),
            dense_part.tolist(),
            cand_step.tolist(),
            dense.best_of(cand_rows).tolist() if dense is not None else [-1] * len(rows),
            evidence.tolist() if evidence is not None else [None] * len(rows),
            strict=True,
        )
        return [
            Candidate(
                row=row,
                score=score,
                calibrated=calibrated,
                bm25_rank=bm25_rank or None,
                dense_rank=dense_rank or None,
                bm25_score=bm25_score,
                dense_score=dense_score,
                best_vector=best_vector,
                bm25_part=bm25_part,
                dense_part=dense_part,
                step=step,
                evidence=evidence,
            )
            for (
                row,
                score,
                calibrated,
                bm25_rank,
                dense_rank,
                bm25_score,
                dense_score,
                bm25_part,
                dense_part,
                step,
                best_vector,
                evidence,
            ) in columns
        ]


def _exact_rows_needed(
    branches: Branches,
    clauses: Sequence[Branches],
    scales: Sequence[float],
    fusion: str,
    options: RankingOptions,
    top_k: int,
    fused: np.ndarray,
    order: np.ndarray,
    pool: int,
    cand_rows: np.ndarray,
    fuses: Sequence[_Fused],
    floors: dict[tuple[str, int], float] | None = None,
) -> list[np.ndarray]:
    """Per branch, the rows whose exact dense score the pass's answer depends on, given that every tool's
    score not yet refined is within its own bound of its exact value (``DenseScores.errors_at``, at most
    ``error``). Once all of them are exact, the answer is the exact scan's: a row outside these bands is on
    the same side of every threshold either way.

    A threshold (the pool's last fused value, the request's 50th best cosine, an RRF head's last) is at
    least the lowest value less its bound among the rows at or above it in this pass: that many rows are at
    least that high exactly. A row whose value plus its bound is below that floor is below the exact
    threshold. ``floors`` keeps the
    highest floor of each threshold across the passes of one ranking (each pass's holds), so a pass after
    a refinement names no row the first did not: two passes, not one more per refinement. Nor does it name a
    new candidate (convex and dense fusion): every tool whose exact fused value reaches the pool's exact
    threshold ``T`` reached the first pass's floor (at most ``T``), so it is exact now, and those are at least
    ``pool`` tools at or above ``T``; a tool the first pass did not name is below the floor even with its bound,
    so below ``T`` and behind all of them. ``rank`` therefore does not ask the pass after a re-score (RRF still
    asks: a BM25 head's tool can join the candidates).

    Not the candidates' dense ranks (a diagnostic the curator preview shows): a tool's rank counts every
    tool above it, and for a tool in the bulk of the cosine distribution the rows within the error band
    are thousands; re-scoring them all cost more than the float32 scan. Those ranks may differ by the
    few tools whose cosines are within ~0.002 of the tool's; order, scores and confidence never do.
    ``fuses``: the pass's ``_Fused`` of the request and of each part, in ``branches, *clauses`` order."""
    rows = branches.visible_rows
    everything = (branches, *clauses)
    floors = {} if floors is None else floors

    def floor(key: tuple[str, int], kth: float, error: float) -> float:
        floors[key] = max(floors.get(key, -math.inf), float(kth) - error)
        return floors[key]

    # Bound on a fused value's error: convex mixes the cosine in with weight 1 - w; rrf and bm25 use only
    # ranks inside exact heads (below). A fused value is the best of the request's and its parts' (scaled).
    weights = []
    for branch, scale in zip(everything, scales, strict=True):
        if _approximate(branch) and fusion in ("dense", "convex"):
            weights.append((branch, scale if fusion == "dense" else scale * (1 - options.bm25_weight)))
    fused_error = max((weight * branch.dense.error for branch, weight in weights), default=0.0)

    def fused_errors(at: np.ndarray) -> np.ndarray:
        """Each given visible position's own bound on its fused value's error (at most ``fused_error``)."""
        bound = np.zeros(len(at))
        for branch, weight in weights:
            np.maximum(bound, weight * branch.dense.errors_at(rows[at]), out=bound)
        return bound

    shared: list[np.ndarray] = [cand_rows]
    if len(order) >= pool and len(order) < len(rows) and fused_error > 0:
        # The pool's rows are exactly at least their value less their own bound: so is its last place.
        lowest = floor(("pool", 0), np.min(fused[order] - fused_errors(order)), 0.0)
        shared.append(rows[_reaching(fused, lowest, fused_error, fused_errors)])
    needed = []
    for i, branch in enumerate(everything):
        if not _approximate(branch):
            needed.append(np.zeros(0, np.int64))
            continue
        error = branch.dense.error
        fuse = fuses[i]
        values = fuse.dense

        def errors(at: np.ndarray, dense: DenseScores = branch.dense) -> np.ndarray:
            return dense.errors_at(rows[at])

        parts = list(shared)
        if fuse.dense_head is not None:  # the peak and spread (the request's; each part's spread, ``_standing``):
            # the head's cosines down to the deepest they read
            depth = min(max(Calibration.peak_depth, fuse.calibration.spread_depth), len(fuse.dense_head))
            head = fuse.dense_head[:depth]
            lowest = floor(("peak", i), np.min(values[head] - errors(head)), 0.0)
            parts.append(rows[_reaching(values, lowest, error, errors)])
        if fusion == "rrf":  # each branch's head: its members and their order
            depth = min(options.overfetch * top_k, len(values))
            head = np.flatnonzero(values >= _kth_best(values, depth))  # at least ``depth`` rows
            lowest = floor(("head", i), np.min(values[head] - errors(head)), 0.0)
            parts.append(rows[_reaching(values, lowest, error, errors)])
        needed.append(np.concatenate(parts))
    return needed


def _reaching(values: np.ndarray, lowest: float, error: float, errors) -> np.ndarray:
    """Positions whose value could exactly be at least ``lowest``: their value plus their own bound
    (``errors(positions)``) reaches it. ``error`` bounds every row's: only the rows within it are asked."""
    near = np.flatnonzero(values >= lowest - error)
    return near[values[near] + errors(near) >= lowest]


def _apply_server(candidates: list[Candidate], servers: np.ndarray, share: float) -> None:
    """Each candidate gains ``share`` of the best fused score among the candidates of its server (its own,
    when it is its server's best). Over the candidates only, which are the same as over every visible tool:
    a server's best tool scores at least as high as any of its candidates, so it is a candidate itself
    (ties aside). Hidden tools are never candidates, so they lift nothing."""
    best: dict[int, float] = {}
    for candidate in candidates:
        server = int(servers[candidate.row])
        best[server] = max(best.get(server, -math.inf), candidate.score)
    for candidate in candidates:
        candidate.server_part = share * best[int(servers[candidate.row])]
        candidate.score += candidate.server_part


def _apply_intent(
    candidates: list[Candidate], query: str, tool_ops: list[frozenset[str]], options: RankingOptions, scale: float
) -> None:
    wanted = request_operations(query)
    if not wanted:
        return
    for candidate in candidates:
        candidate.intent = intent_adjustment(
            wanted, tool_ops[candidate.row], options.intent_agree, options.intent_conflict
        )
        candidate.intent_part = candidate.intent * scale
        candidate.score += candidate.intent_part


def _apply_name(candidates: list[Candidate], query: str, name_words: Sequence[frozenset[str]], share: float) -> None:
    """Each candidate gains ``share`` times the part of its name's words that the request says: a request that
    names a tool ("read the file", "list_directory") prefers it over siblings its words describe as well. A
    candidate whose name shares no word with the request gains nothing, so with no name word said the order
    stays as it was. Read from the candidate's own name only: hidden tools change nothing."""
    said = frozenset(request_terms(query))
    if not said:
        return
    for candidate in candidates:
        words = name_words[candidate.row]
        if words and not words.isdisjoint(said):
            candidate.name_part = share * len(words & said) / len(words)
            candidate.score += candidate.name_part


def _apply_producers(
    candidates: list[Candidate],
    query: str,
    servers: np.ndarray,
    needs: Sequence[frozenset[str]],
    gives: Callable[[int], frozenset[str]],
    tie_keys: np.ndarray,
    options: RankingOptions,
) -> None:
    """A step the request never words: one of the first ``producer_consumers`` candidates (the consumer) requires an
    identifier (``needs``: "paper", "latitude", "ticker") the request does not say, and another candidate of its
    server that does not require it has its words in its name or description (``gives``): that producer
    (``search_papers``, ``geocode_address``, ``load_all_tickers``) gains ``producer_share`` of the consumer's score,
    at most up to just below the consumer (its best such lift; added to ``server_part``). On LiveMCPBench a place's
    tools ranked, and its geocoding (their coordinates) at 11-22. Only candidates, which are visible tools."""
    said = {singular(term) for term in request_terms(query)}
    first = sorted(candidates, key=lambda c: (-c.score, tie_keys[c.row]))[: options.producer_consumers]
    lifts: dict[int, float] = {}
    for consumer in first:
        wanted = needs[consumer.row] - said
        if not wanted:
            continue
        for other in candidates:
            if other is consumer or servers[other.row] != servers[consumer.row]:
                continue
            if needs[other.row] & wanted or not gives(other.row) & wanted:
                continue
            lift = min(options.producer_share * consumer.score, consumer.score - _BELOW - other.score)
            if lift > lifts.get(other.row, 0.0):
                lifts[other.row] = lift
    for candidate in candidates:
        if candidate.row in lifts:
            candidate.score += lifts[candidate.row]
            candidate.server_part += lifts[candidate.row]
            candidate.producer = True


_BELOW = 1e-6  # a lifted producer stays this far below its consumer


def _apply_deprecated(candidates: list[Candidate], deprecated: np.ndarray, penalty: float) -> None:
    """Each candidate its upstream marks deprecated loses ``penalty``. An upstream deprecates a tool for another
    that does the same, usually under a longer name with a longer text ("read_file" for "read_text_file"), and
    the old one's shorter name and text match a request as well or better: without this it ranks above the tool
    the upstream asks callers to use. Read from the candidate's own text only: hidden tools change nothing."""
    for candidate in candidates:
        if deprecated[candidate.row]:
            candidate.deprecated_part = -penalty
            candidate.score += candidate.deprecated_part


def _apply_cluster(candidates: list[Candidate], vectors: DenseIndex, share: float, neighbours: int) -> None:
    """Each candidate gains ``share`` times the mean cosine of its document vector to the ``neighbours`` closest
    document vectors of the other candidates. The candidates of a request gather around what it asks: a tool
    in the thick of them is more likely the one wanted than an outlier that one shared word or a stray sentence
    put among them (a stock-news tool for a request about files of financial reports). Scored against the
    candidates only, which are visible tools: hidden tools change nothing. A tool without vectors gains nothing.

    Measured as served (bench/NOTES-rank11.md), share .4, 10 neighbours, one-step requests only (``rank``; on every
    request ETOM level-4 slot recall@10 fell .769 -> .749): LiveMCPBench+MCPVerse Hit@1 / Hit@5 / MRR@10
    .298 / .766 / .470 -> .319 / .787 / .495 (slot recall .523 -> .519); ETOM level-2 Hit@1 .825 -> .831, levels 3-5
    unchanged; MetaTool-test .471 / .675 -> .477 / .692. ``SCOUT_SEARCH_CLUSTER_SHARE``; the opposite sign (a hub
    penalty) lost on LiveMCPBench."""
    if len(candidates) < 3:
        return
    rows = np.asarray([c.row for c in candidates], np.int64)
    starts = vectors.offsets[rows]
    has = vectors.offsets[rows + 1] > starts
    block = np.zeros((len(rows), max(vectors.dim, 1)), np.float32)
    if has.any():
        block[has] = vectors.exact_rows(starts[has], starts[has] + 1)
    norms = np.linalg.norm(block, axis=1, keepdims=True)
    block = np.divide(block, norms, out=np.zeros_like(block), where=norms > 0)
    sims = block @ block.T
    np.fill_diagonal(sims, -np.inf)
    closest = -np.sort(-sims, axis=1)[:, : min(neighbours, len(rows) - 1)]
    for candidate, affinity, own in zip(candidates, closest.mean(axis=1).tolist(), has.tolist(), strict=True):
        if own:
            candidate.cluster_part = share * affinity
            candidate.score += candidate.cluster_part


def _apply_negatives(
    candidates: list[Candidate],
    query: str,
    query_vector: np.ndarray | None,
    negatives: DenseIndex | None,
    negative_terms: list[frozenset[str]] | None,
    options: RankingOptions,
) -> None:
    """A request close to one of a tool's negative examples pushes that tool below the others."""
    if query_vector is not None and negatives is not None and len(negatives):
        rows = np.asarray([c.row for c in candidates], np.int64)
        sims = negatives.max_similarity(query_vector, rows)
        for candidate, sim in zip(candidates, sims, strict=True):
            positive = candidate.dense_score if candidate.dense_score is not None else -1.0
            if sim >= options.negative_threshold and sim > positive:
                candidate.demoted = True
    elif negative_terms is not None:
        query_terms = frozenset(request_terms(query))
        for candidate in candidates:
            terms = negative_terms[candidate.row]
            if terms and query_terms and len(terms & query_terms) / len(terms | query_terms) >= 0.6:
                candidate.demoted = True


def score_explanation(candidate: Candidate, *, fusion: str) -> dict:
    """What ranked ``candidate`` where it is, from the values the ranking used (nothing recomputed):
    ``rank_score`` orders the answer (demoted tools after all others); ``bm25`` + ``dense`` (the branches'
    shares) + ``intent`` + ``server`` + ``name`` + ``deprecated`` + ``cluster`` = ``rank_score``; ``step`` names the
    part of a multi-step request that gave the score; ``fit`` is the calibrated relevance that decides confidence."""
    explanation = {
        "fusion": fusion,
        "rank_score": round(candidate.score, 4),
        "intent": round(candidate.intent_part, 4),
        "server": round(candidate.server_part, 4),
        "name": round(candidate.name_part, 4),
        "deprecated": round(candidate.deprecated_part, 4),
        "cluster": round(candidate.cluster_part, 4),
        "demoted": candidate.demoted,
        "fit": round(candidate.calibrated, 4),
        "bm25": round(candidate.bm25_part, 4),
        "dense": round(candidate.dense_part, 4),
        "step": candidate.step,
    }
    return explanation


def answer_confidence(
    best: float,
    peak: float | None,
    options: RankingOptions,
    spread: float | None = None,
    unread: bool = False,
    first_evidence: float | None = None,
    misled: bool = False,
) -> Confidence:
    """The one rule for an answer's confidence, from the best calibrated score among the visible candidates,
    the request's peak over the visible tools (how far its best cosine stands above its 20th best; None with
    fewer visible tools) and its spread (how far its 10th best cosine stands above its 50th; None with fewer
    visible tools or no dense branch).

    Withholding costs an agent more than a weak ranking it can read and reject, so an answer is withheld
    only when all three say nothing fits: the best score is below any real match, no tool stands out from
    the rest (an off-topic request is about as close to its best tool as to its 20th), and no group of
    tools stands out from the bulk (an off-topic request is about as far from its 10th best tool as from
    its 50th; a request in the catalog's domain whose wording matches no one tool well still has a head of
    related tools well above the others; for a multi-step request, the highest of its own and its parts'
    spreads, ``_standing``). A weak best that stands out either way is served as ``low``, as
    is any best below ``confidence_threshold``. A measured flat spread is evidence of its own, so it
    withholds up to ``withhold_flat_threshold``; with fewer than 50 visible tools (no spread) the threshold
    is ``withhold_threshold``, and with fewer than 20 (no peak either) the best score alone decides.
    ``unread``: a request the English-only model cannot read (mostly outside the Latin script, or French,
    Spanish, ... by their function words): its evidence alone never withholds it, so it is served (``low``
    unless the best score is high).

    Chosen on ETOM (level 5, no tool, against levels 1-2) with MetaTool-test and ToolBench as checks of
    false withholding: the spread's threshold releases most answerable requests a flat peak withheld
    (MetaTool-test false withholding .111 -> .027, ToolBench 0 -> 0), and the flat threshold (0.4 against
    0.3) takes back the off-topic requests it released (ETOM level 5 withheld .813 -> .824 for levels 1-2
    .003 -> .005). Held out: LiveMCPBench+MCPVerse .071 -> .050 (of the 7 still withheld, 6 have no relevant
    tool in the ranking's first 20). A spread threshold of .06 instead would release 7 more ETOM level-5
    requests. Retrieval scores cannot tell a near miss (an operation the server lacks) from a paraphrase;
    ``scout_eval --withhold-curve`` shows the trade-off per threshold.

    ``high`` also needs the first tool's own evidence (``Calibration.evidence``: its cosine and a quarter of its
    coverage, the best of the request's and its parts'; ``first_evidence``, None without the dense branch) at
    least ``confidence_evidence``. The calibrated score adds half the request's peak, which says that something
    in the catalog fits better than the rest (reason to serve the answer), not that the first tool does; in a
    small catalog the peak is large for any request (its 20th best tool is unrelated): the demo answered "send
    an email to my boss" high with a memory tool (cosine .34, no word shared). It moves answers between ``high``
    and ``low`` only: the ranking, the cut and what is withheld stay. Chosen on LiveMCPBench+MCPVerse and ETOM
    (``scout_eval``'s ``high_hit@1`` / ``high_hit@5``, the first tool's Hit@1 / Hit@5 among answers served
    high): .333 / .846 -> .375 / .906 and .901 / .973 -> .908 / .977, right first tools served high 13 -> 12
    of 14 and 1379 -> 1373 of 1393 (0.45 cut LiveMCPBench's to 9; 0.35 gained less). Held out: MetaTool-test
    .605 / .805 -> .715 / .859, Apify .732 -> .745, ToolBench unchanged.

    That evidence is the first tool's curated text's (``curated_evidence``): its learned requests' vectors and
    the words only they gave it count in its ranking and calibrated score, not here. Learned evidence is not
    calibrated: a request close to what one principal taught matches that principal's vector at its weight and
    its words in full, and with learning nearly every answer was served high. Chosen on MetaTool, learning from
    half of queries-metatool-learn and tested on the other half (answers served high, ``high_hit@1`` /
    ``high_hit@5``, ``low_hit@1``): without learning 576 of 1000, .722 / .847, .182; learning, learned evidence
    counted, 941, .697 / .852, .071; learned vectors left out but learned words in the coverage 717, .767 /
    .899, .391; both left out 583, .797 / .901, .467. The answers only learned evidence held high were right
    first for half of them (188 of 378 single-tool requests), under what ``high`` promises without learning.
    Held out (learn file -> test file): 1932 of 2000 high, .721 / .889, .141 -> 1124, .800 / .927, .574.
    A tool never taught keeps its evidence, so sets without learning are unchanged (ETOM,
    LiveMCPBench+MCPVerse: the same ``scout_eval --json``).

    Nor does the request's operation verb count in that coverage when the request's object is words other visible
    tools have and the first tool has none of them (``_counted_coverage``): "list files in a directory" on the
    demo (no filesystem server) was served high with git::git_branch first, a cosine of .36 and "list" the only
    word shared. A verb says what to do, not what to do it on; a tool that shares only the verb with a request
    has not shown it fits, and an agent given high calls it. Measured on all six public sets
    (bench/NOTES-agentux20.md).

    ``misled`` (``write_before_read``): the request names only reads and a tool governance does not class as a
    read leads one of its server's reads that fits about as well; or (``change_asked_of_a_read``) it names only
    updates and deletes and a tool governance classes as a read leads; or (``fixed_tool_for_unknown_object``) the
    first tool takes no input while the request names something no visible tool has a word for; or (``undecided``)
    the first tool leads the next of its step by less than ``confidence_lead`` fused score; served ``low``, never
    withheld on it.

    ``undecided`` chosen on LiveMCPBench+MCPVerse and MetaTool's learn file (``scout_eval``'s ``high_precision`` /
    ``high_recall``): .382 / .867 -> .448 / .867 and .709 / .812 -> .718 / .805 (.0075 took fewer wrong first tools
    for the same right ones, .0125 more right ones). Held out: MetaTool-test .722 / .802 -> .729 / .798, ETOM .913 /
    .987 -> .928 / .974, Apify .745 / .953 -> .741 / .930 (one right first tool of 43), ToolBench .778 / 1.0 ->
    .875 / 1.0 (bench/NOTES-agentux25.md).
    """
    stands_out = peak is not None and peak >= options.withhold_peak
    stands_out = stands_out or (spread is not None and spread >= options.withhold_spread)
    if best < withhold_threshold(options, spread) and not stands_out and not unread:
        return Confidence.NONE
    if best < options.confidence_threshold:
        return Confidence.LOW
    if first_evidence is not None and first_evidence < options.confidence_evidence:
        return Confidence.LOW
    if misled:
        return Confidence.LOW
    return Confidence.HIGH


def withhold_threshold(options: RankingOptions, spread: float | None) -> float:
    """The best calibrated score below which an answer where nothing stands out is withheld."""
    return options.withhold_threshold if spread is None else options.withhold_flat_threshold


def _cut(
    candidates: list[Candidate],
    top_k: int,
    options: RankingOptions,
    terms: tuple[str, ...],
    peak: float | None,
    spread: float | None = None,
    unread: bool = False,
    first_evidence: float | None = None,
    misled: bool = False,
) -> Ranking:
    """``first_evidence``: the first candidate's own evidence as ``answer_confidence`` reads it
    (``curated_evidence``); ``misled``: ``write_before_read``, ``change_asked_of_a_read`` or
    ``fixed_tool_for_unknown_object`` or ``undecided``."""
    if not candidates:
        return Ranking([], Confidence.NONE, 0, terms, peak=peak, spread=spread, unread=unread)
    # Judge by the best candidate the second stage saw, not only the first: with a long, multi-step
    # request the fused order and the per-tool evidence disagree more often.
    best = max(c.calibrated for c in candidates)
    confidence = answer_confidence(best, peak, options, spread, unread, first_evidence, misled)
    if not options.enforce_abstention:
        return Ranking(
            candidates, confidence, min(top_k, len(candidates)), terms, peak=peak, spread=spread, unread=unread
        )
    if confidence is Confidence.NONE:
        return Ranking(candidates, confidence, 0, terms, peak=peak, spread=spread, unread=unread)
    floors = _step_floors(candidates, options.cut_drop) if options.dynamic_cut else {}
    leads = _step_leads(candidates)
    cut = 0
    for candidate in candidates[:top_k]:
        weak = candidate.calibrated < floors.get(candidate.step, -math.inf) and not candidate.producer
        if weak and cut >= options.cut_keep:
            break
        cut += 1
    return Ranking(
        candidates, confidence, cut, terms, peak=peak, spread=spread, unread=unread, floors=floors, leads=leads
    )


def _step_leads(candidates: list[Candidate]) -> dict[int, float]:
    """The best fused score among the candidates each step scored (``Ranking.on_merit``)."""
    leads: dict[int, float] = {}
    for candidate in candidates:
        leads[candidate.step] = max(leads.get(candidate.step, -math.inf), candidate.score)
    return leads


def _step_floors(candidates: list[Candidate], drop: float) -> dict[int, float]:
    """The dynamic cut's floor per step (``Candidate.step``): ``drop`` below the best calibrated score among the
    candidates that step scored. A single-step request has one step (0), so its floor is the best score's. A
    multi-step request's steps differ in evidence (a step worded like the tools' texts against one worded far
    from them): each tool is judged against its own step's best, not against another step's, so a weak step's
    best tools are not cut for being weaker than a strong step's. As-served slot recall@10: LiveMCPBench+MCPVerse
    .510 -> .519 (its ranking's .526 is the most any cut can serve), ETOM .923 -> .925 (now its ranking's);
    held out: MetaTool-test .723 -> .734 (its ranking's), ToolBench .833 -> .835; no other figure moved. Never
    fewer tools served than with one floor from the overall best, as each step's floor is at or below it."""
    floors: dict[int, float] = {}
    for candidate in candidates:
        floors[candidate.step] = max(floors.get(candidate.step, -math.inf), candidate.calibrated - drop)
    return floors
