"""A Streamable HTTP upstream that stopped, or restarted, while the gateway's warm session to it sat idle.

Over HTTP with a live gateway and a real MCPServer upstream: nothing tells the gateway that the server went away
between two calls (a stdio server's end of output does, ``UpstreamSession.ended``). The next call was sent, the
refused request ended the SDK's session, and the agent read "the server stopped during the call" (for a write:
it may have run), a crash counted against the server. A 2025-11-25 server that came back (restarted) answered the
next call 404 for the session it had forgotten, and the call failed as a protocol error.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.catalog.servers.http_mcp import SessionFront, serve_front

from .conftest import ThreadedUvicorn, build_http_upstream, gateway_db, mcp_client, run, sync_server

pytestmark = [gateway_db, pytest.mark.slow]


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _upstream(port: int | None = None, app: Any = None) -> ThreadedUvicorn:
    upstream = ThreadedUvicorn(app or build_http_upstream())
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


def _counting_upstream(calls: list[tuple[int, int]]) -> Any:
    """calc's ``add``, noting each call it runs in ``calls``."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    upstream = MCPServer("calc")

    @upstream.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False))
    def add(a: int, b: int) -> int:
        """Add two integers and return the sum."""
        calls.append((a, b))
        return a + b

    return upstream.streamable_http_app(stateless_http=False)


def test_a_2025_server_that_restarted_between_two_calls_runs_the_next_once_on_a_new_session(gateway, member_on):
    """upstream11: a 2025-11-25 server (sessions) restarted while the gateway's session to it sat idle answers the next
    call 404 for the session it no longer knows, and has not taken the call (MCP "Session Management"). The call failed
    as a protocol error; the gateway now opens a new session and sends it there: answered, run once, audited so."""
    from catalog.models import Tool
    from governance.models import AuditEvent

    calls: list[tuple[int, int]] = []
    statuses: list[tuple[str, int]] = []
    real = [_upstream(app=_counting_upstream(calls))]

    class Legacy(SessionFront):  # the real server speaking 2025-11-25 only, each status it answers noted
        real_url = f"{real[0].url}/mcp"

        def send_response(self, code: int, message: str | None = None) -> None:
            statuses.append((self.command, code))
            super().send_response(code, message)

    try:
        with serve_front(Legacy) as url:
            sync_server(slug="calc", transport="http", url=url)
            token = member_on(Tool.objects.get(tool_id="calc::add")).token

            async def main() -> tuple[Any, Any]:
                async with mcp_client(gateway, token) as client:
                    first = await _add(client, 1)
                    real[0].stop()
                    real[0] = _upstream(real[0].port, _counting_upstream(calls))  # it comes back at its address
                    statuses.clear()
                    return first, await _add(client, 2)

            first, again = run(main)
    finally:
        real[0].stop()
    assert not first.is_error and _text(first) == "2", _text(first)
    assert not again.is_error and _text(again) == "3", _text(again)
    assert ("POST", 404) in statuses  # the restarted server refused the old session's call
    assert calls == [(1, 1), (2, 1)]  # and ran it once, on the new session
    events = AuditEvent.objects.filter(event_type="execution", tool_ref="calc::add").order_by("created_at", "pk")
    assert [(event.outcome, event.payload.get("upstream_session_renewed")) for event in events] == [
        ("success", None),
        ("success", True),
    ]


def test_a_server_that_forgets_the_new_session_too_is_said_to_have_run_nothing(gateway, member_on):
    """upstream11: the call goes to a new session once only: a server answering it 404 there too took it on neither,
    so the agent is told nothing ran (not that it may have), and the audit says so."""
    from catalog.models import Tool
    from governance.models import AuditEvent

    calls: list[tuple[int, int]] = []
    refused: list[str] = []
    real = _upstream(app=_counting_upstream(calls))

    class Forgetful(SessionFront):  # 2025-11-25, and every call under a session answered as for an unknown session
        real_url = f"{real.url}/mcp"

        def answered(self, message: dict) -> bool:
            if message.get("method") != "tools/call" or not self.headers.get("Mcp-Session-Id"):
                return False
            refused.append(self.headers["Mcp-Session-Id"])
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True

    try:
        with serve_front(Forgetful) as url:
            sync_server(slug="calc", transport="http", url=url)
            token = member_on(Tool.objects.get(tool_id="calc::add")).token

            async def main() -> Any:
                async with mcp_client(gateway, token) as client:
                    return await _add(client, 1)

            answer = run(main)
    finally:
        real.stop()
    assert answer.is_error and answer.structured_content == {"upstream_failure": "session_gone"}, _text(answer)
    assert "nothing ran" in _text(answer)
    assert calls == [] and len(refused) == 2 and refused[0] != refused[1]  # sent twice, on two sessions
    event = AuditEvent.objects.get(event_type="execution", tool_ref="calc::add")
    assert event.outcome == "error" and event.payload["failure"] == "session_gone"
    assert event.payload["upstream_session_renewed"] is True
