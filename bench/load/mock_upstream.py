"""A Streamable HTTP MCP server for the load suite: ``--tools`` read-only tools that answer after ``--latency``
seconds (the 50 ms mock upstream of L1, or the 30 s one of L4). Loopback only.

    .venv/bin/python bench/load/mock_upstream.py --port 9001 --slug mock --tools 100 --latency 0.05
"""

from __future__ import annotations

import argparse

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

# Distinct words per tool, so each tool is the best match for its own query (the load's search mix).
SUBJECTS = [
    "invoice",
    "shipment",
    "ticket",
    "payroll",
    "calendar",
    "inventory",
    "contract",
    "budget",
    "forecast",
    "vendor",
    "customer",
    "warehouse",
    "timesheet",
    "expense",
    "campaign",
    "incident",
    "release",
    "backup",
    "firewall",
    "license",
]
VERBS = ["list", "summarise", "export", "audit", "count"]


def tool_words(index: int) -> tuple[str, str]:
    return VERBS[index % len(VERBS)], SUBJECTS[(index // len(VERBS)) % len(SUBJECTS)]


def build(slug: str, tools: int, latency: float) -> MCPServer:
    server = MCPServer(slug)
    read_only = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
    for index in range(tools):
        verb, subject = tool_words(index)

        async def work(region: str = "eu") -> str:
            await anyio.sleep(latency)
            return f"done {region}"

        server.add_tool(
            work,
            name=f"{verb}_{subject}_{index:03d}",
            description=f"{verb.capitalize()} the {subject} records of one region (batch {index:03d}).",
            annotations=read_only,
        )
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--slug", default="mock")
    parser.add_argument("--tools", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args()
    app = build(args.slug, args.tools, args.latency).streamable_http_app(stateless_http=True)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
