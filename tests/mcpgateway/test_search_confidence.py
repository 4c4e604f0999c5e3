"""tool_search answers as served, over HTTP: a ``confidence`` field, a one-line hint when it is low, "no tool
fits" only when nothing visible is related, and a hidden tool that changes none of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpgateway.services.discovery import LOW_CONFIDENCE, NO_TOOL_FITS

from .conftest import PROTOCOL_MODES, build_index, gateway_db, mcp_client, run, sync_scripted_server

pytestmark = [gateway_db, pytest.mark.slow]
HIDDEN = "calc::rotate_payroll_encryption_keys"


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _answers(gateway, token: str, queries: list[str]) -> dict[str, Any]:
    async def main():
        async with mcp_client(gateway, token) as client:
            return {query: await client.call_tool("tool_search", {"query": query}) for query in queries}

    return run(main)


def test_confidence_and_the_low_confidence_line(gateway, people):
    answers = _answers(
        gateway,
        people["member"],
        ["convert 3pm Paris time to New York", "calculate the total of my invoices", "play some jazz music"],
    )
    clear, weak, unrelated = answers.values()
    assert clear.structured_content["confidence"] == "high" and LOW_CONFIDENCE not in text_of(clear)
    assert clear.structured_content["matches"][0]["tool_id"] == "time::convert_time"
    # A weak but real match: the ranking comes back, marked low, with one line telling the model what to do.
    assert weak.structured_content["confidence"] == "low" and not weak.structured_content["abstained"]
    assert weak.structured_content["matches"][0]["tool_id"] == "calc::add"
    assert LOW_CONFIDENCE in text_of(weak) and text_of(weak).count("Low confidence") == 1
    # Its first line does not call them matching, which the next line denies: they are the closest there are.
    count = len(weak.structured_content["matches"])
    assert text_of(weak).startswith(f"{count} closest tool{'' if count == 1 else 's'}, best first."), text_of(weak)
    assert text_of(clear).startswith(f"{len(clear.structured_content['matches'])} matching tool")
    # Nothing related: withheld.
    assert unrelated.structured_content == {"matches": [], "confidence": "none", "degraded": False, "abstained": True}
    assert text_of(unrelated) == NO_TOOL_FITS


def test_a_hidden_best_match_changes_nothing_the_member_gets(gateway, people):
    from catalog.models import Tool

    query = "rotate the payroll encryption keys"
    approver = _answers(gateway, people["approver"], [query])[query]
    assert approver.structured_content["matches"][0]["tool_id"] == HIDDEN
    assert approver.structured_content["confidence"] == "high"
    member = _answers(gateway, people["member"], [query])[query]
    # The same answer as in a catalog where the hidden tool does not exist at all.
    Tool.objects.filter(tool_id=HIDDEN).update(enabled=False)
    build_index()
    without = _answers(gateway, people["member"], [query])[query]
    assert member.structured_content == without.structured_content
    assert text_of(member) == text_of(without)
    assert HIDDEN not in text_of(member)


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_a_low_confidence_answer_gives_key_inputs_not_schemas(gateway, people, mode):
    """None of a low answer's tools clearly fits: it carries no inputSchema (five of them were most of its tokens,
    read for tools the model should mostly not call), only each tool's key inputs, and says to get the schema of
    the one that fits from tool_inspect, which gives it. A high answer still carries each schema, so that search
    -> execute takes two turns. Both answers satisfy tool_search's outputSchema (the SDK client checks)."""
    import jsonschema

    async def main():
        async with mcp_client(gateway, people["member"], mode=mode) as client:
            listing = {tool.name: tool for tool in (await client.list_tools()).tools}
            weak = await client.call_tool("tool_search", {"query": "calculate the total of my invoices"})
            clear = await client.call_tool("tool_search", {"query": "convert 3pm Paris time to New York"})
            inspected = await client.call_tool("tool_inspect", {"tool_ids": ["calc::add"]})
            return listing, weak, clear, inspected

    listing, weak, clear, inspected = run(main)
    assert weak.structured_content["confidence"] == "low"
    top = weak.structured_content["matches"][0]
    assert top["tool_id"] == "calc::add" and "inputSchema" not in top
    assert top["key_inputs"] == [
        {"name": "a", "type": "integer", "required": True},
        {"name": "b", "type": "integer", "required": True},
    ]
    assert all("inputSchema" not in match for match in weak.structured_content["matches"])
    assert "inputSchema:" not in text_of(weak) and "call tool_inspect with its tool_id" in text_of(weak)
    assert "1. calc::add - Add two integers and return the sum. [risk low, read]\n" in text_of(weak)
    assert "\n   inputs: a (integer, required), b (integer, required)" in text_of(weak)
    (add,) = inspected.structured_content["tools"]
    assert add["inputSchema"]["required"] == ["a", "b"]
    assert clear.structured_content["confidence"] == "high"
    # A high answer: its real candidates with their schemas (a match far below the first shows key inputs).
    with_schema = [match for match in clear.structured_content["matches"] if "inputSchema" in match]
    assert with_schema and with_schema[0] is clear.structured_content["matches"][0]
    assert text_of(clear).count("inputSchema: ") == len(with_schema)
    for answer in (weak, clear):
        jsonschema.validate(answer.structured_content, listing["tool_search"].output_schema)


