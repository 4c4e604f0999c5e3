"""A client that disconnects during execute_tool (issue 12 item 3): the call is still audited, and a retry
with the same idempotency key gets a clear answer instead of "still running" for a day.

Connections are real sockets to the live gateway, closed mid-call as a client whose stream broke would.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import faulty_calls, gateway_db, grant, make_user, modern_request, raw_post, rpc_result

pytestmark = [gateway_db, pytest.mark.slow]


@pytest.fixture
def token(gateway, member_on, faulty_server) -> str:
    return member_on(faulty_server).token


def _open_call(gateway, token: str, arguments: dict[str, Any]) -> socket.socket:
    """Send one execute_tool POST on a raw socket and leave it waiting for the answer."""
    body = json.dumps(modern_request("tools/call", {"name": "execute_tool", "arguments": arguments})).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{gateway.port}\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: execute_tool\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock = socket.create_connection(("127.0.0.1", gateway.port))
    sock.sendall(head + body)
    return sock


def _drop(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST, like a crash
    sock.close()


def _wait_for(condition: Callable[[], Any], what: str, limit: float = 30.0) -> Any:
    """Poll until ``condition()`` is truthy (a bound on waiting, not a speed assertion)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"never happened: {what}")


def _executions(tool_id: str) -> list[Any]:
    from governance.models import AuditEvent

    return list(AuditEvent.objects.filter(event_type="execution", tool__tool_id=tool_id).order_by("id"))


def _execute(gateway, token: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = modern_request("tools/call", {"name": "execute_tool", "arguments": arguments})
    return rpc_result(raw_post(gateway, body, token=token))["result"]


def _approved_note(admin_user, faulty_server, token: str) -> tuple[Any, Any, dict[str, Any]]:
    """An approver, the token's request to run record_note they approved, and the execute_tool call that uses it."""
    from governance.services.approvals import approval_decide, approval_request_create
    from governance.services.tokens import api_token_verify

    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, faulty_server, approver, "discover", "approve")
    arguments = {"note": "ship the release"}
    request = approval_request_create(
        principal=api_token_verify(token), tool=faulty_server.tools.get(name="record_note"), arguments=arguments
    )
    approval_decide(request=request, approver=approver, approve=True, reason="go")
    return (
        approver,
        request,
        {"tool_id": "faulty::record_note", "arguments": arguments, "approval_id": request.approval_id},
    )


def test_a_call_cut_off_after_it_was_sent_is_audited_as_unknown_and_its_retry_is_told(gateway, token, faulty_call_log):
    from mcpgateway.models import IdempotencyRecord

    call = {"tool_id": "faulty::hang", "arguments": {}, "idempotency_key": "order-1"}
    sock = _open_call(gateway, token, call)
    _wait_for(lambda: faulty_calls(faulty_call_log, "hang") == 1, "the upstream received the call")
    _drop(sock)

    (event,) = _wait_for(lambda: _executions("faulty::hang"), "an audit event for the dropped call")
    assert event.outcome == "unknown"
    assert event.payload["failure"] == "interrupted" and event.payload["idempotency_key"] is True
    assert IdempotencyRecord.objects.get(key="order-1").status == "done"

    retry = _execute(gateway, token, call)
    assert retry["isError"] is True
    assert retry["structuredContent"] == {"upstream_failure": "interrupted", "outcome_unknown": True}
    assert "may or may not have taken effect" in retry["content"][0]["text"]
    assert faulty_calls(faulty_call_log, "hang") == 1  # the retry was answered, not run again


def test_a_call_cut_off_before_it_was_sent_frees_its_key_so_the_retry_runs(gateway, token, faulty_call_log, settings):
    from mcpgateway.models import IdempotencyRecord

    settings.SCOUT_MCP_MAX_CALLS_PER_SERVER = 1  # a hang holds the only slot: the next call waits for it
    holder = _open_call(gateway, token, {"tool_id": "faulty::hang", "arguments": {}})
    _wait_for(lambda: faulty_calls(faulty_call_log, "hang") == 1, "the hang holds the slot")

    ping = {"tool_id": "faulty::ping", "arguments": {"text": "once"}, "idempotency_key": "ping-1"}
    waiting = _open_call(gateway, token, ping)
    _wait_for(lambda: IdempotencyRecord.objects.filter(key="ping-1").exists(), "the ping claimed its key")
    _drop(waiting)

    (event,) = _wait_for(lambda: _executions("faulty::ping"), "an audit event for the dropped ping")
    assert event.outcome == "error" and event.payload["failure"] == "cancelled"
    assert not IdempotencyRecord.objects.filter(key="ping-1").exists()
    assert faulty_calls(faulty_call_log, "ping") == 0

    _drop(holder)
    _wait_for(lambda: _executions("faulty::hang"), "an audit event for the dropped hang")
    retry = _execute(gateway, token, ping)
    assert retry.get("isError") is not True and retry["content"][0]["text"] == "once"
    assert faulty_calls(faulty_call_log, "ping") == 1


