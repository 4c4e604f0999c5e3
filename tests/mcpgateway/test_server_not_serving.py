"""A tool the caller may use whose server is not serving, over HTTP with real upstream servers.

A failed sync (Degraded) or an operator (Archived) hides a server's tools from every client. An agent that had the
tool_id from a search, or from an earlier session, was answered "Unknown tool": it searched again for a tool it
already had, or told the user the tool does not exist. It is now told the server is not serving, why, and whether
to try again later. A tool of that server the caller may not see keeps the exact unknown answer (Z4).
"""

from __future__ import annotations

from typing import Any

import pytest

from mcpgateway.constants import UNKNOWN_TOOL_MESSAGE

from .conftest import free_port, gateway_db, make_token, make_user, mcp_client, run

pytestmark = [gateway_db, pytest.mark.slow]
ADD = "calc::add"
HIDDEN = "calc::rotate_payroll_encryption_keys"  # calc's tool the member was never granted
NEVER = "calc::no_such_tool_at_all"


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _stop_serving(calc_server: Any, how: str) -> str:
    from catalog.models import Server
    from catalog.services.servers import server_archive
    from catalog.services.sync import server_sync

    if how == "archived":
        server_archive(server=calc_server)
    else:  # its upstream moved away: the next sync fails, and a server that had synced turns Degraded
        Server.objects.filter(pk=calc_server.pk).update(url=f"http://127.0.0.1:{free_port()}/mcp")
        assert server_sync(server_pk=calc_server.pk, trigger="test").status == "failed"
    calc_server.refresh_from_db()
    return calc_server.status


@pytest.mark.parametrize("how", ["degraded", "archived"])
def test_a_tool_on_a_server_not_serving_says_so_and_a_hidden_one_stays_unknown(gateway, people, calc_server, how):
    outsider = make_token(make_user("gw_outsider"))  # may use nothing

    async def calls(token: str) -> dict[str, Any]:
        async with mcp_client(gateway, token) as client:
            return {
                "add": await client.call_tool("execute_tool", {"tool_id": ADD, "arguments": {"a": 1, "b": 2}}),
                "inspect_add": await client.call_tool("tool_inspect", {"tool_ids": [ADD]}),
                "hidden": await client.call_tool("execute_tool", {"tool_id": HIDDEN, "arguments": {}}),
                "inspect_hidden": await client.call_tool("tool_inspect", {"tool_ids": [HIDDEN]}),
                "never": await client.call_tool("execute_tool", {"tool_id": NEVER, "arguments": {}}),
                "several": await client.call_tool(
                    "tool_inspect", {"tool_ids": ["time::get_current_time", ADD, HIDDEN]}
                ),
            }

    before = run(lambda: calls(people["member"]))
    assert not before["add"].is_error  # the member's calc::add works while calc serves
    assert _stop_serving(calc_server, how) == how

    member = run(lambda: calls(people["member"]))
    for answer in (member["add"], member["inspect_add"]):
        assert answer.is_error
        comes_back = how == "degraded"
        assert answer.structured_content == {"server_unavailable": ["calc"], "retry_later": comes_back}
        text = _text(answer)
        assert text.startswith(f"This tool is unavailable for now: its server calc is not serving ({how}: ")
        assert ("try again in a few minutes" in text) is comes_back
        assert ("do not retry" in text) is not comes_back
    # The tool the member may not see reads exactly as one that never existed, on that same server.
    for answer in (member["hidden"], member["inspect_hidden"], member["never"]):
        assert answer.is_error and _text(answer) == UNKNOWN_TOOL_MESSAGE
        assert answer.structured_content == {"unknown_tool": True}
    # Several ids: the servable one's definition, the hidden one named as unknown, calc::add as unavailable.
    several = member["several"]
    assert [tool["tool_id"] for tool in several.structured_content["tools"]] == ["time::get_current_time"]
    assert several.structured_content["unknown_tool"] is True
    assert several.structured_content["server_unavailable"] == ["calc"]
    text = _text(several)
    assert f'tool_ids[2] "{HIDDEN}". ' in text and f'{HIDDEN}": its server' not in text
    assert f'tool_ids[1] "{ADD}": its server calc is not serving ({how}: ' in text

    # Someone who may use nothing learns nothing: calc::add is unknown to them, as any other id.
    stranger = run(lambda: calls(outsider))
    for key in ("add", "inspect_add", "hidden", "never"):
        assert _text(stranger[key]) == UNKNOWN_TOOL_MESSAGE, key
        assert stranger[key].structured_content == {"unknown_tool": True}, key


