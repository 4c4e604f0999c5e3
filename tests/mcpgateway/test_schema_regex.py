"""ReDoS through an upstream's inputSchema (issue 12, item 1): a backtracking pattern and a hostile argument
must not freeze the gateway. Over HTTP against the live gateway and a real (scripted) stdio upstream."""

from __future__ import annotations

import json
import sys

import anyio
import pytest

from tests.catalog.servers.fixtures import SCRIPTED

from .conftest import build_index, gateway_db, grant, make_token, make_user, mcp_client, run, sync_server

pytestmark = [gateway_db, pytest.mark.slow]

EVIL = "^(a+)+$"
# Python's re needs about 2**n steps to refuse n "a"s and a "!" here (26 took 2.3 s in the attack), RE2 about
# n. Three such calls would hold a gateway on Python's re for minutes: the test then fails on its timeout mark
# (a guard against a wedged run, not a measurement). Not longer: re holds the GIL, no timeout can interrupt it.
HOSTILE = "a" * 30 + "!"


@pytest.fixture
def regex_server(gateway, admin_user, tmp_path):
    script = tmp_path / "regex.json"
    tool = {
        "name": "check_code",
        "description": "Check a code made of the letter a.",
        "inputSchema": {"type": "object", "properties": {"code": {"type": "string", "pattern": EVIL}}},
        "annotations": {"readOnlyHint": True},
    }
    script.write_text(json.dumps({"pages": [[tool]]}))
    server = sync_server(slug="regex", transport="stdio", command=sys.executable, args=[str(SCRIPTED), str(script)])
    attacker, bystander = make_user("gw_attacker"), make_user("gw_bystander")
    grant(admin_user, server, attacker, "discover", "execute")
    grant(admin_user, server, bystander, "discover")
    build_index()
    return make_token(attacker), make_token(bystander)


@pytest.mark.timeout(60)
def test_a_backtracking_pattern_is_refused_promptly_while_other_clients_are_served(gateway, regex_server):
    attacker_token, bystander_token = regex_server
    answers: dict[str, object] = {}

    async def attack(index: int) -> None:
        async with mcp_client(gateway, attacker_token) as client:
            answers[f"attack-{index}"] = await client.call_tool(
                "execute_tool", {"tool_id": "regex::check_code", "arguments": {"code": HOSTILE}}
            )

    async def search() -> None:
        async with mcp_client(gateway, bystander_token) as client:
            answers["search"] = await client.call_tool("tool_search", {"query": "check a code"})

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for index in range(3):
                group.start_soon(attack, index)
            group.start_soon(search)

    run(main)

    # The other client was answered, and each attack got a validation error naming the rule, not the value.
    assert [m["tool_id"] for m in answers["search"].structured_content["matches"]] == ["regex::check_code"]
    for index in range(3):
        result = answers[f"attack-{index}"]
        assert result.is_error and result.structured_content["invalid_arguments"] is True
        text = result.content[0].text
        assert "arguments.code: fails pattern" in text and HOSTILE not in text

    # A matching value still passes validation (it reaches the upstream, which has no tools/call).
    async def valid() -> object:
        async with mcp_client(gateway, attacker_token) as client:
            return await client.call_tool(
                "execute_tool", {"tool_id": "regex::check_code", "arguments": {"code": "aaa"}}
            )

    assert not (run(valid).structured_content or {}).get("invalid_arguments")


def test_a_stored_schema_re2_cannot_run_is_answered_with_a_clear_error(gateway, regex_server):
    """A tool stored before sync refused such patterns: execute says so and never runs Python's re on it."""
    from catalog.models import Tool

    attacker_token, _ = regex_server
    Tool.objects.filter(tool_id="regex::check_code").update(
        input_schema={"type": "object", "properties": {"code": {"type": "string", "pattern": r"^(a)\1$"}}}
    )

    async def main() -> object:
        async with mcp_client(gateway, attacker_token) as client:
            return await client.call_tool("execute_tool", {"tool_id": "regex::check_code", "arguments": {"code": "aa"}})

    result = run(main)
    assert result.is_error and result.structured_content["invalid_arguments"] is True
    assert "regular expression Scout cannot check safely" in result.content[0].text