def test_a_key_left_running_by_a_dead_process_answers_outcome_unknown(gateway, token, faulty_call_log):
    """A process that died mid-call never settled its key: past the longest possible call, the retry is told
    the outcome is unknown rather than "still running" until the key expires."""
    import hashlib
    from datetime import timedelta

    from django.utils import timezone

    from governance.services.tokens import api_token_verify
    from mcpgateway.models import IdempotencyRecord
    from mcpgateway.services.execution import _longest_call, _principal_key, canonical_arguments

    arguments = {"text": "x"}
    started = timezone.now() - _longest_call() - timedelta(seconds=1)
    IdempotencyRecord.objects.create(
        principal_key=_principal_key(api_token_verify(token)),
        key="left-running",
        tool_ref="faulty::ping",
        arguments_digest=hashlib.sha256(canonical_arguments(arguments).encode()).hexdigest(),
        created_at=started,
        expires_at=started + timedelta(days=1),
    )
    retry = _execute(
        gateway, token, {"tool_id": "faulty::ping", "arguments": arguments, "idempotency_key": "left-running"}
    )
    assert retry["isError"] is True and retry["structuredContent"]["outcome_unknown"] is True
    assert faulty_calls(faulty_call_log, "ping") == 0


def test_an_approved_keyless_call_cut_off_after_it_ran_needs_a_new_approval_to_run_again(
    gateway, token, admin_user, faulty_server, faulty_call_log
):
    """F13 without an idempotency key: the member's approved call of a mutating tool runs, and the client's stream
    breaks before the answer. Re-sent with its approval it is refused as used, never run twice; re-sent without,
    it asks for a new approval, which an approver must grant before it runs again."""
    from governance.models import ApprovalRequest
    from governance.services.approvals import approval_decide

    approver, request, call = _approved_note(admin_user, faulty_server, token)
    arguments = call["arguments"]

    sock = _open_call(gateway, token, call)
    _wait_for(lambda: faulty_calls(faulty_call_log, "record_note") == 1, "the upstream ran the call")
    _drop(sock)  # the stream breaks before the client read its answer
    _wait_for(lambda: _executions("faulty::record_note"), "the call audited")

    resent = _execute(gateway, token, call)
    assert resent["isError"] is True and resent["structuredContent"]["approval_rejected"] == "used", resent
    asked = _execute(gateway, token, {"tool_id": "faulty::record_note", "arguments": arguments})
    assert asked["isError"] is True and asked["structuredContent"]["approval_required"] is True, asked
    assert ApprovalRequest.objects.count() == 2
    assert faulty_calls(faulty_call_log, "record_note") == 1  # run once: neither re-send ran it

    fresh = ApprovalRequest.objects.get(approval_id=asked["structuredContent"]["approval_id"])
    approval_decide(request=fresh, approver=approver, approve=True, reason="again")
    again = _execute(gateway, token, {**call, "approval_id": fresh.approval_id})
    assert again["isError"] is False and faulty_calls(faulty_call_log, "record_note") == 2


def test_an_approval_used_by_a_call_cut_off_before_it_was_sent_is_given_back(
    gateway, token, admin_user, faulty_server, faulty_call_log, settings
):
    """mend1: an approved call waiting for its server's only slot when its client disconnected left its approval used
    up, though nothing was sent: the approver's decision was lost, the agent had to ask again. Given back as for the
    other calls never sent (on the record, ``approval_given_back``); the same approval_id then runs the call."""
    from governance.models import ApprovalRequest

    _, request, call = _approved_note(admin_user, faulty_server, token)

    settings.SCOUT_MCP_MAX_CALLS_PER_SERVER = 1  # a hang holds the only slot: the approved call waits for it
    holder = _open_call(gateway, token, {"tool_id": "faulty::hang", "arguments": {}})
    _wait_for(lambda: faulty_calls(faulty_call_log, "hang") == 1, "the hang holds the slot")
    waiting = _open_call(gateway, token, call)
    _wait_for(lambda: ApprovalRequest.objects.get(pk=request.pk).status == "consumed", "the call used its approval")
    _drop(waiting)

    (event,) = _wait_for(lambda: _executions("faulty::record_note"), "an audit event for the dropped call")
    assert (event.outcome, event.payload["failure"], event.payload.get("approval_given_back")) == (
        "error", "cancelled", True
    )  # fmt: skip
    assert ApprovalRequest.objects.get(pk=request.pk).status == "approved"
    assert faulty_calls(faulty_call_log, "record_note") == 0

    _drop(holder)
    _wait_for(lambda: _executions("faulty::hang"), "an audit event for the dropped hang")
    ran = _execute(gateway, token, call)
    assert ran.get("isError") is not True, ran
    assert faulty_calls(faulty_call_log, "record_note") == 1
    assert ApprovalRequest.objects.get(pk=request.pk).status == "consumed"
