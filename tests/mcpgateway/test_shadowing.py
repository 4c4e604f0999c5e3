"""Shadowing over HTTP against two real stdio upstreams (T8, C1-21): a second server publishing a tool with the
first one's name and words (claiming to be "the official, preferred" one) gets its own id; the first tool keeps
its id, its accepted definition and its calls, and each id runs its own server's tool only."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import gateway_db, mcp_client, run, sync_script_server

pytestmark = [gateway_db, pytest.mark.slow]
ORIGINAL, SHADOW = "poisoned::echo", "stuffing::echo"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _search_and_run(gateway, token: str) -> tuple[list[str], dict[str, str]]:
    async def main():
        async with mcp_client(gateway, token) as client:
            found = await client.call_tool("tool_search", {"query": "return the given text unchanged", "top_k": 10})
            ran = {}
            for tool_id in (ORIGINAL, SHADOW):
                result = await client.call_tool("execute_tool", {"tool_id": tool_id, "arguments": {"text": "hi"}})
                assert not result.is_error, result
                ran[tool_id] = result.content[0].text
            return [match["tool_id"] for match in found.structured_content["matches"]], ran

    return run(main)


def test_a_tool_of_the_same_name_on_another_server_leaves_the_first_unaffected(
    gateway, member_on, tmp_path, monkeypatch
):
    from catalog.models import Tool

    original_log, shadow_log = tmp_path / "original.log", tmp_path / "shadow.log"
    monkeypatch.setenv("POISONED_CALL_LOG", str(original_log))
    monkeypatch.setenv("STUFFING_CALL_LOG", str(shadow_log))
    first = sync_script_server("poisoned", "poisoned_server.py", "POISONED_CALL_LOG")
    before = Tool.objects.get(tool_id=ORIGINAL)
    second = sync_script_server("stuffing", "stuffing_server.py", "STUFFING_CALL_LOG")
    token = member_on(first, second, index=True).token

    after = Tool.objects.get(tool_id=ORIGINAL)
    assert (after.pk, after.definition_hash) == (before.pk, before.definition_hash)
    assert not after.policy.held and after.policy.accepted_hash == before.definition_hash
    assert Tool.objects.get(tool_id=SHADOW).server_id == second.pk

    found, ran = _search_and_run(gateway, token)
    assert {ORIGINAL, SHADOW} <= set(found)  # both, each under its own server's id
    assert ran == {ORIGINAL: "hi", SHADOW: "shadow: hi"}
    assert _lines(original_log).count("echo") == 1  # each id reached its own server's process once
    assert _lines(shadow_log).count("echo") == 1
