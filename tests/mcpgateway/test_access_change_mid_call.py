"""Access taken away while an authorized execute_tool waits for its upstream (Z6, T16): a call that waits for a
slot of a busy server (or for a cold server to start) is checked again before it is sent, so a revoked token, a
revoked grant or an archived server never reaches the upstream, however long the call waited.

Real sockets to the live gateway and a real stdio upstream that counts its calls; the waiting call is held by a
hang that owns the server's only slot, and released by dropping the hang's connection.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from tests.governance.conftest import classify

from .conftest import faulty_calls, gateway_db, grant, make_token, make_user, modern_request, raw_post, rpc_result
from .test_disconnect import _drop, _executions, _open_call, _wait_for

pytestmark = [gateway_db, pytest.mark.slow]


def _send(gateway, token: str, arguments: dict[str, Any]) -> Future:
    """One execute_tool call sent from another thread: its answer, once the gateway gives it."""
    body = modern_request("tools/call", {"name": "execute_tool", "arguments": arguments})
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(lambda: rpc_result(raw_post(gateway, body, token=token))["result"])
    pool.shutdown(wait=False)
    return future


def _revoke_token(token: str, *, admin: Any, member: Any, server: Any) -> None:
    from governance.models import ApiToken
    from governance.services.tokens import api_token_revoke, api_token_verify

    api_token_revoke(token=ApiToken.objects.get(pk=api_token_verify(token).token_id), actor=admin)


def _revoke_grant(token: str, *, admin: Any, member: Any, server: Any) -> None:
    from governance.services.permissions import permission_revoke

    permission_revoke(actor=admin, target=server, action="execute", holder=member)


def _archive_server(token: str, *, admin: Any, member: Any, server: Any) -> None:
    from catalog.services.servers import server_archive

    server_archive(server=server)


def _member_waiting_behind_a_hang(gateway, member_on, admin_user, faulty_server, faulty_call_log, settings):
    """The member's ping, authorized and waiting for the server's only slot, which a hang holds: (the member, their
    token, the hang's socket, the ping's answer to come)."""
    from mcpgateway.models import IdempotencyRecord

    settings.SCOUT_MCP_MAX_CALLS_PER_SERVER = 1
    holder_user = make_user("gw_holder")
    grant(admin_user, faulty_server, holder_user, "discover", "execute")
    holder = _open_call(gateway, make_token(holder_user), {"tool_id": "faulty::hang", "arguments": {}})
    _wait_for(lambda: faulty_calls(faulty_call_log, "hang") == 1, "the hang holds the slot")

    member, token = member_on(faulty_server)
    waiting = _send(gateway, token, {"tool_id": "faulty::ping", "arguments": {"text": "late"}, "idempotency_key": "p"})
    # Its key is claimed once every check passed: it now waits for the slot.
    _wait_for(lambda: IdempotencyRecord.objects.filter(key="p").exists(), "the ping was authorized")
    return member, token, holder, waiting


@pytest.mark.parametrize("take_away", [_revoke_token, _revoke_grant, _archive_server], ids=lambda f: f.__name__[1:])
def test_access_taken_away_while_a_call_waits_for_its_upstream_stops_it_before_it_is_sent(
    gateway, member_on, admin_user, faulty_server, faulty_call_log, settings, take_away
):
    from mcpgateway.models import IdempotencyRecord

    member, token, holder, waiting = _member_waiting_behind_a_hang(
        gateway, member_on, admin_user, faulty_server, faulty_call_log, settings
    )
    take_away(token, admin=admin_user, member=member, server=faulty_server)
    _drop(holder)

    result = waiting.result(timeout=60)
    assert result["isError"] is True
    assert result["structuredContent"] == {"access_changed": True}
    assert "was not sent" in result["content"][0]["text"]
    assert faulty_calls(faulty_call_log, "ping") == 0  # the upstream never ran it
    (event,) = _wait_for(lambda: _executions("faulty::ping"), "an audit event for the stopped call")
    assert event.outcome == "denied" and event.payload["failure"] == "access_changed"
    assert not IdempotencyRecord.objects.filter(key="p").exists()  # nothing ran: the key is free again


def test_a_call_that_waited_for_its_slot_still_runs_when_nothing_changed(
    gateway, member_on, admin_user, faulty_server, faulty_call_log, settings
):
    _, _, holder, waiting = _member_waiting_behind_a_hang(
        gateway, member_on, admin_user, faulty_server, faulty_call_log, settings
    )
    _drop(holder)

    result = waiting.result(timeout=60)
    assert result.get("isError") is not True and result["content"][0]["text"] == "late"
    assert faulty_calls(faulty_call_log, "ping") == 1


def _classify_as_a_risky_write(admin: Any) -> None:
    from governance.models import ToolPolicy

    classify(
        ToolPolicy.objects.get(tool__tool_id="faulty::ping"),
        actor=admin,
        operation_class="write",
        reversibility="irreversible",
        risk="high",
        classification_note="it pages the on-call engineer",
    )


def _make_its_risk_class_need_approval(admin: Any) -> None:
    from governance.models import ToolPolicy
    from governance.services.policy import risk_class_update

    risk = ToolPolicy.objects.get(tool__tool_id="faulty::ping").risk_class
    risk_class_update(
        risk_class=risk,
        actor=admin,
        requires_approval=True,
        requires_approval_for_mutating=True,
        approval_ttl=risk.approval_ttl,
    )


@pytest.mark.parametrize(
    "change", [_classify_as_a_risky_write, _make_its_risk_class_need_approval], ids=["tool", "risk_class"]
)
def test_a_tool_reclassified_to_need_approval_while_a_call_waits_is_not_sent_without_one(
    gateway, member_on, admin_user, faulty_server, faulty_call_log, settings, change
):
    """redteam31 (T5): a call authorized as needing no approval, waiting for its slot, was sent after its tool was
    classified as needing one (an admin's new class, or its risk class's rule): the approval it now needs was never
    asked. It now gets the answer a new call gets: a pending request an approver decides, and nothing is sent."""
    from governance.models import ApprovalRequest
    from mcpgateway.models import IdempotencyRecord

    _, _, holder, waiting = _member_waiting_behind_a_hang(
        gateway, member_on, admin_user, faulty_server, faulty_call_log, settings
    )
    change(admin_user)
    _drop(holder)

    result = waiting.result(timeout=60)
    assert result["isError"] is True
    assert result["structuredContent"]["approval_required"] is True, result
    assert faulty_calls(faulty_call_log, "ping") == 0  # the upstream never ran it
    (request,) = ApprovalRequest.objects.filter(tool__tool_id="faulty::ping")
    assert request.status == "pending" and request.approval_id == result["structuredContent"]["approval_id"]
    (event,) = _wait_for(lambda: _executions("faulty::ping"), "an audit event for the stopped call")
    assert event.outcome == "denied" and event.payload["failure"] == "approval_now_required"
    assert not IdempotencyRecord.objects.filter(key="p").exists()  # nothing ran: the key is free again


def test_a_grant_revoked_while_a_call_waits_out_its_persons_crash_backoff_stops_it_before_it_is_sent(
    gateway, member_on, admin_user, faulty_server, faulty_call_log, settings, monkeypatch
):
    """redteam56: a person whose call crashed the server waits their own restart backoff before their next call is
    sent (``UpstreamPool._crash_backoff``), on a live session another person's call may have started: that wait is
    one too, so access taken away during it stops the call unsent."""
    from mcpgateway import upstreams
    from mcpgateway.models import IdempotencyRecord

    from .test_breaker import EXIT_ON

    monkeypatch.setattr(upstreams, "RESTART_BACKOFF_BASE", 20.0)  # past the other person's start on a loaded machine
    settings.SCOUT_UPSTREAM_CONNECT_TIMEOUT = 60.0
    member, token = member_on(faulty_server)
    crashed = _send(gateway, token, {"tool_id": "faulty::echo_json", "arguments": {"value": EXIT_ON}}).result(60)
    assert crashed["structuredContent"]["upstream_failure"] == "closed"
    other = make_user("gw_other")
    grant(admin_user, faulty_server, other, "discover", "execute")
    started = _send(gateway, make_token(other), {"tool_id": "faulty::ping", "arguments": {"text": "restarted"}})
    assert started.result(60)["content"][0]["text"] == "restarted"  # another person's call started it at once
    waiting = _send(gateway, token, {"tool_id": "faulty::ping", "arguments": {"text": "late"}, "idempotency_key": "p"})
    _wait_for(lambda: IdempotencyRecord.objects.filter(key="p").exists(), "the ping was authorized")
    _revoke_grant(token, admin=admin_user, member=member, server=faulty_server)

    result = waiting.result(timeout=60)
    assert result["structuredContent"] == {"access_changed": True}
    assert faulty_calls(faulty_call_log, "ping") == 1  # the other person's: the member's never ran
