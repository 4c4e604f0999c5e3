"""Conditional exposure (SCOUT 5.2): direct listing while there is no index, pinned tools beside the meta-tools."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from mcpgateway.constants import UNKNOWN_TOOL_NAME_MESSAGE
from mcpgateway.selectors import client_tool_name

from .conftest import (
    LEGACY,
    MODERN,
    PROTOCOL_MODES,
    build_index,
    drop_index,
    gateway_db,
    grant,
    mcp_client,
    run,
)

pytestmark = [gateway_db, pytest.mark.slow]
META = {"tool_search", "tool_inspect", "execute_tool"}


@pytest.fixture
def people(people) -> dict[str, Any]:
    """conftest's member and approver, with no search index: tools are listed directly."""
    drop_index()
    return people


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_without_an_index_the_callers_tools_are_listed_and_callable_directly(gateway, people, mode):
    async def main():
        async with mcp_client(gateway, people["member"], mode=mode) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            current = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
            added = await client.call_tool("calc__add", {"a": 20, "b": 22})
            with pytest.raises(MCPError) as hidden:
                await client.call_tool("calc__rotate_payroll_encryption_keys", {"environment": "prod"})
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("calc__no_such_tool", {"environment": "prod"})
            found = await client.call_tool("tool_search", {"query": "current time"})
            return names, current, added, hidden.value, unknown.value, found

    names, current, added, hidden, unknown, found = run(main)
    assert names == {"time__get_current_time", "time__convert_time", "calc__add"}
    assert not current.is_error and '"timezone": "UTC"' in _text(current)
    assert added.structured_content == {"result": 42}
    assert (hidden.code, hidden.message) == (unknown.code, unknown.message) == (-32602, UNKNOWN_TOOL_NAME_MESSAGE)
    # tool_search still answers, from a permission-filtered list, flagged degraded.
    assert found.structured_content["degraded"] is True
    assert found.structured_content["matches"][0]["tool_id"] == "time::get_current_time"


def test_direct_calls_take_the_governed_path(gateway, people, faulty_server, admin_user, faulty_call_log):
    from django.contrib.auth import get_user_model

    from governance.choices import ApprovalStatus
    from governance.models import ApprovalRequest

    member = get_user_model().objects.get(username="gw_member")
    grant(admin_user, faulty_server, member, "discover", "execute")

    async def main():
        async with mcp_client(gateway, people["member"], mode=MODERN) as client:
            invalid = await client.call_tool("time__get_current_time", {})
            mutating = await client.call_tool("faulty__record_note", {"note": "hello"})
            return invalid, mutating

    invalid, mutating = run(main)
    assert invalid.is_error and "missing required property timezone" in _text(invalid)
    # The approval's answer is in its text: record_note declares an outputSchema (MCPServer makes one from its return
    # type), so a listed tool's error goes without structured content (server._error_fit_for_listing, agentux19).
    assert mutating.is_error and "This call needs human approval (approval_id " in _text(mutating)
    assert mutating.structured_content is None
    assert ApprovalRequest.objects.filter(tool__tool_id="faulty::record_note", status=ApprovalStatus.PENDING).exists()
    assert not faulty_call_log.exists() or "record_note" not in faulty_call_log.read_text()


def test_with_an_index_meta_tools_and_only_visible_pins_are_listed(gateway, people):
    from catalog.models import Tool
    from mcpgateway.models import PinnedTool

    build_index()
    PinnedTool.objects.create(tool=Tool.objects.get(tool_id="time::get_current_time"), position=1)
    PinnedTool.objects.create(tool=Tool.objects.get(tool_id="calc::rotate_payroll_encryption_keys"), position=0)

    async def listing(token: str, mode: str) -> list[str]:
        async with mcp_client(gateway, token, mode=mode) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    member = run(lambda: listing(people["member"], LEGACY))
    approver = run(lambda: listing(people["approver"], MODERN))
    assert set(member) == META | {"time__get_current_time"}
    assert set(approver) == META | {"calc__rotate_payroll_encryption_keys"}


def test_client_names_are_valid_and_distinct():
    assert client_tool_name(server_slug="time", tool_name="get_current_time") == "time__get_current_time"
    odd = client_tool_name(server_slug="gh", tool_name="issues/create issue")
    assert odd.startswith("gh__issues_create_issue_") and len(odd) <= 64
    assert odd != client_tool_name(server_slug="gh", tool_name="issues_create issue")
    long = client_tool_name(server_slug="s", tool_name="x" * 300)
    assert len(long) == 64 and all(ch.isalnum() or ch in "_.-" for ch in long)
