"""A denied request: the agent is told the approver's reason and not to retry the call unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import MODERN, faulty_calls, gateway_db, grant, make_user, mcp_client, run

pytestmark = [gateway_db, pytest.mark.slow]
TOOL = "faulty::record_note"


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def test_the_denial_reason_reaches_the_agent_with_do_not_retry(
    gateway, member_on, admin_user, faulty_server, faulty_call_log
):
    from governance.models import ApprovalRequest
    from governance.services.approvals import approval_decide

    token = member_on(faulty_server).token
    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, faulty_server, approver, "approve")

    async def ask(approval_id: str | None = None) -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            payload: dict[str, Any] = {"tool_id": TOOL, "arguments": {"note": "wipe the audit log"}}
            if approval_id:
                payload["approval_id"] = approval_id
            return await client.call_tool("execute_tool", payload)

    first = run(ask)
    approval_id = first.structured_content["approval_id"]
    request = ApprovalRequest.objects.get(approval_id=approval_id)
    approval_decide(request=request, approver=approver, approve=False, reason="Audit logs are never wiped.")

    denied = run(lambda: ask(approval_id))
    text = _text(denied)
    assert denied.is_error and denied.structured_content["approval_rejected"] == "denied"
    assert "Their reason: Audit logs are never wiped. Do not retry" in text  # one full stop, not "wiped.."
    assert "Do not retry this call unchanged" in text and "request a new one" not in text
    assert faulty_calls(faulty_call_log, "record_note") == 0


def _deny_first_call(gateway, member_on, admin_user, faulty_server, arguments: dict[str, Any]):
    """A member's call opened a request an approver denied. Returns (token, approver, ask) where
    ``ask(arguments)`` sends the call again as that member without approval_id."""
    from governance.models import ApprovalRequest
    from governance.services.approvals import approval_decide

    token = member_on(faulty_server).token
    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, faulty_server, approver, "approve")

    def ask(arguments: dict[str, Any]) -> Any:
        async def call() -> Any:
            async with mcp_client(gateway, token, mode=MODERN) as client:
                return await client.call_tool("execute_tool", {"tool_id": TOOL, "arguments": arguments})

        return run(call)

    first = ask(arguments)
    request = ApprovalRequest.objects.get(approval_id=first.structured_content["approval_id"])
    approval_decide(request=request, approver=approver, approve=False, reason="Audit logs are never wiped.")
    return request, ask


def test_the_same_call_after_a_denial_is_refused_at_once_without_a_new_request(
    gateway, member_on, admin_user, faulty_server, faulty_call_log
):
    from governance.choices import AuditEventType
    from governance.models import ApprovalRequest, AuditEvent

    arguments = {"note": "wipe the audit log"}
    denied, ask = _deny_first_call(gateway, member_on, admin_user, faulty_server, arguments)

    again = ask(arguments)
    text = _text(again)
    assert again.is_error and again.structured_content["approval_rejected"] == "denied"
    assert "approval_required" not in again.structured_content
    assert ApprovalRequest.objects.count() == 1  # no new request: approvers are not asked again
    assert f"denied by gw_approver at {denied.decided_at:%Y-%m-%d %H:%M} UTC (approval_id {denied.approval_id})" in text
    assert "Their reason: Audit logs are never wiped. Do not retry this call unchanged" in text
    assert "ask the user before trying again" in text
    assert again.structured_content["approval_id"] == denied.approval_id
    assert again.structured_content["denied_by"] == "gw_approver"
    assert again.structured_content["denial_reason"] == "Audit logs are never wiped."
    refused = AuditEvent.objects.filter(event_type=AuditEventType.APPROVAL_REJECTED, approval_ref=denied.approval_id)
    assert [event.payload for event in refused] == [{"code": "denied", "asked_again": True}]

    changed = ask({"note": "archive the audit log"})
    assert changed.structured_content["approval_required"] is True  # other arguments: a new request
    assert ApprovalRequest.objects.count() == 2
    assert faulty_calls(faulty_call_log, "record_note") == 0


def test_the_same_call_opens_a_new_request_once_the_denial_window_has_passed(
    gateway, member_on, admin_user, faulty_server, faulty_call_log, settings
):
    from datetime import timedelta

    from governance.models import ApprovalRequest

    arguments = {"note": "wipe the audit log"}
    denied, ask = _deny_first_call(gateway, member_on, admin_user, faulty_server, arguments)
    window = timedelta(seconds=settings.SCOUT_APPROVAL_DENIAL_WINDOW)
    ApprovalRequest.objects.filter(pk=denied.pk).update(decided_at=denied.decided_at - window)

    after = ask(arguments)
    assert after.structured_content["approval_required"] is True
    assert after.structured_content["approval_id"] != denied.approval_id
    assert ApprovalRequest.objects.count() == 2


def test_a_denial_window_of_zero_keeps_no_denial(
    gateway, member_on, admin_user, faulty_server, faulty_call_log, settings
):
    from governance.models import ApprovalRequest

    settings.SCOUT_APPROVAL_DENIAL_WINDOW = 0
    arguments = {"note": "wipe the audit log"}
    _, ask = _deny_first_call(gateway, member_on, admin_user, faulty_server, arguments)

    assert ask(arguments).structured_content["approval_required"] is True
    assert ApprovalRequest.objects.count() == 2
