"""An independent client: the MCP Inspector CLI (0.21.x, on node 22) against the live gateway with a token."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from .conftest import NODE_BIN, gateway_db

pytestmark = [gateway_db, pytest.mark.slow]
INSPECTOR = NODE_BIN / "mcp-inspector"


@pytest.fixture
def inspector_env() -> dict[str, str]:
    if not INSPECTOR.exists():
        if os.environ.get("SCOUT_REQUIRE_NODE_TOOLS"):
            pytest.fail(f"{INSPECTOR} is missing and SCOUT_REQUIRE_NODE_TOOLS is set: run `make install`")
        pytest.skip(f"{INSPECTOR} is missing: run `make install` to get the MCP Inspector and node 22")
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    node = shutil.which("node", path=env["PATH"])
    version = subprocess.run([node, "--version"], capture_output=True, text=True, env=env, check=True).stdout
    assert int(version.strip().lstrip("v").split(".")[0]) >= 22, f"the Inspector needs node 22, found {version}"
    return env


def _inspect(env: dict[str, str], url: str, token: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(INSPECTOR), "--cli", url, "--transport", "http"]
    if token is not None:
        command += ["--header", f"Authorization: Bearer {token}"]
    return subprocess.run(command + list(args), capture_output=True, text=True, env=env, timeout=120)


def _call(env: dict[str, str], url: str, token: str, tool: str, *tool_args: str) -> subprocess.CompletedProcess[str]:
    """``tools/call`` of ``tool`` with each ``name=value`` of ``tool_args``."""
    arguments = [part for argument in tool_args for part in ("--tool-arg", argument)]
    return _inspect(env, url, token, "--method", "tools/call", "--tool-name", tool, *arguments)


def test_inspector_lists_tools_and_calls_tool_search_with_a_token(gateway, member_on, time_server, inspector_env):
    token = member_on(time_server, index=True).token
    url = f"{gateway.url}/mcp"

    listed = _inspect(inspector_env, url, token, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    names = {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
    assert names == {"tool_search", "tool_inspect", "execute_tool"}

    called = _inspect(
        inspector_env,
        url,
        token,
        "--method",
        "tools/call",
        "--tool-name",
        "tool_search",
        "--tool-arg",
        "query=current time in a timezone",
    )
    assert called.returncode == 0, called.stderr[-2000:]
    result = json.loads(called.stdout)
    assert result["structuredContent"]["matches"][0]["tool_id"] == "time::get_current_time"

    refused = _inspect(inspector_env, url, None, "--method", "tools/list")
    assert refused.returncode != 0
    assert "tool_search" not in refused.stdout


def test_inspector_reads_a_meta_tools_error_as_the_tool_error_it_is(gateway, member_on, time_server, inspector_env):
    """The TypeScript SDK checks a result's structured content against the tool's outputSchema even when isError:
    tool_inspect's answer to an unknown id ({"unknown_tool": true}) satisfies it, so the Inspector shows the text
    the model corrects itself with, not "MCP error -32602: Structured content does not match"."""
    token = member_on(time_server, index=True).token

    def inspect_ids(ids: list[str]) -> dict:
        called = _call(inspector_env, f"{gateway.url}/mcp", token, "tool_inspect", f"tool_ids={json.dumps(ids)}")
        assert called.returncode == 0, (called.stdout + called.stderr)[-2000:]
        return json.loads(called.stdout)

    result = inspect_ids(["time::nope", "time::nada"])
    assert result["isError"] is True and result["structuredContent"] == {"unknown_tool": True}
    assert result["content"][0]["text"].startswith('Unknown tool: tool_ids[0] "time::nope"; tool_ids[1] "time::nada".')
    # One unknown id among several: the other's definition comes back too, and the answer still fits the outputSchema.
    result = inspect_ids(["time::get_current_time", "time::nope"])
    assert result["isError"] is False and result["structuredContent"]["unknown_tool"] is True
    assert [tool["tool_id"] for tool in result["structuredContent"]["tools"]] == ["time::get_current_time"]
    assert result["content"][-1]["text"].startswith('Unknown tool: tool_ids[1] "time::nope".')


def test_inspector_reads_a_listed_tools_gateway_error_as_the_tool_error_it_is(
    gateway, member_on, calc_server, inspector_env
):
    """agentux19: a tool listed directly (no index, or pinned) with an outputSchema (calc__add's {"result": integer}):
    the gateway's own error answers carry structured content of their own ({"invalid_arguments": true}, an approval's
    id), which the TypeScript SDK checked against that schema even when isError, so the Inspector showed "MCP error
    -32602: Structured content does not match the tool's output schema" and not the text the model fixes its call
    with. Such an error now goes without structured content."""
    from catalog.models import Tool

    from .conftest import drop_index

    token = member_on(Tool.objects.get(tool_id="calc::add")).token
    drop_index()
    called = _call(inspector_env, f"{gateway.url}/mcp", token, "calc__add", "a=one", "b=2")
    assert called.returncode == 0, (called.stdout + called.stderr)[-2000:]
    result = json.loads(called.stdout)
    assert result["isError"] is True and "structuredContent" not in result
    assert result["content"][0]["text"].startswith("Invalid arguments: arguments.a: must be of type integer.")
