"""``uniqueItems`` in an upstream's inputSchema (redteam39, T13/C1-19): jsonschema compares every pair of an array's
items when it cannot sort them (objects, or numbers beside a string), so a caller's array of a few ten thousand items
held one of the gateway's ORM threads for minutes. Over HTTP against the live gateway and a real (scripted) stdio
upstream."""

from __future__ import annotations

import json
import tracemalloc

import anyio
import pytest

from .conftest import build_index, gateway_db, grant, make_token, make_user, mcp_client, run, sync_scripted_server

pytestmark = [gateway_db, pytest.mark.slow]

# 40,000 numbers behind a string, about 230 kB (under SCOUT_MCP_MAX_ARGUMENT_BYTES): jsonschema cannot sort them, and
# its pairwise check takes some 8 minutes of CPU for one call (10,000 took 32 s). Linear, it takes milliseconds.
MANY = ["first", *range(40_000)]
REPLY = '{"jsonrpc": "2.0", "id": ID, "result": {"content": [{"type": "text", "text": "tagged"}]}}'


@pytest.fixture
def tagging(gateway, admin_user, tmp_path):
    """A tool whose array argument must hold unique items (pydantic's ``set[...]``, zod's ``z.set()``), served by a
    scripted upstream that logs each call: (the upstream's call log, an attacker's token, a bystander's token)."""
    log = tmp_path / "calls.jsonl"
    tool = {
        "name": "tag_items",
        "description": "Tag items with a set of labels.",
        "inputSchema": {"type": "object", "properties": {"labels": {"type": "array", "uniqueItems": True}}},
        "annotations": {"readOnlyHint": True},
    }
    server = sync_scripted_server(tmp_path, "tags", {"pages": [[tool]], "call_log": str(log), "call_reply": REPLY})
    attacker, bystander = make_user("gw_attacker"), make_user("gw_bystander")
    grant(admin_user, server, attacker, "discover", "execute")
    grant(admin_user, server, bystander, "discover")
    build_index()
    return log, make_token(attacker), make_token(bystander)


def sent(log) -> list[dict]:
    """The arguments of each call the upstream received."""
    return [json.loads(line)["arguments"] for line in log.read_text().splitlines()] if log.exists() else []


def call(gateway, token: str, labels: list) -> object:
    async def main() -> object:
        async with mcp_client(gateway, token) as client:
            arguments = {"labels": labels}
            return await client.call_tool("execute_tool", {"tool_id": "tags::tag_items", "arguments": arguments})

    return run(main)


@pytest.mark.timeout(120)  # a guard against a wedged run (the pairwise check: minutes per call), not a measurement
def test_unique_items_of_a_long_array_are_checked_in_linear_time_while_other_clients_are_served(gateway, tagging):
    log, attacker, bystander = tagging
    attacks: list[object] = []
    answers: dict[str, object] = {}

    async def attack(labels: list) -> None:
        async with mcp_client(gateway, attacker) as client:
            arguments = {"tool_id": "tags::tag_items", "arguments": {"labels": labels}}
            attacks.append(await client.call_tool("execute_tool", arguments))

    async def search() -> None:
        async with mcp_client(gateway, bystander) as client:
            answers["search"] = await client.call_tool("tool_search", {"query": "tag items with labels"})

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(attack, [*MANY, MANY[-1]])  # one repeat, at the very end
            group.start_soon(search)

    run(main)

    # The other client was answered, and each attack was refused unsent, naming the rule and never the values.
    assert [m["tool_id"] for m in answers["search"].structured_content["matches"]] == ["tags::tag_items"]
    assert len(attacks) == 3
    for result in attacks:
        assert result.is_error and result.structured_content["invalid_arguments"] is True
        assert "arguments.labels: does not satisfy the schema's 'uniqueItems' rule" in result.content[0].text
        assert "39999" not in result.content[0].text
    assert sent(log) == []

    # Without the repeat the same array reaches the upstream whole.
    result = call(gateway, attacker, MANY)
    assert not result.is_error, result
    assert sent(log) == [{"labels": MANY}]


# (labels, unique): every case against one synced server, as one test; each case parametrized apart synced and indexed
# the server again (some 10 s a case on a loaded machine) for the same call path.
EQUALITY_CASES = [
    ([1, 1.0], False),  # one number, however written
    ([1, True], True),  # a boolean is no number
    ([0, False, None, ""], True),
    ([{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}], False),  # objects in any key order, numbers by value
    ([[1, 2], [2, 1]], True),  # arrays in order
    (["1", 1], True),
    ([{"a": True}, {"a": 1}], True),
]


def test_unique_items_follow_json_schemas_equality(gateway, tagging):
    """The linear check calls two items the same exactly where JSON Schema (and jsonschema's own check) does."""
    log, attacker, _ = tagging
    for labels, unique in EQUALITY_CASES:
        before = sent(log)
        result = call(gateway, attacker, labels)
        if unique:
            assert not result.is_error, (labels, result)
            assert sent(log) == [*before, {"labels": labels}]
        else:
            assert result.is_error and result.structured_content["invalid_arguments"] is True, (labels, result)
            assert sent(log) == before, labels


ZONES = [f"Region/City_{i:04d}" for i in range(400)]  # an enum of some size, as of time zones or country codes


@pytest.fixture
def zoning(gateway, admin_user, tmp_path):
    """A tool whose array items must each be one of ``ZONES``: (the upstream's call log, a caller's token)."""
    log = tmp_path / "calls.jsonl"
    tool = {
        "name": "set_zones",
        "description": "Set the time zones shown.",
        "inputSchema": {"type": "object", "properties": {"zones": {"type": "array", "items": {"enum": ZONES}}}},
        "annotations": {"readOnlyHint": True},
    }
    server = sync_scripted_server(tmp_path, "zones", {"pages": [[tool]], "call_log": str(log), "call_reply": REPLY})
    caller = make_user("gw_caller")
    grant(admin_user, server, caller, "discover", "execute")
    return log, make_token(caller)


def test_a_long_array_failing_an_enum_is_refused_without_holding_each_failure(gateway, zoning):
    """Every item of a caller's array failing a 400-name enum was a jsonschema error quoting the whole enum (7 kB),
    each kept until the answer was written: 30,000 items (60 kB of arguments) held some 250 MB of the gateway
    (100,000: 1.2 GB and 10 s of CPU, past SCOUT_MCP_SCHEMA_CHECK_SECONDS, which timed subschemas only). The answer
    now reads the first errors only, each without the enum, under a deadline every keyword keeps."""
    log, token = zoning

    async def main(zones: list) -> object:
        async with mcp_client(gateway, token) as client:
            arguments = {"tool_id": "zones::set_zones", "arguments": {"zones": zones}}
            return await client.call_tool("execute_tool", arguments)

    tracemalloc.start()
    try:
        result = run(lambda: main([0] * 30_000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * 1024 * 1024, f"{peak} bytes at the peak"
    assert result.is_error and result.structured_content["invalid_arguments"] is True
    assert "arguments.zones[0]: must be one of" in result.content[0].text
    assert sent(log) == []

    # Items that are all allowed reach the upstream.
    result = run(lambda: main(ZONES[:3]))
    assert not result.is_error, result
    assert sent(log) == [{"zones": ZONES[:3]}]
