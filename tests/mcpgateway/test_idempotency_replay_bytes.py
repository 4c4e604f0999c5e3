"""The repeat of an idempotency key answers the first call's result as it was sent (redteam44, T13/T17): stored as
jsonb, a number came back as its digits (1e308: 309 of them) and keys reordered, so an answer under the output cap
was replayed at many times the cap. Over HTTP against the live gateway and a real (scripted) stdio upstream."""

from __future__ import annotations

import json

import pytest

from tests.catalog.servers.fixtures import good_tool

from .conftest import build_index, gateway_db, mcp_client, run, scripted_read_tool

pytestmark = [gateway_db, pytest.mark.slow]

# 1e308 is 5 characters as sent and 309 as jsonb reads it back; "zeta" first, which jsonb puts after "a".
STRUCTURED = {"zeta": [1e308] * 2000, "a": 0.1, "n": -1e-320}


def test_a_repeat_answers_the_first_calls_result_as_it_was_sent(gateway, member_on, admin_user, tmp_path):
    reply = {"content": [{"type": "text", "text": "measured"}], "structuredContent": STRUCTURED}
    token, log = scripted_read_tool(
        tmp_path, "lab", good_tool("measure"), reply, member_on=member_on, admin_user=admin_user
    )
    build_index()

    async def main():
        async with mcp_client(gateway, token) as client:
            call = {"tool_id": "lab::measure", "arguments": {}, "idempotency_key": "m-1"}
            return await client.call_tool("execute_tool", call), await client.call_tool("execute_tool", call)

    first, again = run(main)
    assert len(log.read_text().splitlines()) == 1  # the repeat was answered from the stored result
    assert not first.is_error and first.structured_content == STRUCTURED
    sent = json.dumps(first.model_dump(mode="json"))
    assert json.dumps(again.model_dump(mode="json")) == sent  # the same values, keys in the same order
    # Some 16 kB twice (the structured content, and its JSON as the text block the gateway adds, redteam51); 2000
    # numbers of 309 digits each were replayed: over 600 kB.
    assert len(sent) < 40_000
