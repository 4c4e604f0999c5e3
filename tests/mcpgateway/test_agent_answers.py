"""What an agent reads after a wrong call, through the SDK client over HTTP against the real mcp-server-git and
server-memory (bench/NOTES-agentux14.md).

Invalid arguments: the answer names what is wrong and where, and gives the schema of that part only (the failing
value's, the missing property's), not the whole inputSchema again. An error the tool itself reported ("Invalid
branch type") says whether calling again can help."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpgateway.management.commands.demo import Command

from .conftest import (
    LEGACY,
    PROTOCOL_MODES,
    build_index,
    classify_low_risk,
    demo_git_server,
    gateway_db,
    mcp_client,
    run,
    run_checks,
)

pytestmark = [gateway_db, pytest.mark.slow]


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


@pytest.fixture
def world(member_on, memory_server, admin_user, tmp_path) -> dict[str, Any]:
    from catalog.models import Tool

    git, repo = demo_git_server(tmp_path / "repo")
    # An admin classifies the graph writes as low-risk: this member runs them without an approval.
    for tool in Tool.objects.filter(server__slug="memory"):
        classify_low_risk(tool, actor=admin_user, operation_class="write", reversibility="reversible")
    token = member_on(git, memory_server).token
    Command()._curate()  # as the demo curates its memory and git tools
    build_index()
    return {"token": token, "repo": str(repo)}


def _property_schema(tool_id: str, *path: str) -> str:
    """A property's schema as tool_inspect shows it (pydantic's optional form shown as its plain type)."""
    from catalog.models import Tool
    from mcpgateway.services import schema_for_model

    tool = Tool.objects.get(tool_id=tool_id)
    node = schema_for_model(tool.input_schema, name=tool.name)
    for part in path:
        node = node["items"] if part == "items" else node["properties"][part]
    return json.dumps(node, separators=(",", ":"), ensure_ascii=False)


def test_what_an_agent_reads_in_search_answers_and_after_a_wrong_call_on_one_curated_world(gateway, world, subtests):
    """One synced and curated world (mcp-server-git and server-memory, indexed: most of each check's time when each
    had its own) for every check below, each judged on its own (a subtest). None changes what another sees: the
    searches only read, and every call is refused before it runs or fails upstream having changed nothing. The
    searches come first, on the world as set up; the calls' answers are checked in both protocol modes, the
    searches in the SDK client's default (legacy), as before."""
    checks = [
        (_the_memory_step_of_a_request_is_among_the_first_five, [LEGACY]),
        (_a_search_answer_says_why_in_words_and_examples_only, [LEGACY]),
        (_invalid_arguments_give_the_schema_of_what_is_wrong_only, PROTOCOL_MODES),
        (_a_missing_property_is_answered_with_the_note_on_its_server, PROTOCOL_MODES),
        (_an_error_the_tool_reported_says_whether_calling_again_can_help, PROTOCOL_MODES),
    ]
    run_checks(subtests, checks, gateway, world)


def _invalid_arguments_give_the_schema_of_what_is_wrong_only(gateway, world, mode):
    repo = world["repo"]
    calls = [
        ("git::git_log", {"repo_path": repo, "max_count": "3"}),  # a wrong type
        ("git::git_branch", {"repo_path": repo}),  # a required property left out
        ("git::git_log", {"repo": repo}),  # a misnamed one
        ("memory::create_entities", {"entities": [{"name": "Bob", "entityType": "person"}]}),  # deeper down
    ]

    async def main():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            return [
                await client.call_tool("execute_tool", {"tool_id": tool_id, "arguments": arguments})
                for tool_id, arguments in calls
            ]

    answers = run(main)
    assert all(answer.is_error and answer.structured_content == {"invalid_arguments": True} for answer in answers)
    mistyped, forgotten, misnamed, nested = answers
    assert text_of(mistyped) == (
        "Invalid arguments: arguments.max_count: must be of type integer. Schema of arguments.max_count "
        f"{_property_schema('git::git_log', 'max_count')}. Call again with that fixed (tool_inspect gives the whole "
        "inputSchema)."
    )
    # The values branch_type takes are only in its description: given, and not the optional parameters' texts.
    assert f"Schema of arguments.branch_type {_property_schema('git::git_branch', 'branch_type')}." in text_of(
        forgotten
    )
    assert "'local'" in text_of(forgotten) and "commit sha" not in text_of(forgotten)
    # (the properties are named in the stored schema's order: Postgres's jsonb orders keys its own way)
    assert text_of(misnamed).startswith(
        "Invalid arguments: arguments: missing required property repo_path, and has properties the schema does not "
        "name (its properties: "
    )
    assert f"). Schema of arguments.repo_path {_property_schema('git::git_log', 'repo_path')}." in text_of(misnamed)
    assert "timestamp for filtering" not in text_of(misnamed)
    observations = _property_schema("memory::create_entities", "entities", "items", "observations")
    assert f"Schema of arguments.entities[0].observations {observations}." in text_of(nested)
    assert '"entityType"' not in text_of(nested)


