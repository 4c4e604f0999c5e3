"""T13/L4: one person's share of an upstream server's calls in flight (SCOUT_MCP_MAX_CALLS_PER_PERSON_PER_SERVER).

The server's bulkhead (SCOUT_MCP_MAX_CALLS_PER_SERVER) is shared by everyone: one person's slow calls held all of its
slots and queued more, so everyone else's calls to that server waited behind them until they timed out. Real
sockets hold the slow calls (a real stdio upstream's ``hang``); the refused and the served calls go through the SDK
client over HTTP."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from .conftest import MODERN, faulty_calls, gateway_db, grant, make_token, make_user, mcp_client, run
from .test_disconnect import _drop, _open_call, _wait_for

pytestmark = [gateway_db, pytest.mark.slow]


def _execute(gateway: Any, token: str, tool_id: str, arguments: dict[str, Any], key: str | None = None) -> Any:
    payload: dict[str, Any] = {"tool_id": tool_id, "arguments": arguments}
    if key:
        payload["idempotency_key"] = key  # claimed once every check passed: then the call waits for a slot

    async def call() -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            return await client.call_tool("execute_tool", payload)

    return run(call)


def _in_background(gateway: Any, token: str, tool_id: str, arguments: dict[str, Any], key: str) -> Future:
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(_execute, gateway, token, tool_id, arguments, key)
    pool.shutdown(wait=False)
    return future


def test_one_persons_slow_calls_leave_the_next_free_slot_to_someone_else(
    gateway, admin_user, faulty_server, faulty_call_log, settings
):
    from mcpgateway.models import IdempotencyRecord

    settings.SCOUT_MCP_MAX_CALLS_PER_SERVER = 3
    settings.SCOUT_MCP_MAX_CALLS_PER_PERSON_PER_SERVER = 2
    hog, other = make_user("gw_hog"), make_user("gw_other")
    for person in (hog, other):
        grant(admin_user, faulty_server, person, "discover", "execute")
    hog_tokens = [make_token(hog), make_token(hog)]  # two tokens of one person: one share

    # Alone on the server, the hog has every slot, past its share.
    hangs = [_open_call(gateway, hog_tokens[n % 2], {"tool_id": "faulty::hang", "arguments": {}}) for n in range(3)]
    try:
        _wait_for(lambda: faulty_calls(faulty_call_log, "hang") == 3, "the hog's calls hold every slot")

        # Someone else's call waits for the next slot ...
        waiting = _in_background(gateway, make_token(other), "faulty::ping", {"text": "served"}, "other-1")
        _wait_for(lambda: IdempotencyRecord.objects.filter(key="other-1").exists(), "the other's call was authorized")
        # ... and the hog may not queue ahead of it, with either token: refused at once, never sent.
        for token in hog_tokens:
            refused = _execute(gateway, token, "faulty::ping", {"text": "more"})
            assert refused.is_error and refused.structured_content == {"upstream_failure": "caller_busy"}
            text = refused.content[0].text
            assert "was not sent" in text and "2 calls in flight" in text
        assert faulty_calls(faulty_call_log, "ping") == 0

        _drop(hangs.pop())  # one of the hog's calls ends: its slot goes to the other person
        served = waiting.result(timeout=60)
        assert not served.is_error and served.content[0].text == "served"
        assert faulty_calls(faulty_call_log, "ping") == 1
    finally:
        for sock in hangs:
            _drop(sock)


def test_a_person_under_their_share_waits_for_a_slot_as_before(
    gateway, member_on, faulty_server, faulty_call_log, settings
):
    from mcpgateway.models import IdempotencyRecord

    settings.SCOUT_MCP_MAX_CALLS_PER_SERVER = 1
    settings.SCOUT_MCP_MAX_CALLS_PER_PERSON_PER_SERVER = 2
    token = member_on(faulty_server).token
    hang = _open_call(gateway, token, {"tool_id": "faulty::hang", "arguments": {}})
    try:
        _wait_for(lambda: faulty_calls(faulty_call_log, "hang") == 1, "the hang holds the only slot")
        waiting = _in_background(gateway, token, "faulty::ping", {"text": "second"}, "second")
        _wait_for(lambda: IdempotencyRecord.objects.filter(key="second").exists(), "the second call was authorized")
        _drop(hang)
        hang = None
        result = waiting.result(timeout=60)
        assert not result.is_error and result.content[0].text == "second"
    finally:
        if hang is not None:
            _drop(hang)