def test_a_tool_called_by_its_listed_name_on_a_server_not_serving_says_so(gateway, people, calc_server):
    """agentux19: a tool called by its directly listed name (``calc__add``: listed while there is no index, or
    pinned) whose server stopped serving answered the protocol error "Unknown tool name", where execute_tool says
    the server is not serving and whether to retry: the model that had the name from tools/list looked for another
    tool or told the user it does not exist. The hidden tool's name keeps the unknown name's exact error (Z4)."""
    from mcp.shared.exceptions import MCPError

    from mcpgateway.constants import UNKNOWN_TOOL_NAME_MESSAGE

    assert _stop_serving(calc_server, "degraded") == "degraded"

    async def main() -> tuple[Any, MCPError, MCPError]:
        async with mcp_client(gateway, people["member"]) as client:
            added = await client.call_tool("calc__add", {"a": 1, "b": 2})
            with pytest.raises(MCPError) as hidden:
                await client.call_tool("calc__rotate_payroll_encryption_keys", {"environment": "prod"})
            with pytest.raises(MCPError) as never:
                await client.call_tool("calc__no_such_tool_at_all", {})
            return added, hidden.value, never.value

    added, hidden, never = run(main)
    assert added.is_error, _text(added)
    assert added.structured_content == {"server_unavailable": ["calc"], "retry_later": True}
    assert _text(added).startswith("This tool is unavailable for now: its server calc is not serving (degraded: ")
    assert (hidden.code, hidden.message, hidden.data) == (never.code, never.message, never.data)
    assert hidden.message == UNKNOWN_TOOL_NAME_MESSAGE


def test_a_search_that_finds_no_clear_fit_names_the_callers_servers_not_serving(
    gateway, people, calc_server, time_server, admin_user
):
    """agentux19: with calc degraded, "add two integers" answered time's tools at low confidence (or, to a token
    whose only tools are calc's, "nothing is granted to it yet: ask an operator for access"): nothing said the tool
    for the step exists and is only down. The answer now names the caller's servers not serving, why, and whether
    they come back; a caller with no tool there reads no such note."""
    from catalog.models import Tool

    from .conftest import grant

    calc_only, time_only = make_user("gw_calc_only"), make_user("gw_time_only")
    grant(admin_user, Tool.objects.get(tool_id=ADD), calc_only, "discover", "execute")
    grant(admin_user, time_server, time_only, "discover", "execute")
    tokens = {"member": people["member"], "calc_only": make_token(calc_only), "time_only": make_token(time_only)}
    assert _stop_serving(calc_server, "degraded") == "degraded"

    async def searches() -> dict[str, Any]:
        found = {}
        for who, token in tokens.items():
            async with mcp_client(gateway, token) as client:
                found[who] = await client.call_tool("tool_search", {"query": "add two integers"})
        return found

    found = run(searches)
    note = (
        "Not searched: your tools on servers not serving now: calc (degraded: its last sync failed; back once it "
        "syncs: try again in a few minutes)."
    )
    for who in ("member", "calc_only"):
        assert found[who].structured_content["confidence"] != "high", who
        assert found[who].structured_content["notes"] == [note], who
        assert note in _text(found[who]) and "nothing is granted" not in _text(found[who]), who
    assert "notes" not in found["time_only"].structured_content
    assert "calc" not in _text(found["time_only"])
