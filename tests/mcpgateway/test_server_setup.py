"""How the gateway's MCP server is set up: the SDK's Mcp-Param header check keeps its force where a tool
declares such headers (x-mcp-header)."""

from __future__ import annotations

from typing import Annotated

from mcp.shared.inbound import validate_mcp_param_headers
from pydantic import Field

from mcpgateway.server import build_mcp_server


def _region_report(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    return region


def test_a_tool_declaring_param_headers_still_has_them_checked():
    server = build_mcp_server()
    server.add_tool(_region_report, name="region_report")
    lookup = server._lowlevel_server.get_tool_input_schema  # what the SDK's HTTP entry calls before dispatch
    schema = lookup("region_report")
    assert schema is not None
    mismatch = validate_mcp_param_headers(schema, {"region": "eu"}, {"mcp-param-region": "us"})
    assert mismatch is not None and "Mcp-Param-Region" in mismatch.message
    assert validate_mcp_param_headers(schema, {"region": "eu"}, {"mcp-param-region": "eu"}) is None
