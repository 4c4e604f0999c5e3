"""An agent's tasks over the demo's real servers (mcp-server-git, server-memory, server-everything), curated as
``manage.py demo`` curates them, through the SDK client over HTTP (bench/NOTES-agentux16.md).

Each request below cost an agent a wrong tool or a call more on the demo before its curation named what the tool
does in users' words: "what changed in the last commit" led with git_commit (a write, on the noun "commit"), with
git_show below the first five; "what does Carol prefer" was withheld; "what is 17 plus 25" was low with get-sum
4th; "link Alice to Acme as an employee" was low with everything's gzip-file-as-resource first. None of these
requests is a curated example itself."""

from __future__ import annotations

from typing import Any

import pytest

from mcpgateway.management.commands.demo import Command

from .conftest import build_index, gateway_db, git_repo, mcp_client, run, sync_server
from .test_agent_answers import text_of

pytestmark = [gateway_db, pytest.mark.slow]


@pytest.fixture
def demo(member_on, memory_server, everything_server, tmp_path) -> dict[str, Any]:
    repo = git_repo(tmp_path / "repo")
    git = sync_server(
        slug="git",
        transport="stdio",
        command="mcp-server-git",
        args=["--repository", str(repo)],
        description=f"Git operations on the demo repository {repo}.",  # the demo's note on its git server
    )
    token = member_on(git, memory_server, everything_server).token
    Command()._curate()
    build_index()
    return {"token": token, "repo": str(repo)}


@pytest.mark.parametrize(
    "request_text, tool_id",
    [
        ("what changed in the last commit", "git::git_show"),
        ("what does Carol prefer", "memory::search_nodes"),
        ("what is 17 plus 25", "everything::get-sum"),
        ("link Alice to Acme as an employee", "memory::create_relations"),
    ],
)
def test_a_demo_request_is_answered_with_its_tool_first_and_confidently(gateway, demo, request_text, tool_id):
    async def main():
        async with mcp_client(gateway, demo["token"]) as client:
            return await client.call_tool("tool_search", {"query": request_text})

    answer = run(main).structured_content
    found = [match["tool_id"] for match in answer["matches"]]
    assert (answer["confidence"], found[:1]) == ("high", [tool_id]), found
    assert "inputSchema" in answer["matches"][0]  # callable at once: no tool_inspect turn


def test_what_the_last_commit_changed_takes_one_search_and_one_call(gateway, demo):
    """The first match is called with the arguments its answer made clear (the repository from the server's note,
    HEAD for the last commit): the commit's message and its diff come back."""

    async def main():
        async with mcp_client(gateway, demo["token"]) as client:
            found = await client.call_tool("tool_search", {"query": "what changed in the last commit"})
            first = found.structured_content["matches"][0]["tool_id"]
            shown = await client.call_tool(
                "execute_tool", {"tool_id": first, "arguments": {"repo_path": demo["repo"], "revision": "HEAD"}}
            )
            return text_of(found), shown

    found, shown = run(main)
    assert "HEAD is the last commit" in found
    assert not shown.is_error and "one" in text_of(shown) and "+hello" in text_of(shown), text_of(shown)
