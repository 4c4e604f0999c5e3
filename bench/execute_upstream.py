"""A fast upstream MCP server for bench/bench_execute.py: one read-only tool that answers at once.

    python bench/execute_upstream.py stdio
    python bench/execute_upstream.py http PORT      (Streamable HTTP at http://127.0.0.1:PORT/mcp)

``lookup_order`` takes an order id (a string with a ``pattern``, so the gateway's argument check runs a regular
expression) and a limit, and returns a short text: the upstream's own work is as small as a tool's can be, so what
a call through Scout costs beyond a direct call is Scout's.
"""

import sys
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

server = MCPServer("benchorders")
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)


@server.tool(annotations=READ_ONLY)
def lookup_order(
    order_id: Annotated[str, Field(pattern=r"^ORD-[0-9]{4,10}$", description="The order id, e.g. ORD-12345")],
    limit: Annotated[int, Field(ge=1, le=100, description="How many lines to show")] = 5,
) -> str:
    """Look up one order by its id and show its status lines (read-only)."""
    return f"order {order_id}: shipped; {limit} lines"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        import uvicorn

        app = server.streamable_http_app(stateless_http=False)
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False)
    else:
        server.run("stdio")
