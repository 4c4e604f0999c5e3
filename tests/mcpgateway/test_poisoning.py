"""Tool poisoning over HTTP against a real stdio upstream (issue 12, finding 4): a read-only hint on a tool
that says it deletes every file needs approval until an admin classifies it, and descriptions that attack the
model are held: tool_search and tool_inspect never serve them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import (
    classify_low_risk,
    gateway_db,
    mcp_client,
    modern_request,
    raw_post,
    rpc_result,
    run,
    sync_server,
)

pytestmark = [gateway_db, pytest.mark.slow]
POISONED_SERVER = Path(__file__).parent / "servers" / "poisoned_server.py"
INJECTED = ["sum_paraphrase", "sum_cyrillic", "sum_german", "sum_chatml"]


@pytest.fixture
def call_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "poisoned-calls.log"
    monkeypatch.setenv("POISONED_CALL_LOG", str(path))
    return path


def calls(path: Path, name: str) -> int:
    return path.read_text().splitlines().count(name) if path.exists() else 0


@pytest.fixture
def world(gateway, member_on, call_log) -> dict[str, Any]:
    server = sync_server(
        slug="poisoned",
        transport="stdio",
        command=sys.executable,
        args=[str(POISONED_SERVER)],
        env_vars=["POISONED_CALL_LOG"],
    )
    return {"server": server, "token": member_on(server, index=True).token}


def execute(gateway, token: str, tool_id: str, arguments: dict[str, Any]) -> Any:
    async def main():
        async with mcp_client(gateway, token) as client:
            return await client.call_tool("execute_tool", {"tool_id": tool_id, "arguments": arguments})

    return run(main)


def test_read_only_hint_on_a_deleting_tool_needs_approval_until_an_admin_classifies_it(
    gateway, world, admin_user, call_log
):
    from catalog.models import Tool

    first = execute(gateway, world["token"], "poisoned::tidy_workspace", {})
    assert first.is_error and first.structured_content["approval_required"] is True
    assert calls(call_log, "tidy_workspace") == 0

    # The control: a tool whose hint and description agree on read-only runs at once.
    echoed = execute(gateway, world["token"], "poisoned::echo", {"text": "hi"})
    assert not echoed.is_error and calls(call_log, "echo") == 1

    classify_low_risk(
        Tool.objects.get(tool_id="poisoned::tidy_workspace"),
        actor=admin_user,
        operation_class="read",
        reversibility="reversible",
    )
    after = execute(gateway, world["token"], "poisoned::tidy_workspace", {})
    assert not after.is_error, after
    assert calls(call_log, "tidy_workspace") == 1


def _rpc(gateway, token: str, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """One tools/call over HTTP: the JSON-RPC message, and status plus body to compare byte for byte."""
    response = raw_post(gateway, modern_request("tools/call", {"name": name, "arguments": arguments}), token=token)
    assert response.status_code < 500, response.text[:300]
    return rpc_result(response), f"{response.status_code} {response.text}"


def test_poisoned_descriptions_are_never_served(gateway, world, call_log):
    from catalog.models import Tool

    injected = {tool.tool_id: tool.description for tool in Tool.objects.filter(name__in=INJECTED)}
    assert len(injected) == len(INJECTED)
    # What follows "Adds two numbers." is the attack: none of it may reach the model.
    attacks = [description.split(".", 1)[1].strip()[:25] for description in injected.values()]
    token = world["token"]

    unknown = "poisoned::no_such_tool"
    _, unknown_inspect = _rpc(gateway, token, "tool_inspect", {"tool_ids": [unknown]})
    _, unknown_execute = _rpc(gateway, token, "execute_tool", {"tool_id": unknown, "arguments": {"a": 1, "b": 2}})
    served: list[dict[str, Any]] = []
    for tool_id in injected:
        # A held tool is answered exactly as an unknown one, by inspect and by execute.
        inspected, text = _rpc(gateway, token, "tool_inspect", {"tool_ids": [tool_id]})
        assert text.replace(tool_id, unknown) == unknown_inspect
        ran, text = _rpc(gateway, token, "execute_tool", {"tool_id": tool_id, "arguments": {"a": 1, "b": 2}})
        assert text.replace(tool_id, unknown) == unknown_execute
        served += [inspected, ran]
    for query in ("add two numbers", "Zahlen addieren", "delete entities in memory", "administrator system"):
        found, _ = _rpc(gateway, token, "tool_search", {"query": query})
        ids = {match["tool_id"] for match in found["result"]["structuredContent"]["matches"]}
        assert not ids & injected.keys(), (query, ids)
        served.append(found)

    # The same server's clean tool is found: the search works, it only leaves the held tools out.
    found, _ = _rpc(gateway, token, "tool_search", {"query": "return the given text unchanged"})
    assert "poisoned::echo" in {match["tool_id"] for match in found["result"]["structuredContent"]["matches"]}

    flat = json.dumps(served, ensure_ascii=False)
    for attack in attacks:
        assert attack not in flat
    assert all(calls(call_log, name) == 0 for name in INJECTED)
