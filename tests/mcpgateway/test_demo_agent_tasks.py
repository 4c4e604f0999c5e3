"""An agent's tasks over the demo's real servers (mcp-server-git, server-memory, server-everything), curated as
``manage.py demo`` curates them, through the SDK client over HTTP (bench/NOTES-agentux16.md).

Each request below cost an agent a wrong tool or a call more on the demo before its curation named what the tool
does in users' words: "what changed in the last commit" led with git_commit (a write, on the noun "commit"), with
git_show below the first five; "what does Carol prefer" was withheld; "what is 17 plus 25" was low with get-sum
4th; "link Alice to Acme as an employee" was low with everything's gzip-file-as-resource first; "stage README.md
for the next commit" led with git_commit and "switch to the feature-x branch" with git_create_branch. None of these
requests is a curated example itself."""

from __future__ import annotations

from typing import Any

import pytest

from mcpgateway.management.commands.demo import Command

from .conftest import build_index, demo_git_server, gateway_db, mcp_client, run
from .test_agent_answers import text_of

pytestmark = [gateway_db, pytest.mark.slow]


@pytest.fixture
def demo(member_on, memory_server, everything_server, tmp_path) -> dict[str, Any]:
    git, repo = demo_git_server(tmp_path / "repo")
    token = member_on(git, memory_server, everything_server).token
    Command()._curate()
    build_index()
    return {"token": token, "repo": str(repo)}


# Each request with the tool an agent should be handed first, confidently.
DEMO_REQUESTS = [
    ("what changed in the last commit", "git::git_show"),
    ("what does Carol prefer", "memory::search_nodes"),
    ("what is 17 plus 25", "everything::get-sum"),
    ("link Alice to Acme as an employee", "memory::create_relations"),
    # git_commit and git_create_branch (writes) led: upstream's "staging area" and "Switches branches" share no
    # word as written with "stage" and "switch" (agentux17)
    ("stage README.md for the next commit", "git::git_add"),
    ("switch to the feature-x branch", "git::git_checkout"),
    # agentux18, before: git_reset led ("Unstages all staged changes"); create_entities led, high (a question
    # answered by a write); low, search_nodes then git_show; low; low, search_nodes first; low, git_add first
    ("stage all my changes", "git::git_add"),
    ("who works at Acme", "memory::search_nodes"),
    ("show me everything stored about Alice and Bob", "memory::open_nodes"),
    ("remember that Carol prefers tea", "memory::create_entities"),
    ("forget everything about Carol", "memory::delete_entities"),
    ("undo staging of README.md", "git::git_reset"),
]


def test_the_demos_agent_tasks_on_one_curated_demo(gateway, demo):
    """One synced, curated demo (three real servers over stdio, about 10 s of setup) for every task below; each
    task only reads (searches, and git_show), so none changes what another sees, and every request is asked and
    judged whatever another's answer (all the wrong ones are named)."""
    _every_demo_request_is_answered_with_its_tool_first_and_confidently(gateway, demo)
    _what_the_last_commit_changed_takes_one_search_and_one_call(gateway, demo)
    _a_match_far_below_the_first_is_shown_without_its_schema(gateway, demo)


def _every_demo_request_is_answered_with_its_tool_first_and_confidently(gateway, demo):
    async def main():
        async with mcp_client(gateway, demo["token"]) as client:
            return [
                (await client.call_tool("tool_search", {"query": request_text})).structured_content
                for request_text, _ in DEMO_REQUESTS
            ]

    wrong = []
    for (request_text, tool_id), answer in zip(DEMO_REQUESTS, run(main), strict=True):
        found = [match["tool_id"] for match in answer["matches"]]
        if (answer["confidence"], found[:1]) != ("high", [tool_id]):
            wrong.append((request_text, tool_id, answer["confidence"], found))
        elif "inputSchema" not in answer["matches"][0]:  # callable at once: no tool_inspect turn
            wrong.append((request_text, tool_id, "first match without its inputSchema", found))
    assert not wrong, wrong


