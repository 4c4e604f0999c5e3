"""A Streamable HTTP upstream that stopped while the gateway's warm session to it sat idle.

Over HTTP with a live gateway and a real MCPServer upstream: nothing tells the gateway that the server went away
between two calls (a stdio server's end of output does, ``UpstreamSession.ended``). The next call was sent, the
refused request ended the SDK's session, and the agent read "the server stopped during the call" (for a write:
it may have run), a crash counted against the server.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import ThreadedUvicorn, build_http_upstream, gateway_db, mcp_client, run, sync_server

pytestmark = [gateway_db, pytest.mark.slow]


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _upstream(port: int | None = None) -> ThreadedUvicorn:
    upstream = ThreadedUvicorn(build_http_upstream())
    if port is not None:  # the same address, as a redeployed or restarted server comes back
        upstream.port = upstream.server.config.port = port
    return upstream.start()


@pytest.fixture
def upstream() -> Any:
    started = [_upstream()]
    yield started
    for server in started:
        server.stop()


@pytest.fixture
def token(gateway, member_on, upstream) -> str:
    from catalog.models import Tool

    sync_server(slug="calc", transport="http", url=f"{upstream[0].url}/mcp")
    return member_on(Tool.objects.get(tool_id="calc::add")).token


def _add(client: Any, a: int) -> Any:
    return client.call_tool("execute_tool", {"tool_id": "calc::add", "arguments": {"a": a, "b": 1}})


def test_a_server_that_stopped_while_idle_is_said_to_have_run_nothing(gateway, token, upstream, settings):
    """agentux19: a server gone while the session sat idle is found before the call is sent: the agent is told the
    call did not run (it may retry), not that it may have."""
    settings.SCOUT_UPSTREAM_IDLE_PROBE_SECONDS = 0.0  # this test's idle time is short

    async def main() -> tuple[Any, Any]:
        async with mcp_client(gateway, token) as client:
            first = await _add(client, 1)
            upstream[0].stop()
            return first, await _add(client, 2)

    first, gone = run(main)
    assert not first.is_error, _text(first)
    assert gone.is_error and gone.structured_content == {"upstream_failure": "refused"}, _text(gone)
    assert _text(gone).startswith("The tool's server could not be reached, so the call was not sent")
