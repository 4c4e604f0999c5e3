"""Bad requests get a clear SearchQueryError or a bounded answer, never a crash."""

import pytest

from search.services import SearchQueryError, index_rebuild, tool_search

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def visible(small_catalog, reindex):
    reindex(index_rebuild)
    return {t.pk for t in small_catalog.values()}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("", "empty"),
        ("   \n\t ", "empty"),
        ("x" * 100_000, "limit is"),
        ("?!?! ... ---", "no words"),
        ("\x00\x01\x02\x1b", "empty"),
        (None, "string"),
        (b"bytes", "string"),
    ],
)
def test_unusable_query_is_a_clear_error(visible, query, message):
    with pytest.raises(SearchQueryError, match=message):
        tool_search(query=query, visible=visible)


@pytest.mark.parametrize(("top_k", "most"), [(0, 1), (-5, 1), (1, 1), (21, 20), (10**9, 20)])
def test_top_k_is_clamped(visible, top_k, most):
    result = tool_search(query="file", visible=visible, top_k=top_k)
    assert 1 <= len(result.matches) <= most


@pytest.mark.parametrize("top_k", ["5", 2.5, True, None])
def test_non_integer_top_k_is_an_error(visible, top_k):
    with pytest.raises(SearchQueryError, match="top_k"):
        tool_search(query="file", visible=visible, top_k=top_k)


def test_control_characters_are_stripped_not_fatal(visible):
    result = tool_search(query="send\x00 an\x1b email\x7f", visible=visible)
    assert result.matches[0].tool_id == "mail::send_email"


def test_missing_visible_set_and_bad_fusion_are_errors(visible):
    with pytest.raises(SearchQueryError, match="visible"):
        tool_search(query="file", visible=None)
    with pytest.raises(SearchQueryError, match="fusion"):
        tool_search(query="file", visible=visible, fusion="magic")


def test_unicode_and_long_words_are_bounded(visible):
    assert tool_search(query="天気予報 東京", visible=visible).index_ready
    assert len(tool_search(query="a" * 4000, visible=visible, top_k=20).matches) <= 20