def test_a_request_no_demo_tool_handles_is_not_answered_with_confidence(gateway, member_on, tmp_path, monkeypatch):
    """The demo as ``manage.py demo`` registers it (time, git, memory, everything; no filesystem server). "list files
    in a directory" was answered high with git::git_branch first: its coverage of the request was the verb "list"
    alone (bench/NOTES-agentux20.md). An agent trusts high and calls a tool that does something else. A request
    for files or directories is still served (a ranking to check), never high; requests the demo's tools do
    handle stay high, with their tool among the matches shown with its schema.

    A request that only reads is answered by a read first, or served low (bench/NOTES-agentux21.md): "list all
    entities in memory" led with memory::delete_entities, high ("entities" is in its name, not in the reads'), and
    "show the commit history of the repo" with git_show, git_log second (its name's "log" read as a write).

    "read README.md" and "read my emails" were answered high with memory::read_graph alone (no input, the whole
    knowledge graph) on the verb "read" (bench/NOTES-agentux22.md): low now; a tool taking no input stays high
    for a request that names what it does ("read the knowledge graph", "generate a tiny image").

    "delete my account" was answered high with memory::delete_entities on the verb "delete" alone, and "list my
    GitHub issues" with git::git_branch on "list" and the "git" of "github" (bench/NOTES-agentux23.md): low now;
    "delete the relation between Alice and Acme" stays high with delete_relations.

    "erase my history" was answered high with git::git_log, "edit the commit message" and "delete the last commit"
    with git::git_show: reads (readOnlyHint) that change nothing (bench/NOTES-agentux24.md); low now. So were "undo my
    last commit" and "revert the last commit" (git_show), and "forget everything you know about Dana" with
    memory::open_nodes (``ranking._TAKE_BACK``); delete_entities, which would forget, is among the matches.

    From an agent's sweep of the demo (bench/NOTES-agentux26.md), each with the tool it now gets first: "what time is
    it in Tokyo" led with convert_time, high (the 'Asia/Tokyo' of its sample values, and no "now" in either time
    tool's text); "what day of the week is it" with search_nodes (get_current_time gives the day of the week);
    "keep in mind that Dana drinks green tea" with git_reset (its curated "the files keep their changes"); "what
    files did I change but not commit yet" with git_show, high (its example "what did the latest commit
    change")."""
    from catalog.models import Server
    from catalog.services.sync import server_sync

    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "memory.jsonl"))  # the demo's setdefault leaves it
    servers = Command()._register_servers(tmp_path)
    assert sorted(server.slug for server in servers) == ["everything", "git", "memory", "time"]
    for server in servers:
        assert server_sync(server_pk=server.pk, trigger="test").status == "success", server.slug
    Command()._curate()
    token = member_on(*Server.objects.all(), index=True).token
    unhandled = ["list files in a directory", "list the files here", "what files are in this folder"]
    unhandled += ["read README.md", "read my emails", "delete my account", "list my GitHub issues"]
    unhandled += ["erase my history", "edit the commit message", "delete the last commit"]
    unhandled += ["undo my last commit", "revert the last commit", "forget everything you know about Dana"]
    first_tool = {
        "what time is it in Tokyo": ("time::get_current_time", "high"),
        "what day of the week is it": ("time::get_current_time", "high"),
        "keep in mind that Dana drinks green tea": ("memory::create_entities", None),  # low: its fit is weak
        "what files did I change but not commit yet": ("git::git_status", None),  # low: git_show a near second
    }
    reads = {
        "list all entities in memory": {"memory::read_graph", "memory::search_nodes", "memory::open_nodes"},
        "show the commit history of the repo": {"git::git_log"},
    }
    handled = {
        "what time is it in Tokyo": "time::get_current_time",
        "show the commit history of the repo": "git::git_log",
        "remember that Alice likes tea": "memory::create_entities",
        "which branch am I on": "git::git_branch",
        "read the knowledge graph": "memory::read_graph",
        "generate a tiny image": "everything::get-tiny-image",
        "delete the relation between Alice and Acme": "memory::delete_relations",
    }

    async def main():
        async with mcp_client(gateway, token) as client:
            return {
                query: (await client.call_tool("tool_search", {"query": query})).structured_content
                for query in dict.fromkeys([*unhandled, *handled, *reads, *first_tool])
            }

    answers = run(main)
    for query in unhandled:
        answer = answers[query]
        assert (answer["confidence"], bool(answer["matches"])) == ("low", True), (query, answer["matches"][:1])
    for query, tool_id in handled.items():
        answer = answers[query]
        shown = [match["tool_id"] for match in answer["matches"] if "inputSchema" in match]
        assert answer["confidence"] == "high" and tool_id in shown[:2], (query, shown)
    assert "memory::delete_entities" in [match["tool_id"] for match in answers[unhandled[-1]]["matches"]]
    for query, (tool_id, confidence) in first_tool.items():
        answer = answers[query]
        assert answer["matches"][0]["tool_id"] == tool_id, (query, answer["matches"][:2])
        assert confidence in (None, answer["confidence"]), (query, answer["confidence"])
    for query, tools in reads.items():
        answer = answers[query]
        first = answer["matches"][0]["tool_id"]
        assert first in tools or answer["confidence"] == "low", (query, first, answer["confidence"])  # high: git_log


