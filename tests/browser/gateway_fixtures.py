"""The live gateway fixtures (uvicorn serving Django and /mcp) for browser journeys: the browser and the MCP
client talk to the same server."""

from tests.mcpgateway.conftest import (  # noqa: F401 - fixtures
    access_log,
    admin_user,
    faulty_call_log,
    faulty_server,
    gateway,
    live_gateway,
)
