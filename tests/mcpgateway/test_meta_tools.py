"""tool_search, tool_inspect and execute_tool over Streamable HTTP against real upstream servers."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcpgateway.constants import UNKNOWN_TOOL_MESSAGE

from .conftest import (
    LEGACY,
    MODERN,
    PROTOCOL_MODES,
    classify_low_risk,
    gateway_db,
    mcp_client,
    run,
    run_checks,
)

pytestmark = [gateway_db, pytest.mark.slow]
META = {"tool_search", "tool_inspect", "execute_tool"}


@pytest.fixture
def world(gateway, member_on, time_server, calc_server, memory_server) -> dict[str, Any]:
    member, token = member_on(time_server, calc_server, memory_server, index=True)
    return {"member": member, "token": token, "calc": calc_server}


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _lists_the_meta_tools_with_descriptions_for_models(gateway, world, mode):
    async def main():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in run(main)}
    assert set(tools) == META
    assert "tool_search" in tools["execute_tool"].description and "guess" in tools["execute_tool"].description
    assert "first" in tools["tool_search"].description
    assert tools["execute_tool"].input_schema["required"] == ["tool_id"]
    assert set(tools["tool_search"].input_schema["properties"]["scope"]["enum"]) == {"all", "my_servers"}
    # Every parameter says what it is for (a model cannot guess what "my_servers" means).
    undescribed = [
        f"{name}.{param}"
        for name, tool in tools.items()
        for param, spec in tool.input_schema["properties"].items()
        if not spec.get("description")
    ]
    assert undescribed == []
    assert "not via groups" in tools["tool_search"].input_schema["properties"]["scope"]["description"]


def _search_then_execute_against_the_time_server(gateway, world, mode):
    async def main():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            found = await client.call_tool("tool_search", {"query": "what is the current time in a timezone"})
            ran = await client.call_tool(
                "execute_tool", {"tool_id": "time::get_current_time", "arguments": {"timezone": "Europe/Paris"}}
            )
            return found, ran

    found, ran = run(main)
    assert not found.is_error
    matches = found.structured_content["matches"]
    assert matches[0]["tool_id"] == "time::get_current_time"
    first = matches[0]
    assert first["server"] == "time" and first["summary"] and first["why_matched"]
    assert first["inputSchema"]["properties"]["timezone"]
    assert {"name": "timezone", "type": "string", "required": True} in first["key_inputs"]
    assert first["risk"] and first["operation_class"] == "read"
    assert found.structured_content["degraded"] is False
    text = text_of(found)
    assert "time::get_current_time" in text and "inputSchema" in text
    assert "input_schema" not in json.dumps(found.structured_content)  # MCP's one spelling, text and JSON alike
    assert not ran.is_error
    assert json.loads(text_of(ran))["timezone"] == "Europe/Paris"


def _execute_returns_a_clean_upstream_result_unchanged_but_marked_as_tool_output(gateway, world, mode):
    async def gateway_call():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            return await client.call_tool("execute_tool", {"tool_id": "calc::add", "arguments": {"a": 2, "b": 40}})

    async def direct_call():
        async with Client(streamable_http_client(world["calc"].url, http_client=httpx2.AsyncClient())) as c:
            return await c.call_tool("add", {"a": 2, "b": 40})

    via_gateway, direct = run(gateway_call), run(direct_call)
    from mcpgateway.constants import OUTPUT_META_KEY

    # Clean output passes through the output policy untouched; only the untrusted-output marker is added, and
    # the server identity MCP stamps on a result is the gateway's (the upstream's is dropped with it).
    marker = (via_gateway.meta or {}).pop(OUTPUT_META_KEY)
    assert marker == {"source": "calc::add", "trust": "untrusted", "kind": "tool-output"}
    server_info = "io.modelcontextprotocol/serverInfo"
    assert (via_gateway.meta or {}).pop(server_info)["name"] == "scout"
    assert (direct.meta or {}).pop(server_info)["name"] == "calc"
    assert via_gateway.model_dump(exclude_none=True) == direct.model_dump(exclude_none=True)
    assert via_gateway.structured_content == {"result": 42}


def _inspect_returns_full_definitions(gateway, world, mode):
    async def main():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            return await client.call_tool("tool_inspect", {"tool_ids": ["time::convert_time", "calc::add"]})

    result = run(main)
    tools = {tool["tool_id"]: tool for tool in result.structured_content["tools"]}
    assert set(tools) == {"time::convert_time", "calc::add"}
    assert set(tools["time::convert_time"]["inputSchema"]["required"]) == {
        "source_timezone",
        "time",
        "target_timezone",
    }
    add = tools["calc::add"]
    assert add["summary"] == "Add two integers and return the sum." and "description" not in add  # said once
    # The whole inputSchema is there: its first few parameters are not listed again as key_inputs (tool_search
    # answers keep them; a low-confidence one has no schema).
    assert all("key_inputs" not in tool for tool in tools.values())
    assert "key_inputs" not in result.content[0].text
    assert add["annotations"]["readOnlyHint"] is True
    # The upstream's structured-output schema (an int result) is served as it declared it.
    assert add["outputSchema"]["properties"]["result"]["type"] == "integer"
    assert add["outputSchema"]["required"] == ["result"]
    # What the model reads is that JSON, with MCP's names for MCP's fields (its search answer says inputSchema).
    assert '"inputSchema":' in result.content[0].text and '"outputSchema":' in result.content[0].text
    assert "input_schema" not in result.content[0].text and "output_schema" not in result.content[0].text


def test_execute_against_the_npm_memory_server(gateway, world, admin_user):
    from catalog.models import Tool

    # An admin classifies the graph writes as low-risk, so this member may run them without an approval.
    for tool in Tool.objects.filter(server__slug="memory"):
        classify_low_risk(tool, actor=admin_user, operation_class="write", reversibility="reversible")
    entity = {"name": "Scout", "entityType": "project", "observations": ["governed MCP gateway"]}

    async def main():
        async with mcp_client(gateway, world["token"], mode=LEGACY) as client:
            created = await client.call_tool(
                "execute_tool", {"tool_id": "memory::create_entities", "arguments": {"entities": [entity]}}
            )
            graph = await client.call_tool("execute_tool", {"tool_id": "memory::read_graph", "arguments": {}})
            return created, graph

    created, graph = run(main)
    assert not created.is_error, text_of(created)
    assert "governed MCP gateway" in text_of(graph)


def test_invalid_arguments_name_the_path_and_never_reach_upstream(gateway, world, http_upstream):
    from governance.models import AuditEvent

    async def main():
        async with mcp_client(gateway, world["token"]) as client:
            wrong_type = await client.call_tool(
                "execute_tool", {"tool_id": "calc::add", "arguments": {"a": "x", "b": 1}}
            )
            missing = await client.call_tool("execute_tool", {"tool_id": "calc::add", "arguments": {"a": 1}})
            extra = await client.call_tool(
                "execute_tool", {"tool_id": "time::get_current_time", "arguments": {"timezone": "UTC", "evil": 1}}
            )
            return wrong_type, missing, extra

    wrong_type, missing, extra = run(main)
    assert wrong_type.is_error and "arguments.a" in text_of(wrong_type) and "integer" in text_of(wrong_type)
    assert missing.is_error and "missing required property b" in text_of(missing)
    if extra.is_error:  # the time server's schema forbids extra properties only if it says so
        assert "evil" not in text_of(extra)
    denied = AuditEvent.objects.filter(event_type="execution", outcome="denied", tool__tool_id="calc::add")
    assert denied.count() == 2
    assert not AuditEvent.objects.filter(event_type="execution", outcome="success", tool__tool_id="calc::add").exists()


def _search_edge_cases_are_bounded(gateway, world, mode):
    async def main():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            results = {}
            for label, args in {
                "empty": {"query": "   "},
                "huge": {"query": "time " * 20_000},
                "star": {"query": "*"},
                "punct": {"query": '")}{'},
                "meta": {"query": "(a|b)* .+? {user(id:1){name}}"},
                "negative_k": {"query": "current time", "top_k": -1},
                "huge_k": {"query": "current time", "top_k": 1_000_000_000},
            }.items():
                results[label] = await client.call_tool("tool_search", args)
            return results

    results = run(main)
    assert results["empty"].is_error
    assert results["huge"].is_error and "characters" in text_of(results["huge"])
    for label in ("star", "punct", "meta"):
        assert "Traceback" not in text_of(results[label]) and "Error executing" not in text_of(results[label])
    assert len(results["negative_k"].structured_content["matches"]) <= 1
    assert len(results["huge_k"].structured_content["matches"]) <= 20


def _a_clamped_top_k_is_said_in_the_answer(gateway, world, mode):
    """top_k outside 1-20 is clamped, and the answer says so (a line under the first, and ``notes``), without
    echoing the number asked for; an answer within the limits has no such line and no such note (the note on
    matches shown without their schema may follow)."""
    from mcpgateway.services.discovery import SCHEMAS_CUT, TOP_K_CAPPED, TOP_K_RAISED

    async def main():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            return {
                top_k: await client.call_tool("tool_search", {"query": "current time", "top_k": top_k})
                for top_k in (987_654_321, 21, 20, 0)
            }

    results = run(main)
    for top_k, note in ((987_654_321, TOP_K_CAPPED), (21, TOP_K_CAPPED), (0, TOP_K_RAISED)):
        result = results[top_k]
        assert not result.is_error and result.structured_content["matches"], top_k
        assert text_of(result).split("\n")[1] == note, top_k
        assert [line for line in result.structured_content["notes"] if line != SCHEMAS_CUT] == [note], top_k
        assert "987654321" not in text_of(result) and "987_654_321" not in text_of(result)
    assert TOP_K_CAPPED == "top_k is above the maximum: capped at 20."
    within = results[20]
    assert "top_k" not in text_of(within)
    assert all(line == SCHEMAS_CUT for line in within.structured_content.get("notes", []))


def test_meta_tools_audit_discovery_and_execution(gateway, world):
    from governance.models import AuditEvent

    async def main():
        async with mcp_client(gateway, world["token"]) as client:
            await client.call_tool("tool_search", {"query": "add two numbers"})
            await client.call_tool("execute_tool", {"tool_id": "calc::add", "arguments": {"a": 1, "b": 2}})

    run(main)
    search = AuditEvent.objects.filter(event_type="discovery", user=world["member"]).first()
    assert search is not None and search.payload["meta_tool"] == "tool_search"
    execution = AuditEvent.objects.get(event_type="execution", outcome="success")
    assert execution.tool_ref == "calc::add" and execution.user == world["member"]
    assert execution.token_ref.startswith("tok-") and execution.payload["arguments_digest"]


def test_client_meta_identity_is_ignored(gateway, world):
    from governance.models import AuditEvent

    async def main():
        async with mcp_client(gateway, world["token"]) as client:
            return await client.session.call_tool(
                "execute_tool",
                {"tool_id": "calc::add", "arguments": {"a": 1, "b": 1}},
                meta={"subject": "gw_admin", "tenant": "other", "agent": "root", "delegationChain": ["x"]},
            )

    run(main)
    event = AuditEvent.objects.get(event_type="execution", outcome="success")
    assert event.human_subject == "gw_member" and event.tenant == "" and event.agent == ""
    assert "x" not in event.delegation_chain


def _an_unknown_tool_id_is_a_tool_error_the_model_reads_and_an_unknown_meta_tool_a_protocol_error(gateway, world, mode):
    """MCP: a tool's own failure (here, a tool_id argument naming no tool) is a result with isError, which hosts
    hand to the model so it can correct itself; an unknown name in tools/call is a JSON-RPC error. Neither echoes
    the id."""

    async def main():
        async with mcp_client(gateway, world["token"], mode=mode) as client:
            executed = await client.call_tool("execute_tool", {"tool_id": "nope::<script>", "arguments": {}})
            inspected = await client.call_tool("tool_inspect", {"tool_ids": ["nope::<script>"]})
            with pytest.raises(MCPError) as caught:
                await client.call_tool("tool_serch", {"query": "<script>"})
            with pytest.raises(MCPError) as by_name:  # a found tool_id called by name, not through execute_tool
                await client.call_tool("calc::add", {"a": 1, "b": 1})
            return executed, inspected, caught.value, by_name.value

    executed, inspected, misnamed, by_name = run(main)
    for result in (executed, inspected):
        assert result.is_error and text_of(result) == UNKNOWN_TOOL_MESSAGE
        assert result.structured_content == {"unknown_tool": True}
        assert "<script>" not in str(result.model_dump())
    # Both names are close to ones the caller may use, which the error names (test_did_you_mean.py).
    assert misnamed.code == -32602 and misnamed.message == "Unknown tool name. Did you mean tool_search?"
    assert by_name.code == -32602 and 'Run it with execute_tool: tool_id "calc::add"' in by_name.message
    assert "<script>" not in str(misnamed.data or "")


def test_execute_against_the_git_server(gateway, member_on, tmp_path):
    import subprocess

    from .conftest import sync_server

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text("hello\n")
    git_server = sync_server(slug="git", transport="stdio", command="mcp-server-git", args=["--repository", str(repo)])
    token = member_on(git_server).token

    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            return await client.call_tool(
                "execute_tool", {"tool_id": "git::git_status", "arguments": {"repo_path": str(repo)}}
            )

    result = run(main)
    assert not result.is_error, text_of(result)
    assert "README.md" in text_of(result)


# Checks that change nothing another reads (listings, searches, inspections, unknown ids; the successful calls
# last: a call after a search that returned the tool teaches the tool that request, and writes the one execution
# event the audit checks below look for): one world for all of them
# (test_what_a_member_of_time_calc_and_memory_reads_on_one_world).
READ_ONLY_CHECKS = [
    (_lists_the_meta_tools_with_descriptions_for_models, PROTOCOL_MODES),
    (_inspect_returns_full_definitions, [LEGACY]),
    (_search_edge_cases_are_bounded, [MODERN]),
    (_a_clamped_top_k_is_said_in_the_answer, [MODERN]),
    (_an_unknown_tool_id_is_a_tool_error_the_model_reads_and_an_unknown_meta_tool_a_protocol_error, [LEGACY]),
    (_search_then_execute_against_the_time_server, PROTOCOL_MODES),
    (_execute_returns_a_clean_upstream_result_unchanged_but_marked_as_tool_output, [MODERN]),
]


def test_what_a_member_of_time_calc_and_memory_reads_on_one_world(gateway, world, subtests):
    """Every check of READ_ONLY_CHECKS on one synced, indexed world (time, calc and memory: its setup and the time
    server's start were most of each check's time when each had its own), each judged on its own (a subtest), in
    the protocol modes it ran in before."""
    run_checks(subtests, READ_ONLY_CHECKS, gateway, world)
