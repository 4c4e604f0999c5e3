"""A value Scout gives an upstream server from its environment (T1: the gateway's own credential, kept apart from
the caller's) never reaches the caller when the server quotes it back: in a tool error, a result's text or its
structured content, also split by an invisible character, and not in a result kept for a repeated idempotency key
either (T9, T14). With it, the caller could call the service itself, past every grant and approval of Scout."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import MODERN, gateway_db, mcp_client, run, sync_server

pytestmark = [gateway_db, pytest.mark.slow]

LEAKY_SERVER = Path(__file__).parent / "servers" / "leaky_server.py"
TOKEN = "ghp_leakyServersOwnT0ken42"


@pytest.fixture
def token(gateway, member_on, monkeypatch) -> str:
    monkeypatch.setenv("LEAKY_TOKEN", TOKEN)
    server = sync_server(
        slug="leaky", transport="stdio", command=sys.executable, args=[str(LEAKY_SERVER)], env_vars=["LEAKY_TOKEN"]
    )
    return member_on(server).token


def _texts(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def test_a_servers_own_token_quoted_in_its_answer_never_reaches_the_caller(gateway, token):
    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            refused = await client.call_tool("execute_tool", {"tool_id": "leaky::refused", "arguments": {}})
            whoami = await client.call_tool(
                "execute_tool", {"tool_id": "leaky::whoami", "arguments": {}, "idempotency_key": "w-1"}
            )
            again = await client.call_tool(
                "execute_tool", {"tool_id": "leaky::whoami", "arguments": {}, "idempotency_key": "w-1"}
            )
            return refused, whoami, again

    refused, whoami, again = run(main)
    assert refused.is_error and "Authorization: Bearer [redacted]" in _texts(refused)
    assert not whoami.is_error
    assert whoami.structured_content == {"token": "[redacted]", "hint": "[redacted]", "user": "leaky-bot"}
    assert again.structured_content == whoami.structured_content  # the stored result, as it was answered
    for result in (refused, whoami, again):
        assert TOKEN not in result.model_dump_json(), "the server's token reached the caller"

    from mcpgateway.models import IdempotencyRecord

    assert TOKEN not in str(IdempotencyRecord.objects.get(key="w-1").result)
