"""ReDoS through an upstream's inputSchema (issue 12, item 1): a backtracking pattern and a hostile argument
must not freeze the gateway. Over HTTP against the live gateway and a real (scripted) stdio upstream."""

from __future__ import annotations

import json

import anyio
import pytest

from tests.catalog.servers.fixtures import shared_reference_bomb

from .conftest import build_index, gateway_db, grant, make_token, make_user, mcp_client, run, sync_scripted_server

pytestmark = [gateway_db, pytest.mark.slow]

EVIL = "^(a+)+$"
# Python's re needs about 2**n steps to refuse n "a"s and a "!" here (26 took 2.3 s in the attack), RE2 about
# n. Three such calls would hold a gateway on Python's re for minutes: the test then fails on its timeout mark
# (a guard against a wedged run, not a measurement). Not longer: re holds the GIL, no timeout can interrupt it.
HOSTILE = "a" * 30 + "!"


def served_tool(admin_user, tmp_path, slug: str, tool: dict) -> tuple[str, str]:
    """``tool`` served by a scripted stdio upstream named ``slug``, synced and indexed: the tokens of a caller who may
    execute it and of a bystander who may only find it."""
    server = sync_scripted_server(tmp_path, slug, {"pages": [[tool]]})
    attacker, bystander = make_user("gw_attacker"), make_user("gw_bystander")
    grant(admin_user, server, attacker, "discover", "execute")
    grant(admin_user, server, bystander, "discover")
    build_index()
    return make_token(attacker), make_token(bystander)


def attacks_beside_a_search(gateway, tokens: tuple[str, str], tool_id: str, arguments: dict) -> tuple[list, object]:
    """Three concurrent calls of ``tool_id`` by the attacker while the bystander searches: (the calls' answers, the
    search's answer)."""
    attacker_token, bystander_token = tokens
    attacks: list[object] = []
    answers: dict[str, object] = {}

    async def attack() -> None:
        async with mcp_client(gateway, attacker_token) as client:
            attacks.append(await client.call_tool("execute_tool", {"tool_id": tool_id, "arguments": arguments}))

    async def search() -> None:
        async with mcp_client(gateway, bystander_token) as client:
            answers["search"] = await client.call_tool("tool_search", {"query": "check a code"})

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(attack)
            group.start_soon(search)

    run(main)
    return attacks, answers["search"]


def call(gateway, token: str, tool_id: str, arguments: dict) -> object:
    async def main() -> object:
        async with mcp_client(gateway, token) as client:
            return await client.call_tool("execute_tool", {"tool_id": tool_id, "arguments": arguments})

    return run(main)


@pytest.fixture
def regex_server(gateway, admin_user, tmp_path):
    tool = {
        "name": "check_code",
        "description": "Check a code made of the letter a.",
        "inputSchema": {"type": "object", "properties": {"code": {"type": "string", "pattern": EVIL}}},
        "annotations": {"readOnlyHint": True},
    }
    return served_tool(admin_user, tmp_path, "regex", tool)


@pytest.mark.timeout(60)
def test_a_backtracking_pattern_is_refused_promptly_while_other_clients_are_served(gateway, regex_server):
    attacks, search = attacks_beside_a_search(gateway, regex_server, "regex::check_code", {"code": HOSTILE})

    # The other client was answered, and each attack got a validation error naming the rule, not the value.
    assert [m["tool_id"] for m in search.structured_content["matches"]] == ["regex::check_code"]
    assert len(attacks) == 3
    for result in attacks:
        assert result.is_error and result.structured_content["invalid_arguments"] is True
        text = result.content[0].text
        assert "arguments.code: fails pattern" in text and HOSTILE not in text

    # A matching value still passes validation (it reaches the upstream, which has no tools/call).
    valid = call(gateway, regex_server[0], "regex::check_code", {"code": "aaa"})
    assert not (valid.structured_content or {}).get("invalid_arguments")