@pytest.fixture
def demo_catalog(gateway, member_on, time_server, memory_server) -> str:
    """The demo's memory and time servers, with the demo's curation, discoverable by a member."""
    from mcpgateway.management.commands.demo import Command as Demo

    Demo()._curate()
    return member_on(time_server, memory_server, index=True).token


def test_a_match_on_the_catalog_peak_alone_is_low_not_high(gateway, demo_catalog):
    """No mail tool is visible: "send an email to my boss" finds a memory tool (the demo's curation speaks of a
    person at a company) by a modest cosine and no shared word. In a catalog this small the request's best
    cosine stands far above its 20th best (the peak), which lifted the calibrated score to high; the first
    tool's own evidence (cosine and coverage) is what high now also needs. A real match keeps high."""
    mail, remember = "send an email to my boss", "remember that Ann is my boss"
    answers = _answers(gateway, demo_catalog, [mail, remember])
    weak = answers[mail].structured_content
    assert weak["confidence"] == "low" and not weak["abstained"]  # served, to check, not withheld
    assert weak["matches"][0]["tool_id"].startswith("memory::")
    assert LOW_CONFIDENCE in text_of(answers[mail])
    clear = answers[remember].structured_content
    assert clear["confidence"] == "high" and clear["matches"][0]["tool_id"] == "memory::create_entities"


def test_a_near_tie_between_two_tools_is_low_not_high(gateway, member_on, tmp_path):
    """server-filesystem's listing (tests/mcpgateway/servers/filesystem_tools.json), served by a real scripted stdio
    upstream. "What is the size of the file ./e1.txt?" ranks list_directory_with_sizes and get_file_info (the tool
    that answers it) within .004 of each other: the ranking has not chosen between them, and the answer was served
    high, so an agent called the first. A near tie is the commonest wrong first tool served high on the public sets
    (``ranking.undecided``, bench/NOTES-agentux25.md): it is served low, both tools there to check. A first tool
    well ahead of the next keeps high."""
    listing = json.loads((Path(__file__).parent / "servers" / "filesystem_tools.json").read_text())
    token = member_on(sync_scripted_server(tmp_path, "filesystem", {"pages": [listing]}), index=True).token
    tied, clear = "What is the size of the file ./e1.txt?", "show me the files in /tmp and their sizes"
    answers = _answers(gateway, token, [tied, clear])
    weak = answers[tied].structured_content
    assert weak["confidence"] == "low" and not weak["abstained"]
    found = [match["tool_id"] for match in weak["matches"]]
    assert set(found[:2]) == {"filesystem::list_directory_with_sizes", "filesystem::get_file_info"}  # ranked as before
    assert LOW_CONFIDENCE in text_of(answers[tied])
    strong = answers[clear].structured_content
    assert strong["confidence"] == "high" and strong["matches"][0]["tool_id"] == "filesystem::list_directory_with_sizes"
