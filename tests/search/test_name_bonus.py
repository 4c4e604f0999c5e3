"""The name bonus of ranking's second stage (ORM-free, no model): a tool gains a small share times the part of
its name's words that the request says, so a request that names a tool prefers it over siblings scored about
as high, and a request that says no name word keeps the branches' order."""

import numpy as np
import pytest

from search.engine.dense import DenseScores
from search.engine.ranking import Branches, RankingOptions, rank
from search.engine.sparse import SparseScores
from search.text import name_words

NAMES = ["list_directory", "read_file", "write_file", "get_file_info"]
WORDS = [name_words(name) for name in NAMES]
# Siblings a dense branch scores about equal: list_directory a little above read_file.
COSINES = np.asarray([0.62, 0.61, 0.55, 0.40], np.float32)


def ranked(query: str, share: float, rows: list[int] | None = None):
    n = len(NAMES)
    visible = np.zeros(n, bool)
    visible[rows if rows is not None else list(range(n))] = True
    sparse = SparseScores(np.zeros(n), np.zeros(n), ("term",))
    branches = Branches(sparse, DenseScores(COSINES.copy(), COSINES.copy(), np.arange(n + 1)), np.flatnonzero(visible))
    options = RankingOptions(intent=False, server_share=0.0, name_share=share)
    return rank(branches, query=query, top_k=10, options=options, tie_keys=np.arange(n), name_words=WORDS)


def order(ranking) -> list[str]:
    return [NAMES[c.row] for c in ranking.candidates]


def test_name_words_are_the_split_name_without_stopwords():
    assert name_words("getFileInfo") == {"get", "file", "info"}
    assert name_words("read-a_file") == {"read", "file"}


def test_a_request_that_names_a_tool_lifts_it_over_a_sibling_scored_higher():
    query = "read_file notes.txt in my home folder"
    assert order(ranked(query, 0.0))[:2] == ["list_directory", "read_file"]
    named = ranked(query, 0.03)
    assert order(named)[:2] == ["read_file", "list_directory"]
    by_name = {NAMES[c.row]: c for c in named.candidates}
    assert by_name["read_file"].name_part == pytest.approx(0.03)  # every word of its name
    assert by_name["write_file"].name_part == pytest.approx(0.03 / 2)  # "file" of "write file"
    assert by_name["get_file_info"].name_part == pytest.approx(0.03 / 3)
    assert by_name["list_directory"].name_part == 0.0
    for c in named.candidates:  # the explanation adds up
        assert c.score == pytest.approx(c.bm25_part + c.dense_part + c.intent_part + c.server_part + c.name_part)


def test_a_request_that_says_no_name_word_keeps_the_order_and_scores():
    query = "what is in the reports folder"
    plain = [(c.row, c.score) for c in ranked(query, 0.0).candidates]
    assert [(c.row, c.score) for c in ranked(query, 0.03).candidates] == plain
    assert all(c.name_part == 0.0 for c in ranked(query, 0.03).candidates)


def test_a_hidden_tool_named_by_the_request_changes_nothing():
    query = "read_file notes.txt"
    visible = [0, 2, 3]  # read_file hidden
    shown = [(c.row, c.score) for c in ranked(query, 0.03, visible).candidates]
    assert 1 not in [row for row, _ in shown]
    alone = {0: 0.7 * 0.62, 2: 0.7 * 0.55 + 0.015, 3: 0.7 * 0.40 + 0.01}
    assert [row for row, _ in shown] == [0, 2, 3]
    for row, score in shown:
        assert score == pytest.approx(alone[row])
