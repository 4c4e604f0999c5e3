"""pydantic's optional parameters as a model is shown them, through the SDK client over HTTP against the real
mcp-server-git: ``{"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}`` is shown as its plain type
(12 tokens a parameter in every answer that shows the schema, for nothing a model acts on: null and leaving it out
mean the same), while the call is still checked against the schema the server gave (null is not refused)."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import MODERN, PROTOCOL_MODES, drop_index, gateway_db, git_repo, mcp_client, run, sync_server

pytestmark = [gateway_db, pytest.mark.slow]


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@pytest.fixture
def git(member_on, tmp_path) -> tuple[str, str]:
    repo = git_repo(tmp_path / "repo")
    server = sync_server(slug="git", transport="stdio", command="mcp-server-git", args=["--repository", str(repo)])
    return member_on(server, index=True).token, str(repo)


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_an_optional_parameter_is_shown_as_its_plain_type(gateway, git, mode):
    from catalog.models import Tool

    token, repo = git
    stored = Tool.objects.get(tool_id="git::git_branch").input_schema["properties"]["contains"]
    assert stored["anyOf"] == [{"type": "string"}, {"type": "null"}] and stored["default"] is None

    async def main():
        async with mcp_client(gateway, token, mode=mode) as client:
            inspected = await client.call_tool("tool_inspect", {"tool_ids": ["git::git_branch"]})
            found = await client.call_tool("tool_search", {"query": "list the local git branches"})
            # a strict host sends null for every optional field: still accepted, as the server's schema allows it
            ran = await client.call_tool(
                "execute_tool",
                {
                    "tool_id": "git::git_branch",
                    "arguments": {"repo_path": repo, "branch_type": "local", "contains": None, "not_contains": None},
                },
            )
            return inspected, found, ran

    inspected, found, ran = run(main)
    (branch,) = inspected.structured_content["tools"]
    contains = branch["inputSchema"]["properties"]["contains"]
    assert contains["type"] == "string" and "anyOf" not in contains and "default" not in contains
    assert contains["description"] == stored["description"]
    assert branch["inputSchema"]["required"] == ["repo_path", "branch_type"]  # still optional
    assert '{"type":"null"}' not in text_of(inspected)
    shown = [m for m in found.structured_content["matches"] if "inputSchema" in m]
    assert "git::git_branch" in [m["tool_id"] for m in shown]
    assert '{"type":"null"}' not in text_of(found)
    assert not ran.is_error and "main" in text_of(ran), text_of(ran)


def test_the_direct_listing_shows_it_plain_too(gateway, git):
    token, _ = git
    drop_index()

    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    listed = run(main)
    assert listed["git__git_branch"].input_schema["properties"]["contains"]["type"] == "string"
