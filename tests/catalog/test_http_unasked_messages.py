"""T13: what a Streamable HTTP server sends unasked costs the gateway's event loop, every client's, one parse each
(redteam27). redteam26 bounded a stdio server's (``catalog/line_guard.py``, ``UNASKED_PER_SECOND``); an HTTP server's
event streams went to the SDK whole: a call's answer preceded by 20,000 log notifications (Scout uses none) had every
one parsed and handed to the session, as did a 2025-11-25 session's own event stream (GET). The pinned transport now
passes on at most ``UNASKED_PER_SECOND`` events a second per session that answer no request of the gateway's;
answers always pass."""

import json
import threading
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


# An answer to a request the gateway never sent (or to one already answered): the SDK parses and validates it, then
# drops it ("dropping response for unknown/late request id").
STRAY_ANSWER = {"jsonrpc": "2.0", "id": 424242, "result": {"content": [{"type": "text", "text": "stray"}]}}


@pytest.fixture
def stray_answering_upstream(loopback_upstreams) -> Iterator[tuple[str, threading.Event]]:
    """A real MCP server behind a front that answers the session's own event stream (GET) itself: 20,000 answers to
    an id the gateway never sent, then the end; a later GET (sent once the gateway read them all) is refused and
    noted."""
    reopened = threading.Event()
    with serve_http() as real:

        class StrayAnswers(SessionFront):
            real_url = real.url
            gets = 0

            def do_GET(self):  # noqa: N802 - http.server's name
                StrayAnswers.gets += 1
                if StrayAnswers.gets == 1:
                    self.answer("text/event-stream", _events([STRAY_ANSWER] * UNASKED, line_end="\n"))
                else:
                    reopened.set()
                    self.send_error(405)

        with serve_front(StrayAnswers) as url:
            yield url, reopened


def test_answers_to_no_request_of_the_gateways_count_as_unasked(stray_answering_upstream, caplog):
    """redteam30 (T13): an answer-shaped event passed the bound whatever its id, so a server sending answers to ids
    the gateway never asked, on the session's own stream while idle, had all 20,000 parsed in the shared event loop.
    Only the first answer to a request the gateway sent passes free now; a stray one counts against the budget."""
    caplog.set_level("DEBUG", logger="mcp.shared.jsonrpc_dispatcher")
    url, reopened = stray_answering_upstream
    server = Server(slug="stray-http", name="Stray", transport="http", url=url)

    async def idle_then_list() -> list:
        async with upstream.open_session(server) as session:
            with anyio.fail_after(60):
                while not reopened.is_set():  # the stream was read to its end
                    await anyio.sleep(0.05)
            return await session.list_tools()  # answered behind every event read before it

    tools = anyio.run(idle_then_list)
    assert [tool["name"] for tool in tools] == ["greet", "add", "bump"]
    heard = sum("unknown/late request id" in record.getMessage() for record in caplog.records)
    assert 0 < heard <= UNASKED // 5, heard  # all 20,000 before
    assert f"dropped 10000 event(s) it did not ask for, past {UNASKED_PER_SECOND} a second" in caplog.text
