"""A mistyped tool_id is answered with the caller's own visible tool it most likely meant, over HTTP.

Models misremember ids the same few ways: "_" for "-", a direct listing's "server__tool", the tool's name without
its server, a dropped letter. "Unknown tool" alone sends them back to tool_search for a turn (or into retrying the
same id); naming the tool meant lets the next call succeed. Only tools the caller may use are compared, so a hidden
tool is never named and never changes the answer (SECURITY-TESTS Z2, Z4).
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from mcpgateway.constants import UNKNOWN_TOOL_MESSAGE, UNKNOWN_TOOL_NAME_MESSAGE

from .conftest import (
    PROTOCOL_MODES,
    gateway_db,
    mcp_client,
    modern_request,
    raw_post,
    rpc_result,
    run,
)

pytestmark = [gateway_db, pytest.mark.slow]
HIDDEN = "calc::rotate_payroll_encryption_keys"


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


MISTYPED = [
    ("time::get_curent_time", "time::get_current_time"),  # a dropped letter
    ("get_current_time", "time::get_current_time"),  # the name without its server
    ("time__get_current_time", "time::get_current_time"),  # a direct listing's name
    ("Time::Get-Current-Time", "time::get_current_time"),  # case and separators
    ("calc::ad", "calc::add"),
]


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_execute_names_the_tool_a_mistyped_id_meant_and_the_named_one_runs(gateway, people, mode):
    async def main():
        async with mcp_client(gateway, people["member"], mode=mode) as client:
            answers = [
                await client.call_tool("execute_tool", {"tool_id": typed, "arguments": {"timezone": "UTC"}})
                for typed, _ in MISTYPED
            ]
            meant = answers[0].structured_content["did_you_mean"][0]
            ran = await client.call_tool("execute_tool", {"tool_id": meant, "arguments": {"timezone": "UTC"}})
            return answers, ran

    answers, ran = run(main)
    for (typed, meant), answer in zip(MISTYPED, answers, strict=True):
        assert answer.is_error, typed
        assert answer.structured_content == {"unknown_tool": True, "did_you_mean": [meant]}, typed
        assert f"Did you mean {meant}? If so, call again with that tool_id" in _text(answer), typed
    assert not ran.is_error and '"timezone": "UTC"' in _text(ran)


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_inspect_names_per_mistyped_id_the_tool_it_meant(gateway, people, mode):
    async def main():
        async with mcp_client(gateway, people["member"], mode=mode) as client:
            one = await client.call_tool("tool_inspect", {"tool_ids": ["time::convert-time"]})
            several = await client.call_tool(
                "tool_inspect", {"tool_ids": ["calc::add", "time::convert-time", "calc::no_such_tool"]}
            )
            return one, several

    one, several = run(main)
    assert one.is_error and one.structured_content == {"unknown_tool": True, "did_you_mean": ["time::convert_time"]}
    assert [tool["tool_id"] for tool in several.structured_content["tools"]] == ["calc::add"]
    assert several.structured_content["did_you_mean"] == ["time::convert_time"]
    assert several.content[-1].text.startswith(
        'Unknown tool: tool_ids[1] "time::convert-time" (did you mean time::convert_time?); '
        'tool_ids[2] "calc::no_such_tool". '
    )


def _execute(gateway, token: str, tool_id: str) -> tuple[bytes, str]:
    """The raw answer to an execute_tool of ``tool_id`` (bytes) and its text."""
    body = modern_request("tools/call", {"name": "execute_tool", "arguments": {"tool_id": tool_id, "arguments": {}}})
    response = raw_post(gateway, body, token=token)
    assert response.status_code == 200
    return response.content, "".join(block["text"] for block in rpc_result(response)["result"]["content"])


def test_a_hidden_tool_is_never_named_and_never_changes_the_answer(gateway, people):
    from catalog.models import Tool

    typo_of_hidden = HIDDEN[:-1]  # one letter short of the hidden tool's id, far from every visible one
    shown_to_member, text = _execute(gateway, people["member"], typo_of_hidden)
    assert text == UNKNOWN_TOOL_MESSAGE and b"rotate" not in shown_to_member  # the member may use no such tool
    # Someone who may use the tool is told it: the suggestion comes from the caller's own visible tools.
    assert f"Did you mean {HIDDEN}?" in _execute(gateway, people["approver"], typo_of_hidden)[1]
    # Now the hidden tool does not exist at all: the member's answer is the same, byte for byte.
    Tool.objects.filter(tool_id=HIDDEN).delete()
    assert _execute(gateway, people["member"], typo_of_hidden)[0] == shown_to_member


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_a_tool_called_by_name_is_told_to_run_through_execute_tool(gateway, people, mode):
    """The commonest slip after a search: calling the found tool_id (or its bare name) as a tool of its own."""

    async def main():
        errors = []
        async with mcp_client(gateway, people["member"], mode=mode) as client:
            for name in ("time::get_current_time", "get_current_time", "tool_serch", "weather__forecast", HIDDEN):
                with pytest.raises(MCPError) as caught:
                    await client.call_tool(name, {"timezone": "UTC"})
                errors.append(caught.value)
        return errors

    by_id, by_name, meta, unknown, hidden = run(main)
    for error in (by_id, by_name):
        assert error.code == -32602
        assert error.message == (
            "Unknown tool name. Did you mean the tool_id time::get_current_time? Run it with execute_tool: tool_id "
            '"time::get_current_time", and its own arguments inside "arguments".'
        )
    assert meta.message == "Unknown tool name. Did you mean tool_search?"
    for error in (unknown, hidden):  # nothing close that the member may use: the plain error, the same for both
        assert (error.code, error.message, error.data) == (-32602, UNKNOWN_TOOL_NAME_MESSAGE, None)
