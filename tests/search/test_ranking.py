"""Ranking on a small self-made catalog, through the public service."""

import pytest
from django.test import override_settings

from search.services import index_update, tool_search

from .factories import ToolFactory, add_examples, add_negatives

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def ids(result) -> list[str]:
    return [m.tool_id for m in result.matches]


def everyone(tools) -> set[int]:
    return {t.pk for t in tools.values()}


def test_exact_name_ranks_first(indexed):
    result = tool_search(query="list_directory", visible=everyone(indexed))
    assert result.index_ready and not result.degraded
    assert ids(result)[0] == "files::list_directory"
    top = result.matches[0]
    assert "list_directory" in top.why_matched["terms"]
    assert top.bm25_rank == 1 and top.fused_rank == 1


def test_paraphrase_is_found(indexed):
    # No word in common with the tool's text. MiniLM puts such paraphrases near the default abstention
    # threshold (fitted so infeasible requests abstain), so the ranking is checked with abstention off.
    with override_settings(SCOUT_SEARCH_WITHHOLD_THRESHOLD=0.0, SCOUT_SEARCH_CONFIDENCE_THRESHOLD=0.0):
        result = tool_search(query="what will the temperature be tomorrow in Paris", visible=everyone(indexed))
    assert ids(result)[0] == "weather::get_forecast"
    assert result.matches[0].dense_rank == 1 and result.matches[0].bm25_rank is None


def test_example_request_lifts_its_tool(indexed, reindex):
    query = "any word from my landlord lately"
    before = tool_search(query=query, visible=everyone(indexed), top_k=10)
    assert ids(before)[:1] != ["mail::list_inbox"]
    add_examples(indexed["list_inbox"], "did I get anything from my landlord lately")
    reindex(index_update, tool_pks=[indexed["list_inbox"].pk])
    after = tool_search(query=query, visible=everyone(indexed), top_k=10)
    assert ids(after)[0] == "mail::list_inbox"
    assert after.matches[0].why_matched["closest"] == "example"
    assert after.matches[0].why_matched["example_request"] == "did I get anything from my landlord lately"
    assert not after.abstained


def test_negative_example_pushes_its_tool_down(indexed, reindex):
    query = "delete an email message from the archive"
    before = ids(tool_search(query=query, visible=everyone(indexed), top_k=10))
    assert before[0] == "mail::delete_email"
    add_negatives(indexed["delete_email"], "delete email messages from the archive")
    reindex(index_update, tool_pks=[indexed["delete_email"].pk])
    after = tool_search(query=query, visible=everyone(indexed), top_k=10)
    # An answer (not an empty one, which would pass any "not first" check) led by another tool.
    assert after.matches and ids(after)[0] != "mail::delete_email"
    demoted = [m for m in after.matches if m.tool_id == "mail::delete_email"]
    assert not demoted or demoted[0].why_matched.get("demoted")  # if still shown (not cut off), it says why
    # An unrelated request is not affected by the negative example.
    assert ids(tool_search(query="delete_email", visible=everyone(indexed)))[0] == "mail::delete_email"


def test_nonsense_abstains(indexed):
    result = tool_search(query="zxqv blorft wumpus glarb", visible=everyone(indexed))
    assert result.abstained and result.matches == []


def test_off_topic_request_abstains(indexed):
    result = tool_search(query="bake a sourdough bread with rye flour", visible=everyone(indexed))
    assert result.abstained


def test_only_visible_tools_are_returned(indexed):
    visible = {indexed["read_file"].pk, indexed["get_forecast"].pk}
    result = tool_search(query="list the files in my directory", visible=visible, top_k=20)
    assert set(ids(result)) <= {"files::read_file", "weather::get_forecast"}
    assert tool_search(query="list_directory", visible=set(), top_k=5).matches == []


def test_top_k_and_dynamic_cut_bound_the_answer(indexed):
    result = tool_search(query="file", visible=everyone(indexed), top_k=2)
    assert 1 <= len(result.matches) <= 2
    wide = tool_search(query="send an email to bob", visible=everyone(indexed), top_k=20)
    assert wide.matches[0].tool_id == "mail::send_email"
    assert len(wide.matches) < 12  # scores fall off long before the whole catalog


def test_rrf_fusion_is_selectable(indexed):
    result = tool_search(query="send an email to bob", visible=everyone(indexed), fusion="rrf")
    assert result.matches[0].tool_id == "mail::send_email"


def test_disabled_tool_leaves_the_index(indexed, reindex):
    tool = indexed["send_email"]
    tool.enabled = False
    tool.save()
    reindex(index_update, tool_pks=[tool.pk])
    assert "mail::send_email" not in ids(tool_search(query="send_email", visible=everyone(indexed), top_k=20))


def test_new_tool_becomes_searchable(indexed, reindex):
    tool = ToolFactory(server=indexed["send_email"].server, name="schedule_meeting", description="Book a meeting.")
    reindex(index_update, tool_pks=[tool.pk])
    result = tool_search(query="schedule_meeting", visible=everyone(indexed) | {tool.pk})
    assert ids(result)[0] == "mail::schedule_meeting"


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
def test_rank_score_is_explained_by_its_parts_and_follows_the_rank(indexed, fusion):
    # A multi-step request: some tools get their score from one step of it, which the explanation names.
    query = "list the files in the reports directory and then send an email with them to the team"
    result = tool_search(query=query, visible=everyone(indexed), top_k=10, fusion=fusion, enforce_abstention=False)
    scores = [m.why_matched["score"] for m in result.matches]
    assert len(scores) >= 5 and all(s["fusion"] == fusion for s in scores)
    for score in scores:
        parts = score["bm25"] + score["dense"] + score["intent"] + score["server"] + score["name"] + score["cluster"]
        assert score["rank_score"] == pytest.approx(parts, abs=3e-4)
    ranked = [s["rank_score"] for s in scores if not s["demoted"]]
    assert ranked == sorted(ranked, reverse=True)  # the score column follows the rank
    if fusion == "convex":  # (RRF: a step's discounted reciprocal ranks rarely beat the whole request's)
        assert any(s["step"] > 0 for s in scores)  # a step scored on its own gave some tool its score
    assert any(s["bm25"] > 0 for s in scores) and all(s["dense"] > 0 for s in scores[:3])


def test_intent_and_negative_queries_show_in_the_explanation(indexed, reindex):
    add_negatives(indexed["delete_email"], "delete an email message from the archive")
    reindex(index_update, tool_pks=[indexed["delete_email"].pk])
    result = tool_search(
        query="delete an email message from the archive", visible=everyone(indexed), top_k=12, enforce_abstention=False
    )
    by_id = {m.tool_id: m.why_matched["score"] for m in result.matches}
    assert by_id["mail::delete_email"]["demoted"] is True
    assert [m.tool_id for m in result.matches][-1] == "mail::delete_email"  # below every tool not demoted
    assert any(score["intent"] != 0 for score in by_id.values())  # "delete": delete tools up, others down
