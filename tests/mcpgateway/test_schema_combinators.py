"""``anyOf``/``oneOf`` in an upstream's inputSchema (redteam41, T13/C1-19): jsonschema checked every branch whole,
keeping each of its errors, before refusing a call, so a caller's array failing every branch held a gateway thread
until ``SCOUT_MCP_SCHEMA_CHECK_SECONDS`` on every call. Over HTTP against the live gateway and a real (scripted) stdio
upstream."""

from __future__ import annotations

import json

import pytest

from .conftest import gateway_db, grant, make_token, make_user, mcp_client, run, sync_scripted_server

pytestmark = [gateway_db, pytest.mark.slow]

REPLY = '{"jsonrpc": "2.0", "id": ID, "result": {"content": [{"type": "text", "text": "stored"}]}}'
BRANCHES = [{"type": "array", "items": {"type": kind}} for kind in ("string", "integer", "boolean", "object")]


@pytest.fixture
def storing(gateway, admin_user, tmp_path):
    """Tools taking a list of one kind of item (anyOf, oneOf): (the upstream's call log, a caller's token)."""
    log = tmp_path / "calls.jsonl"
    tools = [
        {
            "name": f"store_{keyword.lower()}",
            "description": "Store a list of values of one kind.",
            "inputSchema": {"type": "object", "properties": {"values": {keyword: BRANCHES}}},
            "annotations": {"readOnlyHint": True},
        }
        for keyword in ("anyOf", "oneOf")
    ]
    server = sync_scripted_server(tmp_path, "lists", {"pages": [tools], "call_log": str(log), "call_reply": REPLY})
    caller = make_user("gw_caller")
    grant(admin_user, server, caller, "discover", "execute")
    return log, make_token(caller)


def sent(log) -> list[dict]:
    return [json.loads(line)["arguments"] for line in log.read_text().splitlines()] if log.exists() else []


def calls(gateway, token: str, sent_values: list[tuple[str, list]]) -> list:
    """The answers to calling each (tool, values) in turn, over one client session."""

    async def main() -> list:
        async with mcp_client(gateway, token) as client:
            return [
                await client.call_tool("execute_tool", {"tool_id": f"lists::{tool}", "arguments": {"values": values}})
                for tool, values in sent_values
            ]

    return run(main)


def test_an_array_failing_every_branch_is_refused_at_its_first_error(gateway, storing, settings):
    """50,000 nulls (250 kB, under SCOUT_MCP_MAX_ARGUMENT_BYTES) fail each of four array branches at their first item:
    jsonschema read every item of every branch (6 s of CPU, 556 MB, bench/NOTES-redteam41.md), so the call was
    refused only when the deadline struck. A deadline of 1 s is far above what the check now takes."""
    log, token = storing
    settings.SCOUT_MCP_SCHEMA_CHECK_SECONDS = 1.0
    answers = calls(gateway, token, [("store_anyof", [None] * 50_000), ("store_oneof", [None] * 50_000)])
    for keyword, result in zip(("anyOf", "oneOf"), answers, strict=True):
        assert result.is_error and result.structured_content["invalid_arguments"] is True
        assert f"arguments.values: does not satisfy the schema's '{keyword}' rule" in result.content[0].text
    assert sent(log) == []


MEANINGS = [
    ("anyOf", ["a", "b"], True),
    ("anyOf", [1, "b"], False),
    ("anyOf", [], True),  # every branch passes
    ("oneOf", [True], True),
    ("oneOf", [], False),  # more than one branch passes
    ("oneOf", [{"a": 1}, 2], False),
]


def test_combinators_keep_their_meaning(gateway, storing):
    log, token = storing
    answers = calls(gateway, token, [(f"store_{keyword.lower()}", values) for keyword, values, _ in MEANINGS])
    for (keyword, values, valid), result in zip(MEANINGS, answers, strict=True):
        if valid:
            assert not result.is_error, (keyword, values, result)
        else:
            assert result.is_error and result.structured_content["invalid_arguments"] is True, (keyword, values)
            assert f"does not satisfy the schema's '{keyword}' rule" in result.content[0].text
    assert sent(log) == [{"values": values} for _, values, valid in MEANINGS if valid]
