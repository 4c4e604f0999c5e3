"""The server share of ranking's second stage (ORM-free, no model): a tool also scores a share of the best
fused score among the candidates of its server, read over visible tools only."""

import numpy as np
import pytest

from search.engine.dense import DenseScores
from search.engine.ranking import Branches, RankingOptions, rank
from search.engine.sparse import SparseScores

# Rows 0 and 2 on server 0, row 1 on server 1, row 3 (the hidden one, when hidden) on server 0.
SERVERS = np.asarray([0, 1, 0, 0])
COSINES = np.asarray([0.8, 0.6, 0.58, 0.95], np.float32)


def ranked(share: float, rows: list[int], n: int = len(COSINES)):
    """Rank an index of the first ``n`` tools with ``rows`` visible."""
    cosines, servers = COSINES[:n], SERVERS[:n]
    visible = np.zeros(n, bool)
    visible[rows] = True
    sparse = SparseScores(np.zeros(n), np.zeros(n), ("term",))
    branches = Branches(sparse, DenseScores(cosines.copy(), cosines.copy(), np.arange(n + 1)), np.flatnonzero(visible))
    options = RankingOptions(intent=False, server_share=share)
    return rank(branches, query="q", top_k=10, options=options, tie_keys=np.arange(n), servers=servers)


def test_a_strong_server_lifts_its_other_tools_above_weaker_servers_best():
    plain = ranked(0.0, [0, 1, 2])
    assert [c.row for c in plain.candidates] == [0, 1, 2]
    shared = ranked(0.2, [0, 1, 2])
    # Row 2 (0.7 * 0.58 + 0.2 * 0.7 * 0.8) now beats row 1, its server's best (1.2 * 0.7 * 0.6).
    assert [c.row for c in shared.candidates] == [0, 2, 1]
    by_row = {c.row: c for c in shared.candidates}
    assert by_row[2].server_part == pytest.approx(0.2 * 0.7 * 0.8)
    assert by_row[1].server_part == pytest.approx(0.2 * 0.7 * 0.6)  # its own: a server's best keeps its place
    for c in shared.candidates:  # the explanation adds up
        assert c.score == pytest.approx(c.bm25_part + c.dense_part + c.intent_part + c.server_part)


def test_a_hidden_tool_lifts_nothing_on_its_server():
    without = [(c.row, c.score, c.server_part) for c in ranked(0.2, [0, 1, 2], n=3).candidates]
    # Row 3, the best of server 0 by far, is hidden: every visible tool scores as if it did not exist.
    hidden = ranked(0.2, [0, 1, 2])
    assert [(c.row, c.score, c.server_part) for c in hidden.candidates] == without
    # ... and made visible it would lift its siblings: the comparison above would catch a leak.
    shown = {c.row: c.score for c in ranked(0.2, [0, 1, 2, 3]).candidates}
    assert shown[0] > dict((row, score) for row, score, _ in without)[0]
