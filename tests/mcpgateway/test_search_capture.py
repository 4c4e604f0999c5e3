"""Search capture over HTTP against a real stdio upstream (T6/T8): tools whose text is built to be returned for
every search (keyword lists, a repeated phrase, many languages, keyword-stuffed parameters) are held at their
first sync with the reason a curator reads, so no search serves them; the server's honest tool is unaffected."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import build_index, gateway_db, mcp_client, run, sync_script_server

pytestmark = [gateway_db, pytest.mark.slow]
STUFFED = {
    "stuffing::universal_tool": "word-list",
    "stuffing::do_anything": "repeated-phrase",
    "stuffing::omni": "many-scripts",
    "stuffing::helper": "word-list",
}
HONEST = "stuffing::send_email"
# Requests the stuffed texts are built to catch; the last is the honest tool's.
REQUESTS = ["search the web for news", "create a calendar event", "convert a pdf file", "send an email message"]


@pytest.fixture
def world(gateway, member_on, admin_user, tmp_path, monkeypatch) -> dict[str, Any]:
    monkeypatch.setenv("STUFFING_CALL_LOG", str(tmp_path / "calls.log"))
    server = sync_script_server("stuffing", "stuffing_server.py", "STUFFING_CALL_LOG")
    return {"token": member_on(server, index=True).token, "admin": admin_user}


def _search(gateway, token: str, requests: list[str] = REQUESTS) -> dict[str, list[str]]:
    async def main():
        async with mcp_client(gateway, token) as client:
            found = {}
            for request in requests:
                result = await client.call_tool("tool_search", {"query": request, "top_k": 10})
                found[request] = [match["tool_id"] for match in result.structured_content["matches"]]
            return found

    return run(main)


def test_stuffed_tools_are_held_with_their_reason_and_never_served(gateway, world):
    from catalog.models import Tool
    from governance.models import ToolReview

    for tool_id, marker in STUFFED.items():
        policy = Tool.objects.get(tool_id=tool_id).policy
        assert policy.held and marker in policy.markers, (tool_id, policy.markers)
        assert marker in policy.hold_reason  # what the curator reads on the tool and its review
        assert marker in ToolReview.objects.get(tool__tool_id=tool_id, status="pending").markers
    assert not Tool.objects.get(tool_id=HONEST).policy.held

    found = _search(gateway, world["token"])
    for request, ids in found.items():
        assert not set(ids) & STUFFED.keys(), (request, ids)
    assert HONEST in found["send an email message"]  # the honest neighbour is served as before


def test_accepting_a_stuffed_tool_is_what_lets_it_be_served(gateway, world):
    """Positive control: released by a curator, the keyword list is found again by the requests it stuffs."""
    from governance.models import ToolReview
    from governance.services.review import tool_review_accept

    review = ToolReview.objects.get(tool__tool_id="stuffing::universal_tool", status="pending")
    tool_review_accept(review=review, actor=world["admin"], reason="read and accepted")
    build_index()
    found = _search(gateway, world["token"])
    assert any("stuffing::universal_tool" in ids for ids in found.values()), found


SPREAD = "stuffing::assistant"
# Requests the assistant's lines are written for (its web, weather and GitHub lines).
SPREAD_REQUESTS = ["search the web for news", "weather forecast for tomorrow", "list pull requests of a repository"]


def test_lines_on_many_topics_are_held_when_indexed_and_not_served(gateway, world):
    """The stuffing screen passes the assistant's sentences; the index's vectors find them far from its summary
    and hold it with ``topic-spread``, so no search serves it; its honest neighbours are not held."""
    from catalog.models import Tool
    from governance.models import ToolReview

    policy = Tool.objects.get(tool_id=SPREAD).policy
    assert policy.held and policy.markers == ["topic-spread"], policy.markers
    assert "topic-spread" in policy.hold_reason
    assert ToolReview.objects.get(tool__tool_id=SPREAD, status="pending").markers == ["topic-spread"]
    assert not Tool.objects.get(tool_id=HONEST).policy.held
    found = _search(gateway, world["token"], SPREAD_REQUESTS)
    assert not any(SPREAD in ids for ids in found.values()), found


def test_an_accepted_spread_stays_accepted_and_is_served(gateway, world):
    """Positive control and the curator's decision: accepted, the tool is served for its topics, and a rebuild
    that encodes it again (new vectors) does not hold it again."""
    from catalog.models import Tool
    from governance.models import ToolReview
    from governance.services.review import tool_review_accept
    from search.models import ToolEmbedding

    review = ToolReview.objects.get(tool__tool_id=SPREAD, status="pending")
    tool_review_accept(review=review, actor=world["admin"], reason="an assistant, read and accepted")
    ToolEmbedding.objects.filter(tool__tool_id=SPREAD).delete()
    build_index()
    assert not Tool.objects.get(tool_id=SPREAD).policy.held
    found = _search(gateway, world["token"], SPREAD_REQUESTS)
    assert any(SPREAD in ids for ids in found.values()), found
