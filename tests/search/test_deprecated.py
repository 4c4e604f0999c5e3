"""A tool its upstream marks deprecated (ORM-free, no model): how the mark is read, and the ranking's penalty.
Over HTTP against a live gateway: tests/mcpgateway/test_deprecated_tools.py."""

import numpy as np
import pytest

from catalog.definitions import marked_deprecated
from search.engine.dense import DenseScores
from search.engine.ranking import Branches, RankingOptions, rank
from search.engine.sparse import SparseScores


@pytest.mark.parametrize(
    "text",
    [
        "Read File (Deprecated)",
        "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead.",
        "packages/track (Deprecated)",
        "[deprecated] Old search",
        "Deprecated: use search_v2.",
        "Lists the items. Deprecated - call list_items_v2 instead.",
        "This endpoint has been deprecated.",
        "Returns the weather. Deprecated in favor of get_forecast.",
    ],
)
def test_an_upstreams_deprecation_note_is_read(text):
    assert marked_deprecated("some_tool", text)


@pytest.mark.parametrize(
    "text",
    [
        "Check if packages are deprecated",  # npm tools of the public catalogs: about other things
        "Identify deprecated packages and suggest replacements",
        "Include deprecated endpoints in results",
        "Check whether a package is deprecated.",
        "Lists items. Deprecated items are hidden.",
        "npmDeprecated",
    ],
)
def test_the_word_about_other_things_is_no_mark(text):
    assert not marked_deprecated("npmDeprecated", text)


def test_a_deprecated_tool_loses_the_penalty_and_the_explanation_adds_up():
    cosines = np.asarray([0.62, 0.60, 0.30], np.float32)  # the old tool a little above its replacement
    n = len(cosines)
    sparse = SparseScores(np.zeros(n), np.zeros(n), ("term",))
    branches = Branches(sparse, DenseScores(cosines.copy(), cosines.copy(), np.arange(n + 1)), np.arange(n))
    options = RankingOptions(intent=False, server_share=0.0, name_share=0.0)
    deprecated = np.asarray([True, False, False])
    ranking = rank(branches, query="read it", top_k=10, options=options, tie_keys=np.arange(n), deprecated=deprecated)
    assert [c.row for c in ranking.candidates] == [1, 0, 2]
    old = next(c for c in ranking.candidates if c.row == 0)
    assert old.deprecated_part == pytest.approx(-options.deprecated_penalty)
    for c in ranking.candidates:
        assert c.score == pytest.approx(
            c.bm25_part + c.dense_part + c.intent_part + c.server_part + c.name_part + c.deprecated_part
        )
    plain = rank(branches, query="read it", top_k=10, options=options, tie_keys=np.arange(n))
    assert [c.row for c in plain.candidates] == [0, 1, 2]
