"""A stdio MCP server that quotes the token Scout gave it (LEAKY_TOKEN), as careless servers do: in an error's
message, and in a record (whole, and split by an invisible character)."""

import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("leaky")
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)


def _token() -> str:
    return os.environ.get("LEAKY_TOKEN", "")


@server.tool(annotations=READ_ONLY)
def refused() -> str:
    """Fail as a service refusing the server's own credential, quoting it."""
    raise ToolError(f"the service refused the request (Authorization: Bearer {_token()})")


@server.tool(annotations=READ_ONLY)
def whoami() -> dict[str, str]:
    """Answer with the credential the server runs with."""
    token = _token()
    return {"token": token, "hint": token[:6] + "\u200b" + token[6:], "user": "leaky-bot"}


if __name__ == "__main__":
    server.run("stdio")
