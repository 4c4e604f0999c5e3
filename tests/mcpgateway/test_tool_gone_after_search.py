"""A tool that tool_search returned and that is gone by the time the agent calls it, over HTTP.

Between a search and the call a curator may disable the tool, a sync may hold it for review, or its grant may be
revoked. The agent then sends an id it copied exactly, and is answered as for any unknown id (the same bytes:
a caller never learns that a tool exists, Z4). Told only "use a tool_id exactly as tool_search returned it", a model
that had done just that retried the id or gave up; the answer now also says to search again, and the search then
offers what the caller may still use.
"""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcpgateway.constants import UNKNOWN_TOOL_MESSAGE

from .conftest import PROTOCOL_MODES, gateway_db, grant, mcp_client, run

pytestmark = [gateway_db, pytest.mark.slow]
CALL = {"tool_id": "time::get_current_time", "arguments": {"timezone": "UTC"}}


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _disable() -> None:
    from catalog.models import Tool

    tool = Tool.objects.get(tool_id=CALL["tool_id"])
    tool.enabled = False
    tool.save()


def _revoke(admin_user: Any, time_server: Any, member: Any) -> None:
    from catalog.models import Tool
    from governance.services.permissions import permission_revoke

    # The grant is on the server: revoke it, and keep the other time tool, so that something is left to find.
    permission_revoke(actor=admin_user, target=time_server, action="execute", holder=member)
    permission_revoke(actor=admin_user, target=time_server, action="discover", holder=member)
    grant(admin_user, Tool.objects.get(tool_id="time::convert_time"), member, "discover", "execute")


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
@pytest.mark.parametrize("gone", ["disabled", "access revoked"])
def test_a_tool_gone_between_search_and_call_is_answered_as_unknown_saying_to_search_again(
    gateway, people, admin_user, time_server, mode, gone
):
    from django.contrib.auth import get_user_model

    token = people["member"]  # may use the time server (the real mcp-server-time over stdio)
    member = get_user_model().objects.get(username="gw_member")
    args = () if gone == "disabled" else (admin_user, time_server, member)

    async def search_then_call() -> tuple[Any, Any, Any, Any]:
        async with mcp_client(gateway, token, mode=mode) as client:
            found = await client.call_tool("tool_search", {"query": "what time is it now in UTC"})
            await sync_to_async(_disable if gone == "disabled" else _revoke)(*args)
            called = await client.call_tool("execute_tool", CALL)
            never_was = await client.call_tool("execute_tool", {**CALL, "tool_id": "time::no_such_tool_at_all"})
            again = await client.call_tool("tool_search", {"query": "what time is it now in UTC"})
            return found, called, never_was, again

    found, called, never_was, again = run(search_then_call)
    assert found.structured_content["matches"][0]["tool_id"] == CALL["tool_id"]
    assert called.is_error and called.structured_content == {"unknown_tool": True}
    assert _text(called) == UNKNOWN_TOOL_MESSAGE == _text(never_was)  # gone reads exactly as never there (Z4)
    assert "search again" in _text(called)
    # The search it is sent back to no longer offers the gone tool.
    assert CALL["tool_id"] not in [match["tool_id"] for match in again.structured_content["matches"]]
