"""How an answer is served: a weak but real match is a ``low`` ranking, nothing related is withheld, and a
hidden tool moves neither (the rule lives in search.engine.ranking.answer_confidence)."""

import pytest

from governance.principals import principal_for_user
from search.engine.ranking import Confidence
from search.services import SearchQueryError, index_rebuild, search_for_principal, tool_search

from .factories import ToolFactory, add_examples

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

WEAK = "mark the ticket as done"  # tracker::close_issue does it, in other words
UNRELATED = ["play some jazz music", "tell me the stock price of Apple", "bake a sourdough bread with rye flour"]


@pytest.fixture
def indexed(small_catalog, reindex, encoder):
    reindex(index_rebuild)
    return small_catalog


def everyone(tools) -> set[int]:
    return {t.pk for t in tools.values()}


def served(result) -> tuple:
    return (result.confidence, [(m.tool_id, m.score, m.fused_rank) for m in result.matches])


def test_a_weak_but_real_match_is_served_with_low_confidence(indexed):
    result = tool_search(query=WEAK, visible=everyone(indexed))
    assert result.confidence is Confidence.LOW and not result.abstained
    assert result.matches and result.matches[0].tool_id == "tracker::close_issue"


def test_a_clear_match_is_served_with_high_confidence(indexed):
    result = tool_search(query="weather forecast for tomorrow", visible=everyone(indexed))
    assert result.confidence is Confidence.HIGH and result.matches[0].tool_id == "weather::get_forecast"


@pytest.mark.parametrize("query", UNRELATED)
def test_a_request_with_nothing_related_is_withheld(indexed, query):
    result = tool_search(query=query, visible=everyone(indexed))
    assert result.confidence is Confidence.NONE and result.abstained and result.matches == []


def test_a_hidden_best_match_moves_neither_confidence_nor_scores(indexed, reindex):
    visible = everyone(indexed)
    before = tool_search(query=WEAK, visible=visible)
    # A tool built to be the clear best match, on an existing server: visible, it turns the answer high.
    hidden = ToolFactory(
        server=indexed["close_issue"].server,
        name="mark_ticket_done",
        description="Mark a ticket as done.",
    )
    add_examples(hidden, WEAK)
    reindex(index_rebuild)
    shown = tool_search(query=WEAK, visible=visible | {hidden.pk})
    assert shown.matches[0].tool_id == hidden.tool_id and shown.confidence is Confidence.HIGH
    after = tool_search(query=WEAK, visible=visible)
    assert served(after) == served(before)  # still low, same tools, same scores
    for query in UNRELATED:  # and a withheld answer stays withheld
        assert tool_search(query=query, visible=visible).confidence is Confidence.NONE


def test_a_request_the_model_cannot_read_is_served_low_not_withheld(indexed):
    # "What is the weather forecast for Beijing tomorrow": no word the English-only model or BM25 can read.
    result = tool_search(query="查一下明天北京的天气预报", visible=everyone(indexed))
    assert result.confidence is Confidence.LOW and not result.abstained
    assert result.matches[0].tool_id == "weather::get_forecast"


def test_the_preview_mode_keeps_the_ranking_but_reports_the_same_confidence(indexed):
    query = UNRELATED[0]
    kept = tool_search(query=query, visible=everyone(indexed), enforce_abstention=False)
    assert kept.confidence is Confidence.NONE and kept.matches  # the curator still sees the ranking


# -- search_for_principal: the one entry point ----------------------------------------------------------


@pytest.fixture
def member(small_catalog, django_user_model):
    """A user who may discover the mail and files servers only."""
    from governance.services.permissions import permission_grant

    root = django_user_model.objects.create_superuser("root", "root@example.org", "pw")
    user = django_user_model.objects.create_user("member", "member@example.org", "pw")
    for tool_name in ("send_email", "read_file"):
        server = small_catalog[tool_name].server
        permission_grant(actor=root, target=server, action="discover", holder=user)
    return principal_for_user(user)


def test_search_for_principal_validates_limits_and_filters(indexed, member):
    for bad in ({"query": "   "}, {"query": "x" * 100_000}, {"query": "file", "top_k": "5"}):
        with pytest.raises(SearchQueryError):
            search_for_principal(principal=member, **bad)
    for bad in ({"operation_class": "destroy"}, {"scope": "everything"}, {"environment": "x" * 51}):
        with pytest.raises(SearchQueryError):
            search_for_principal(principal=member, query="read a file", **bad)
    assert len(search_for_principal(principal=member, query="file", top_k=10**9).matches) <= 20


def test_search_for_principal_ranks_only_what_the_principal_may_see(indexed, member):
    result = search_for_principal(principal=member, query="weather forecast for tomorrow", top_k=20)
    assert {m.server for m in result.matches} <= {"mail", "files"}
    assert result.confidence is not Confidence.HIGH  # the forecast tool exists, but not for this caller


def test_search_for_principal_lists_shared_words_without_an_index(small_catalog, member):
    # No index generation at all: the visible tools sharing words with the request, degraded and low.
    result = search_for_principal(principal=member, query="read the file contents", top_k=20)
    assert not result.index_ready and result.degraded and result.confidence is Confidence.LOW
    assert result.matches[0].tool_id == "files::read_file"
    assert "read" in result.matches[0].why_matched["shared_words"]
    assert {m.server for m in result.matches} <= {"mail", "files"}
    assert search_for_principal(principal=member, query="weather alerts").confidence is Confidence.NONE