def _a_missing_property_is_answered_with_the_note_on_its_server(gateway, world, mode):
    """mcp-server-git's repo_path has no description ({"type":"string"}): which repository it names is only in the
    operator's note on the server, which a model that called without searching never read. A wrong value of a
    property the model did give needs no such note."""
    repo = world["repo"]

    async def main():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            return [
                await client.call_tool("execute_tool", {"tool_id": "git::git_log", "arguments": arguments})
                for arguments in ({"max_count": 3}, {"repo_path": repo, "max_count": "3"})
            ]

    missing, mistyped = run(main)
    assert text_of(missing) == (
        "Invalid arguments: arguments: missing required property repo_path. Schema of arguments.repo_path "
        f'{{"type":"string"}}. Server git: Git operations on the demo repository {repo}. Call again with that fixed '
        "(tool_inspect gives the whole inputSchema)."
    )
    assert "Server git" not in text_of(mistyped)


def _an_error_the_tool_reported_says_whether_calling_again_can_help(gateway, world, mode):
    """git_branch refuses a branch type it does not know (a read); server-memory refuses observations for an entity
    it does not hold (a write). Each answer keeps the tool's own message and says the same call fails again."""

    async def main():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            read = await client.call_tool(
                "execute_tool",
                {"tool_id": "git::git_branch", "arguments": {"repo_path": world["repo"], "branch_type": "everything"}},
            )
            write = await client.call_tool(
                "execute_tool",
                {
                    "tool_id": "memory::add_observations",
                    "arguments": {"observations": [{"entityName": "Nobody", "contents": ["likes tea"]}]},
                },
            )
            return read, write

    read, write = run(main)
    assert read.is_error and write.is_error
    assert "Invalid branch type" in read.content[0].text and "Nobody" in write.content[0].text
    for answer in (read, write):
        assert answer.content[-1].text.startswith(
            "Note from the gateway: the tool ran and reported this error. The same arguments will fail the same way"
        )
    assert read.content[-1].text.endswith("It only reads, so nothing changed.")
    assert write.content[-1].text.endswith("Only its message can say whether it changed anything before it failed.")


def _the_memory_step_of_a_request_is_among_the_first_five(gateway, world, mode):
    """ "... and remember that ..." is a step of its own (it was read as one request, and its git words won all five
    places), and remembering asks for a write: a tool that stores comes before one that looks up."""

    async def main():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            return await client.call_tool(
                "tool_search", {"query": "show the latest commits and remember that Bob reviewed them"}
            )

    found = [match["tool_id"] for match in run(main).structured_content["matches"]]
    assert "memory::create_entities" in found, found
    assert "memory::search_nodes" not in found[: found.index("memory::create_entities")], found


def _a_search_answer_says_why_in_words_and_examples_only(gateway, world, mode):
    """The "why:" lines named the fields each word was found in ("commits — in purpose, parameters, example
    request"), about 17 tokens a match: the model sees the name, summary and schema those fields are. A word of the
    quoted example request is not said again, and closeness in meaning only when nothing else is."""

    async def main():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            return await client.call_tool("tool_search", {"query": "show me the latest commits"})

    text = text_of(run(main))
    why = [line.strip() for line in text.splitlines() if line.startswith("   why: ")]
    assert why[0] == "why: like the example request 'show me the latest commits'", text
    assert all(" — in " not in line and "meaning close to" not in line for line in why), why
