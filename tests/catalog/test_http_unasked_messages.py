"""T13: what a Streamable HTTP server sends unasked costs the gateway's event loop, every client's, one parse each
(redteam27). redteam26 bounded a stdio server's (``catalog/line_guard.py``, ``UNASKED_PER_SECOND``); an HTTP server's
event streams went to the SDK whole: a call's answer preceded by 20,000 log notifications (Scout uses none) had every
one parsed and handed to the session, as did a 2025-11-25 session's own event stream (GET). The pinned transport now
passes on at most ``UNASKED_PER_SECOND`` events a second per session that answer no request of the gateway's;
answers always pass."""

import json
from collections.abc import Iterator

import anyio
import mcp_types as types
import pytest

from catalog import upstream
from catalog.line_guard import UNASKED_PER_SECOND
from catalog.models import Server
from tests.catalog.servers.http_mcp import SessionFront, serve_front, serve_http

UNASKED = 20_000
NOTE = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "tick"}}
TOOL = {"name": "t", "description": "A tool.", "inputSchema": {"type": "object"}}


def _events(messages: list[dict], *, line_end: str) -> str:
    return "".join(f"event: message{line_end}data: {json.dumps(m)}{line_end}{line_end}" for m in messages)


@pytest.fixture(params=["\n", "\r\n"])
def flooding_upstream(request, loopback_upstreams) -> Iterator[str]:
    """A real MCP server behind a front that answers ``tools/list`` itself, as an event stream: 20,000 log
    notifications, then the answer (with either line end SSE allows)."""
    line_end = request.param
    with serve_http() as real:

        class Flooding(SessionFront):
            real_url = real.url

            def answered(self, message: dict) -> bool:
                if message.get("method") != "tools/list":
                    return False
                answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [TOOL]}}
                self.answer("text/event-stream", _events([NOTE] * UNASKED + [answer], line_end=line_end))
                return True

        with serve_front(Flooding) as url:
            yield url


def test_an_http_servers_unasked_messages_reach_the_gateway_at_most_so_many_a_second(flooding_upstream, caplog):
    server = Server(slug="flooding-http", name="Flooding", transport="http", url=flooding_upstream)
    heard: list = []

    async def on_message(message) -> None:
        if isinstance(message, types.ServerNotification | types.LoggingMessageNotification):
            heard.append(message)

    async def list_once() -> list:
        async with upstream.open_session(server, message_handler=on_message) as session:
            return await session.list_tools()

    tools = anyio.run(list_once)
    assert [tool["name"] for tool in tools] == ["t"]  # the answer behind them still arrives
    assert 0 < len(heard) <= UNASKED // 5, len(heard)  # all 20,000 before; some hundreds a second now
    assert f"dropped 10000 event(s) it did not ask for, past {UNASKED_PER_SECOND} a second" in caplog.text