def test_a_stored_schema_re2_cannot_run_is_answered_with_a_clear_error(gateway, regex_server):
    """A tool stored before sync refused such patterns: execute says so and never runs Python's re on it."""
    from catalog.models import Tool

    attacker_token, _ = regex_server
    Tool.objects.filter(tool_id="regex::check_code").update(
        input_schema={"type": "object", "properties": {"code": {"type": "string", "pattern": r"^(a)\1$"}}}
    )

    result = call(gateway, attacker_token, "regex::check_code", {"code": "aa"})
    assert result.is_error and result.structured_content["invalid_arguments"] is True
    assert "regular expression Scout cannot check safely" in result.content[0].text


@pytest.fixture
def bomb_server(gateway, admin_user, tmp_path):
    """A tool stored with a 40-level shared-reference schema before sync refused such schemas (sync now refuses it,
    tests/catalog/services/test_server_sync.py): the check at call time must still keep to its time."""
    from catalog.models import Tool

    tool = {
        "name": "check_code",
        "description": "Check a code.",
        "inputSchema": {"type": "object", "properties": {"code": {"type": "string"}}},
        "annotations": {"readOnlyHint": True},
    }
    tokens = served_tool(admin_user, tmp_path, "bomb", tool)
    Tool.objects.filter(tool_id="bomb::check_code").update(input_schema=shared_reference_bomb(40))
    return tokens


@pytest.mark.timeout(60)
def test_a_schema_of_shared_references_is_checked_within_its_time_while_other_clients_are_served(
    gateway, bomb_server, settings, monkeypatch
):
    """C1-19: a schema of 40 definitions, each an anyOf of two references to the one before, was accepted at sync
    (now refused there; this one is stored as before), and checking a 1-character string against it took 2**40
    steps: each call held one of the gateway's six ORM threads (and the CPU) for ever, so six calls stopped every
    client's searches and calls. The check now stops at its time (``SCOUT_MCP_SCHEMA_CHECK_SECONDS``) and the call
    is refused unsent. Without the bound the test fails on its timeout mark (a guard against a wedged run, not a
    measurement). The estimate that refuses this schema before any check (``stored_schema_problem``) is taken out
    here: the time bound stays for a schema it would miss."""
    from mcpgateway.services import execution

    monkeypatch.setattr(execution, "stored_schema_problem", lambda tool: None)
    settings.SCOUT_MCP_SCHEMA_CHECK_SECONDS = 0.5
    attacks, search = attacks_beside_a_search(gateway, bomb_server, "bomb::check_code", {"code": "a"})

    assert [m["tool_id"] for m in search.structured_content["matches"]] == ["bomb::check_code"]
    assert len(attacks) == 3
    for result in attacks:
        assert result.is_error and result.structured_content["invalid_arguments"] is True
        assert "took over 0.5 s, so the call was not sent" in result.content[0].text

    # A value the first branch accepts is checked at once and passes.
    valid = call(gateway, bomb_server[0], "bomb::check_code", {"code": "abcdef"})
    assert not (valid.structured_content or {}).get("invalid_arguments")


def test_a_stored_schema_sync_now_refuses_is_refused_at_call_time_with_the_same_reason(
    gateway, bomb_server, monkeypatch
):
    """A tool stored before sync refused exponential schemas kept its schema until its server synced again: each
    call ran the check to its time limit. It is refused before any check, with sync's reason, the estimate made once
    per tool version."""
    from catalog.schemas import schema_evaluation_problem
    from mcpgateway.services import execution

    estimates = []

    def counted(schema):
        estimates.append(schema)
        return schema_evaluation_problem(schema)

    monkeypatch.setattr(execution, "schema_evaluation_problem", counted)
    monkeypatch.setattr(execution, "_EVALUATION_PROBLEMS", {})  # another test's tool of this version: not known yet
    reason = schema_evaluation_problem(shared_reference_bomb(40))
    assert reason and reason.startswith("checking arguments can take over")

    for code in ("a", "abcdef"):  # one the schema refuses, one it accepts: neither is checked nor sent
        result = call(gateway, bomb_server[0], "bomb::check_code", {"code": code})
        assert result.is_error and result.structured_content["invalid_arguments"] is True
        assert f"the tool's input schema is refused ({reason}), so the call was not sent" in result.content[0].text
    assert len(estimates) == 1


