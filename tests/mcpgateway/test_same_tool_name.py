"""C1-21: a second server registering a tool name another server already has. Both are real stdio servers
(mcp-server-time and a "clock" whose one tool is also ``get_current_time``), reached over HTTP through the gateway.
Each tool keeps its own id (``server::tool``) and client name (``server__tool``); the first server's tool, its
definition, its grants and its calls, is unaffected by the second's arrival and syncs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from .conftest import (
    LEGACY,
    MODERN,
    build_index,
    drop_index,
    gateway_db,
    grant,
    make_token,
    make_user,
    mcp_client,
    run,
    sync_server,
)

pytestmark = [gateway_db, pytest.mark.slow]
CLOCK_SERVER = Path(__file__).parent / "servers" / "clock_server.py"
FIRST, SECOND = "time::get_current_time", "clock::get_current_time"
CLOCK_SAYS = "clock server: it is always noon"


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _definition(tool_id: str) -> dict[str, Any]:
    from catalog.models import Tool

    tool = Tool.objects.select_related("server").get(tool_id=tool_id)
    fields = ("pk", "name", "description", "input_schema", "definition_hash", "removed_at", "enabled")
    return {"server": tool.server.slug, **{field: getattr(tool, field) for field in fields}}


@pytest.fixture
def two_servers(member_on, admin_user, time_server) -> dict[str, str]:
    """mcp-server-time synced first, its tool granted to a member; then the clock registered and synced. The member
    may use the time server only, the approver both."""
    member = member_on(time_server)
    approver = make_user("gw_approver")
    first = _definition(FIRST)
    clock = sync_server(slug="clock", transport="stdio", command=sys.executable, args=[str(CLOCK_SERVER)])
    grant(admin_user, time_server, approver, "discover", "execute")
    grant(admin_user, clock, approver, "discover", "execute")
    return {"member": member.token, "approver": make_token(approver), "first": first}


def test_a_second_servers_tool_of_the_same_name_is_namespaced_and_the_first_unaffected(
    gateway, two_servers, time_server
):
    from catalog.models import Tool
    from catalog.services.sync import server_sync

    assert set(Tool.objects.filter(name="get_current_time").values_list("tool_id", flat=True)) == {FIRST, SECOND}
    assert _definition(FIRST) == two_servers["first"]  # the clock's arrival changed nothing of the first's
    drop_index()  # tools are listed directly, under their client names

    async def direct(token: str) -> tuple[set[str], Any, Any]:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            first = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
            try:
                second = await client.call_tool("clock__get_current_time", {"timezone": "UTC"})
            except MCPError as unknown:
                second = unknown
            return names, first, second

    names, first, second = run(lambda: direct(two_servers["member"]))
    assert "time__get_current_time" in names and "clock__get_current_time" not in names
    assert not first.is_error and '"timezone": "UTC"' in _text(first) and CLOCK_SAYS not in _text(first)
    # Not the member's: an unknown name (pointing at the member's own tool of that name), never the clock's answer.
    assert isinstance(second, MCPError) and "clock" not in second.message and FIRST in second.message

    names, first, second = run(lambda: direct(two_servers["approver"]))
    assert {"time__get_current_time", "clock__get_current_time"} <= names
    assert not first.is_error and '"timezone": "UTC"' in _text(first) and CLOCK_SAYS not in _text(first)
    assert not second.is_error and _text(second) == f"{CLOCK_SAYS} in UTC"

    # By tool id through the meta-tools, with the index built; the clock synced again meanwhile.
    assert server_sync(server_pk=Tool.objects.get(tool_id=SECOND).server_id, trigger="test").status == "success"
    assert server_sync(server_pk=time_server.pk, trigger="test").status == "success"
    assert _definition(FIRST) == two_servers["first"]
    build_index()

    async def by_id(token: str) -> tuple[list[str], Any, Any]:
        async with mcp_client(gateway, token, mode=LEGACY) as client:
            found = await client.call_tool("tool_search", {"query": "current time in a timezone"})
            first = await client.call_tool("execute_tool", {"tool_id": FIRST, "arguments": {"timezone": "UTC"}})
            second = await client.call_tool("execute_tool", {"tool_id": SECOND, "arguments": {"timezone": "UTC"}})
            return [match["tool_id"] for match in found.structured_content["matches"]], first, second

    found, first, second = run(lambda: by_id(two_servers["member"]))
    assert FIRST in found and SECOND not in found
    assert not first.is_error and '"timezone": "UTC"' in _text(first) and CLOCK_SAYS not in _text(first)
    assert second.is_error and CLOCK_SAYS not in _text(second)
    found, first, second = run(lambda: by_id(two_servers["approver"]))
    assert {FIRST, SECOND} <= set(found)
    assert not first.is_error and CLOCK_SAYS not in _text(first)
    assert CLOCK_SAYS in _text(second)
