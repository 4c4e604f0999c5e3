"""What a model is told when a call's upstream fails, over HTTP against real stdio servers: whether the call may have
run decides what it may do next."""

from __future__ import annotations

import json

import pytest

from tests.catalog.servers.fixtures import good_tool

from .conftest import (
    classify_low_risk,
    drop_index,
    gateway_db,
    mcp_client,
    run,
    sync_scripted_server,
)
from .test_agent_view import text_of

pytestmark = [gateway_db, pytest.mark.slow]


@pytest.mark.parametrize("operation_class", ["write", "read"])
def test_an_answer_that_is_no_result_may_have_run_and_says_so(
    gateway, member_on, admin_user, tmp_path, operation_class
):
    """The tool's server answers the call with a JSON-RPC error (an MCP protocol error, not a tool result). It was
    told "The tool's server could not be reached; try again later.": false, and for a write that may have taken
    effect, an invitation to do it twice."""
    reply = {"jsonrpc": "2.0", "id": "ID", "error": {"code": -32603, "message": "disk full"}}
    script = {"pages": [[good_tool("store")]], "call_reply": json.dumps(reply).replace('"ID"', "ID")}
    server = sync_scripted_server(tmp_path, "store", script)
    tool = server.tools.get()
    classify_low_risk(tool, actor=admin_user, operation_class=operation_class, reversibility="reversible")
    token = member_on(server).token
    drop_index()

    async def main():
        async with mcp_client(gateway, token) as client:
            return await client.call_tool("execute_tool", {"tool_id": "store::store", "arguments": {}})

    result = run(main)
    text = text_of(result)
    assert result.is_error and result.structured_content == {"upstream_failure": "protocol"}, text
    assert text.startswith("The tool's server answered the call with something that is not a valid MCP result.")
    assert "could not be reached" not in text and "disk full" not in text
    if operation_class == "write":
        assert text.endswith("The call may or may not have taken effect; check before trying again."), text
    else:
        assert "This tool only reads (Scout's classification), so the call changed nothing" in text, text