@pytest.fixture
def reporting_server(gateway, admin_user, tmp_path):
    """A tool whose outputSchema has a backtracking pattern and whose answer is the string that makes it backtrack."""
    tool = {
        "name": "report",
        "description": "Report a code.",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object", "properties": {"code": {"type": "string", "pattern": EVIL}}},
        "annotations": {"readOnlyHint": True},
    }
    answer = {"content": [{"type": "text", "text": "reported"}], "structuredContent": {"code": "a" * 22 + "!"}}
    reply = json.dumps({"jsonrpc": "2.0", "id": 0, "result": answer}).replace('"id": 0', '"id": ID')
    server = sync_scripted_server(tmp_path, "report", {"pages": [[tool]], "call_reply": reply})
    caller = make_user("gw_caller")
    grant(admin_user, server, caller, "discover", "execute")
    return make_token(caller)


def test_an_upstreams_result_is_never_matched_against_its_output_schemas_patterns(gateway, reporting_server):
    """The SDK checked each result against the outputSchema of the server's listing at call time, with Python's
    backtracking re and in the gateway's event loop, so the server chose both the pattern and the string: "^(a+)+$"
    against 24 "a"s and a "!" froze every client of the gateway for 2.5 s, 40 of them for days (no timeout can
    interrupt re). Here 22 (under a second): before, the call failed with the SDK's "Invalid structured content";
    now the result is passed on, unchecked, under Scout's output policy."""

    result = call(gateway, reporting_server, "report::report", {})
    assert not result.is_error, result.content[0].text
    assert result.structured_content == {"code": "a" * 22 + "!"}


@pytest.mark.timeout(120)
def test_a_schema_of_ten_thousand_subschemas_is_kept_and_a_call_matching_none_is_refused_unsent(
    gateway, admin_user, tmp_path
):
    """C1-19: an inputSchema whose one argument is an ``anyOf`` of 10,000 subschemas (about 200 kB, under the
    definition size limit) costs one evaluation per subschema: sync keeps it. A value none of them accepts is a tool
    error naming the argument's path, never sent; the last one's value reaches the upstream exactly, once."""
    from catalog.models import Tool

    log = tmp_path / "calls.log"
    colours = {"anyOf": [{"const": f"colour-{index}"} for index in range(10_000)]}
    tool = {
        "name": "pick",
        "description": "Pick a colour.",
        "inputSchema": {"type": "object", "properties": {"colour": colours}, "required": ["colour"]},
        "annotations": {"readOnlyHint": True},
    }
    reply = json.dumps({"jsonrpc": "2.0", "id": 0, "result": {"content": [{"type": "text", "text": "picked"}]}})
    server = sync_scripted_server(
        tmp_path, "wide", {"pages": [[tool]], "call_log": str(log), "call_reply": reply.replace('"id": 0', '"id": ID')}
    )
    assert len(Tool.objects.get(server=server, name="pick").input_schema["properties"]["colour"]["anyOf"]) == 10_000
    caller = make_user("gw_caller")
    grant(admin_user, server, caller, "discover", "execute")
    token = make_token(caller)

    refused = call(gateway, token, "wide::pick", {"colour": "colour-10000"})
    assert refused.is_error and refused.structured_content["invalid_arguments"] is True
    assert "colour" in refused.content[0].text and "colour-10000" not in refused.content[0].text
    assert not log.exists()

    picked = call(gateway, token, "wide::pick", {"colour": "colour-9999"})
    assert not picked.is_error and picked.content[0].text == "picked"
    assert [json.loads(line)["arguments"] for line in log.read_text().splitlines()] == [{"colour": "colour-9999"}]
