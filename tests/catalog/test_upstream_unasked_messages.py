"""T13: what a stdio server sends unasked costs the gateway's event loop, every client's, one parse each.

A server writing valid log notifications while idle (Scout uses none) slowed a listing of its own from 6 ms to 1.5 s
and made a 10 ms sleep in the same loop take 16 ms. line_guard now passes on at most ``UNASKED_PER_SECOND`` messages
a second that answer no request of the gateway's (notifications, the server's own requests, objects that are no
JSON-RPC message), and says how many it dropped; answers always pass."""

import json
import sys

import anyio
import mcp_types as types

from catalog import upstream
from catalog.line_guard import UNASKED_PER_SECOND
from tests.catalog.servers.fixtures import SCRIPTED, good_tool
from tests.catalog.test_upstream import connection

UNASKED = 20_000

NOTE = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "tick"}}


def test_a_stdio_servers_unasked_messages_reach_the_gateway_at_most_so_many_a_second(tmp_path):
    script = tmp_path / "flooding.json"
    noise = {"lines": [json.dumps(NOTE)], "times": UNASKED}  # before every answer
    script.write_text(json.dumps({"pages": [[good_tool("t")]], "noise": noise}))
    server = connection(slug="flooding", command=sys.executable, args=[str(SCRIPTED), str(script)])
    heard: list = []

    async def on_message(message) -> None:
        if isinstance(message, types.ServerNotification | types.LoggingMessageNotification):
            heard.append(message)

    async def list_once() -> tuple[list, str]:
        async with upstream.open_session(server, message_handler=on_message) as session:
            return await session.list_tools(), session.stderr_tail()

    tools, stderr = anyio.run(list_once)
    assert [tool["name"] for tool in tools] == ["t"]  # the answers behind them still arrive, every one
    assert 0 < len(heard) <= UNASKED // 5, len(heard)  # all 60,000 before (three answers); some hundreds a second now
    assert f"scout: dropped 10000 message(s) the gateway did not ask for, past {UNASKED_PER_SECOND} a second" in stderr


# An answer to a request the gateway never sent (or to one already answered): the SDK parses and validates it, then
# drops it ("dropping response for unknown/late request id").
STRAY_ANSWER = {"jsonrpc": "2.0", "id": 424242, "result": {"content": [{"type": "text", "text": "stray"}]}}


def stray_answers_heard(caplog) -> int:
    return sum("unknown/late request id" in record.getMessage() for record in caplog.records)


def test_answers_to_no_request_of_the_gateways_count_as_unasked(tmp_path, caplog):
    """redteam30 (T13): an answer-shaped line passed the bound whatever its id, so a server writing answers to ids
    the gateway never asked (20,000 before each of its own answers) had every one parsed in the shared event loop. Only
    the first answer to a request the gateway sent passes free now; any other counts against the unasked budget."""
    caplog.set_level("DEBUG", logger="mcp.shared.jsonrpc_dispatcher")
    script = tmp_path / "stray.json"
    noise = {"lines": [json.dumps(STRAY_ANSWER)], "times": UNASKED}  # before every answer
    script.write_text(json.dumps({"pages": [[good_tool("t")]], "noise": noise}))
    server = connection(slug="stray", command=sys.executable, args=[str(SCRIPTED), str(script)])

    async def list_once() -> tuple[list, str]:
        async with upstream.open_session(server) as session:
            return await session.list_tools(), session.stderr_tail()

    tools, stderr = anyio.run(list_once)
    assert [tool["name"] for tool in tools] == ["t"]  # the real answers behind them still arrive
    assert 0 < stray_answers_heard(caplog) <= UNASKED // 5, stray_answers_heard(caplog)  # 60,000 before
    assert f"scout: dropped 10000 message(s) the gateway did not ask for, past {UNASKED_PER_SECOND} a second" in stderr
