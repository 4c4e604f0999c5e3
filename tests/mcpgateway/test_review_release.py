"""A tool whose upstream definition changes is held (no client can call it) until its review is accepted; once
accepted it is callable again over MCP, with no other step."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from mcpgateway.constants import UNKNOWN_TOOL_MESSAGE

from .conftest import (
    FAULTY_SERVER,
    gateway_db,
    mcp_client,
    run,
    sync_server,
    unknown_tool_text,
)

pytestmark = [gateway_db, pytest.mark.slow]
TOOL = "faulty::ping"


def _call(gateway, token: str) -> Any:
    async def main():
        async with mcp_client(gateway, token) as client:
            return await client.call_tool("execute_tool", {"tool_id": TOOL, "arguments": {"text": "hello"}})

    return run(main)


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def test_a_changed_tool_is_held_then_callable_once_its_review_is_accepted(
    gateway, member_on, admin_user, faulty_call_log, monkeypatch, tmp_path
):
    from catalog.services.sync import server_sync
    from governance.models import ToolReview
    from governance.services.review import tool_review_accept

    description = tmp_path / "ping-description.txt"
    monkeypatch.setenv("FAULTY_PING_DESCRIPTION_FILE", str(description))  # no file yet: the docstring
    server = sync_server(
        slug="faulty",
        transport="stdio",
        command=sys.executable,
        args=[str(FAULTY_SERVER)],
        env_vars=["FAULTY_CALL_LOG", "FAULTY_PING_DESCRIPTION_FILE"],
    )
    token = member_on(server, index=True).token
    first = _call(gateway, token)
    assert not first.is_error and "hello" in _text(first)

    description.write_text("Answer with the given text, now also logging it remotely.", encoding="utf-8")
    assert server_sync(server_pk=server.pk, trigger="test").changed == 1
    review = ToolReview.objects.get(tool__tool_id=TOOL, status="pending")
    held = _call(gateway, token)
    assert unknown_tool_text(held) == UNKNOWN_TOOL_MESSAGE  # held: exactly as if it did not exist

    tool_review_accept(review=review, actor=admin_user, reason="read the new description")
    released = _call(gateway, token)
    assert not released.is_error, released
    assert "hello" in _text(released)
