"""What an MCP agent receives from the gateway, through the SDK client over HTTP: the meta-tools' definitions
(titles, annotations, input schemas), the hints on the tools it finds, and the errors it reads and corrects."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import MODERN, PROTOCOL_MODES, build_index, gateway_db, grant, make_token, make_user, mcp_client, run

pytestmark = [gateway_db, pytest.mark.slow]


@pytest.fixture
def token(gateway, admin_user, calc_server, faulty_server) -> str:
    member = make_user("gw_member")
    for server in (calc_server, faulty_server):
        grant(admin_user, server, member, "discover", "execute")
    build_index()
    return make_token(member)


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def listed(gateway, token: str, mode: str = MODERN) -> dict[str, Any]:
    async def main():
        async with mcp_client(gateway, token, mode=mode) as client:
            return (await client.list_tools()).tools

    return {tool.name: tool for tool in run(main)}


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_meta_tools_have_titles_and_annotations(gateway, token, mode):
    """Searching and inspecting only read Scout's catalog; execute_tool may run anything the caller may."""
    tools = listed(gateway, token, mode)
    titles = {name: tool.title for name, tool in tools.items()}
    assert titles == {"tool_search": "Search tools", "tool_inspect": "Inspect tools", "execute_tool": "Execute a tool"}
    for name in ("tool_search", "tool_inspect"):
        hints = tools[name].annotations
        assert hints.read_only_hint is True and hints.open_world_hint is False, name
    execute = tools["execute_tool"].annotations
    assert execute.read_only_hint is False and execute.destructive_hint is True
    assert execute.idempotent_hint is False and execute.open_world_hint is True
