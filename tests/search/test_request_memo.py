"""The second search of a withheld multi-step request (its parts encoded alone) reuses what the first one
computed that does not depend on the part vectors: the request's BM25 and dense scores and its parts' BM25.
The answer is the one both searches computed afresh give, on float32 and int8 tables (an int8 table's scores
are refined in place by the first search: the second starts from the tools the first re-scored exactly)."""

import pytest

from search.backends import RequestMemo, backends_reset
from search.engine.dense import DenseIndex
from search.engine.ranking import Confidence
from search.engine.sparse import SparseIndex
from search.services import index_rebuild, tool_search

from .test_one_pass_parts import NO_FIT

pytestmark = pytest.mark.slow


@pytest.fixture
def counted(monkeypatch):
    """Texts BM25-scored and vectors scanned, over every search."""
    seen = {"texts": 0, "vectors": 0}
    score_many, score_all = SparseIndex.score_many, DenseIndex.score_all

    def counting_score_many(self, queries, visible):
        seen["texts"] += len(queries)
        return score_many(self, queries, visible)

    def counting_score_all(self, vectors):
        seen["vectors"] += len(vectors)
        return score_all(self, vectors)

    monkeypatch.setattr(SparseIndex, "score_many", counting_score_many)
    monkeypatch.setattr(DenseIndex, "score_all", counting_score_all)
    return seen


def _answer(result):
    return result.confidence, [
        (m.tool_id, m.score, m.fused_rank, m.bm25_rank, m.dense_rank, m.why_matched) for m in result.matches
    ]


@pytest.mark.parametrize("precision", ["float32", "int8"])
def test_a_withheld_request_is_searched_again_without_scoring_the_request_twice(
    encoder, small_catalog, reindex, settings, monkeypatch, counted, precision
):
    from search.encoder import query_cache
    from search.engine.decompose import request_part_spans

    settings.SCOUT_SEARCH_ONE_PASS_PARTS = True
    settings.SCOUT_SEARCH_VECTOR_PRECISION = precision
    reindex(index_rebuild)
    visible = frozenset(t.pk for t in small_catalog.values())
    parts = len(request_part_spans(NO_FIT))
    assert parts >= 2

    def search():
        query_cache().clear()
        backends_reset()  # a fresh snapshot, of the precision asked
        counted.update(texts=0, vectors=0)
        return tool_search(query=NO_FIT, visible=visible, top_k=5, enforce_abstention=False)

    shared = search()
    assert shared.confidence is Confidence.NONE  # so it was searched twice
    assert counted == {"texts": 1 + parts, "vectors": 1 + 2 * parts}  # not 2 + 2 * parts of each

    monkeypatch.setattr(RequestMemo, "get", lambda self, scope, key: None)  # every search from scratch
    afresh = search()
    assert counted == {"texts": 2 + 2 * parts, "vectors": 2 + 2 * parts}
    assert _answer(shared) == _answer(afresh)


def test_a_memo_value_serves_only_the_objects_it_was_computed_from():
    memo, snapshot, visible = RequestMemo(), object(), frozenset({1, 2})
    memo.put((snapshot, visible), "key", "value")
    assert memo.get((snapshot, visible), "key") == "value"
    assert memo.get((snapshot, frozenset({1, 2})), "key") is None  # an equal set, but another object
    assert memo.get((object(), visible), "key") is None  # another snapshot (a new generation)
    assert memo.get((snapshot, visible), "other") is None
