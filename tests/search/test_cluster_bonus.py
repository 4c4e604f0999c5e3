"""The cluster bonus of ranking's second stage (ORM-free, no model): a tool gains a share of its document vector's
closeness to the other candidates', read over visible tools only."""

import numpy as np
import pytest

from search.engine.dense import DenseIndex, DenseScores
from search.engine.ranking import Branches, RankingOptions, rank
from search.engine.sparse import SparseScores

# Row 0 is an outlier (its document vector apart from the others); rows 1-3 gather around one topic; rows 4-9 are
# weak matches (the first of them the fifth candidate); row 10 (the hidden one, when hidden) sits beside row 0.
DOCUMENTS = np.asarray(
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.96, 0.28], [0.0, 0.96, -0.28]]
    + [[0.0, 0.0, 1.0]] * 6
    + [[0.96, 0.28, 0.0]],
    np.float32,
)
COSINES = np.asarray([0.8, 0.78, 0.6, 0.6] + [0.05] * 6 + [0.5], np.float32)
EVERY = list(range(10))  # all but row 10


def ranked(share: float, rows: list[int], n: int = len(COSINES)):
    """Rank an index of the first ``n`` tools with ``rows`` visible; five candidates."""
    cosines = COSINES[:n]
    visible = np.zeros(n, bool)
    visible[rows] = True
    sparse = SparseScores(np.zeros(n), np.zeros(n), ("term",))
    branches = Branches(sparse, DenseScores(cosines.copy(), cosines.copy(), np.arange(n + 1)), np.flatnonzero(visible))
    vectors = DenseIndex([DOCUMENTS[i : i + 1] for i in range(n)], [("document",)] * n, [("",)] * n)
    options = RankingOptions(intent=False, server_share=0.0, cluster_share=share, second_stage=5, overfetch=1)
    return rank(branches, query="q", top_k=5, options=options, tie_keys=np.arange(n), vectors=vectors)


def test_a_tool_among_the_other_candidates_passes_an_outlier():
    assert [c.row for c in ranked(0.0, EVERY).candidates] == [0, 1, 2, 3, 4]
    clustered = ranked(0.4, EVERY)
    assert [c.row for c in clustered.candidates] == [1, 2, 3, 0, 4]
    by_row = {c.row: c for c in clustered.candidates}
    assert by_row[0].cluster_part == pytest.approx(0.0, abs=1e-6)  # close to none of the others
    assert by_row[1].cluster_part == pytest.approx(0.4 * (0.96 + 0.96 + 0.0 + 0.0) / 4, abs=1e-5)
    for c in clustered.candidates:  # the explanation adds up
        assert c.score == pytest.approx(c.bm25_part + c.dense_part + c.server_part + c.cluster_part)


def test_no_bonus_where_the_candidates_are_most_of_the_visible_tools():
    # Rows 0-3 and one weak match visible: every visible tool is a candidate, and closeness is to the catalog.
    few = ranked(0.4, [0, 1, 2, 3, 4])
    assert [c.row for c in few.candidates] == [0, 1, 2, 3, 4]
    assert all(c.cluster_part == 0.0 for c in few.candidates)


def test_a_hidden_tool_moves_nothing():
    without = [(c.row, c.score, c.cluster_part) for c in ranked(0.4, EVERY, n=10).candidates]
    # Row 10, beside the outlier, is hidden: every visible tool scores as if it did not exist.
    hidden = ranked(0.4, EVERY)
    assert [(c.row, c.score, c.cluster_part) for c in hidden.candidates] == without
    # ... and made visible it would lift the outlier: the comparison above would catch a leak.
    shown = {c.row: c.cluster_part for c in ranked(0.4, [*EVERY, 10]).candidates}
    assert shown[0] > 0.05


def test_no_bonus_for_a_multi_step_request():
    # The same candidates, but the request has parts (a multi-step request): its steps are apart by design, so the
    # tool close to the others is not lifted and the outlier keeps its place.
    cosines = COSINES[:10]
    visible = np.arange(10)
    sparse = SparseScores(np.zeros(10), np.zeros(10), ("term",))
    branches = Branches(sparse, DenseScores(cosines.copy(), cosines.copy(), np.arange(11)), visible)
    part = Branches(sparse, DenseScores(cosines.copy(), cosines.copy(), np.arange(11)), visible)
    vectors = DenseIndex([DOCUMENTS[i : i + 1] for i in range(10)], [("document",)] * 10, [("",)] * 10)
    options = RankingOptions(intent=False, server_share=0.0, cluster_share=0.4, second_stage=5, overfetch=1)
    stepped = rank(
        branches, query="q", top_k=5, options=options, tie_keys=np.arange(10), vectors=vectors, clauses=(part, part)
    )
    assert [c.row for c in stepped.candidates][:4] == [0, 1, 2, 3]
    assert all(c.cluster_part == 0.0 for c in stepped.candidates)