def _what_the_last_commit_changed_takes_one_search_and_one_call(gateway, demo):
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


def _a_match_far_below_the_first_is_shown_without_its_schema(gateway, demo):
    """ "add two numbers": get-sum leads; memory::add_observations and git::git_add match the word "add" alone and
    were each shown with its whole inputSchema (and their servers' notes): about 200 of the answer's 343 tokens,
    580 once get-sum's curation lifted everything's other tools into the five. They keep their places, with their
    key inputs only."""
    from mcpgateway.services.discovery import SCHEMAS_CUT

    async def main():
        async with mcp_client(gateway, demo["token"]) as client:
            return await client.call_tool("tool_search", {"query": "add two numbers"})

    answer = run(main)
    matches = {match["tool_id"]: match for match in answer.structured_content["matches"]}
    assert answer.structured_content["matches"][0]["tool_id"] == "everything::get-sum"
    assert "inputSchema" in matches["everything::get-sum"]
    assert "memory::add_observations" in matches and "inputSchema" not in matches["memory::add_observations"]
    assert all("inputSchema" not in match for tool_id, match in matches.items() if tool_id.startswith("git::"))
    assert SCHEMAS_CUT in text_of(answer) and "Server memory:" not in text_of(answer)


def test_an_output_schema_that_is_the_input_schema_is_said_once(gateway, member_on, memory_server, settings):
    """server-memory's create_entities and create_relations answer with what they created: their outputSchema is
    their inputSchema again, about 100 tokens of an inspect answer of about 315 that told a model nothing new
    (agentux17). tool_inspect says so in a few words; an outputSchema of its own (search_nodes': the entities and
    relations found) is shown whole, and the direct listing keeps every schema as the upstream declared it."""
    from mcpgateway.services.discovery import OUTPUT_AS_INPUT

    settings.SCOUT_MCP_EXPOSURE = "direct"  # tools/list lists the tools themselves; the meta-tools answer as ever
    token = member_on(memory_server).token
    ids = ["memory::create_entities", "memory::create_relations", "memory::search_nodes"]

    async def main():
        async with mcp_client(gateway, token) as client:
            return await client.call_tool("tool_inspect", {"tool_ids": ids}), await client.list_tools()

    inspected, listed = run(main)
    tools = {tool["tool_id"]: tool for tool in inspected.structured_content["tools"]}
    for tool_id in ids[:2]:
        assert tools[tool_id]["outputSchema"] == OUTPUT_AS_INPUT
        assert tools[tool_id]["inputSchema"]["properties"]  # said once, here
    assert text_of(inspected).count(f'"outputSchema":"{OUTPUT_AS_INPUT}"') == 2
    assert set(tools["memory::search_nodes"]["outputSchema"]["properties"]) == {"entities", "relations"}
    direct = {tool.name: tool for tool in listed.tools}
    assert direct["memory__create_entities"].output_schema["properties"]["entities"]["type"] == "array"


def test_a_misnamed_argument_of_a_closed_schema_is_said_once(gateway, member_on, memory_server):
    """server-memory's search_nodes called with "name" instead of "query": its schema forbids other properties, and
    the answer said so twice ("missing required property query, and has properties the schema does not name (its
    properties: query); arguments: has properties the schema does not allow (allowed: query)", agentux17). Once now,
    with query's schema, and the call that follows the answer works."""
    token = member_on(memory_server).token

    async def main():
        async with mcp_client(gateway, token) as client:
            wrong = await client.call_tool(
                "execute_tool", {"tool_id": "memory::search_nodes", "arguments": {"name": "Alice"}}
            )
            fixed = await client.call_tool(
                "execute_tool", {"tool_id": "memory::search_nodes", "arguments": {"query": "Alice"}}
            )
            return wrong, fixed

    wrong, fixed = run(main)
    text = text_of(wrong)
    assert wrong.is_error and text.count("query") >= 2, text  # the missing one named, its schema shown
    assert "missing required property query" in text and "(allowed: query)" in text, text
    assert "does not name" not in text, text
    assert not fixed.is_error, text_of(fixed)
