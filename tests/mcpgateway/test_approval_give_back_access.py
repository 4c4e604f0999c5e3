"""An approval given back after its call was refused unsent (opsux11/12) while the requester lost access meanwhile
(redteam50, Z6/T5). A revocation voids the requester's open approvals (pending, approved); one in use by a call then
waiting for a slot is "used" and left alone, and the call's refusal (the server busy) gave it back as approved: the
revocation's voiding undone, the approver's inbox showing it usable again, and once access came back (a grant
restored the next day) the old approval ran a write the approver had approved for someone whose access was since
taken away. Over HTTP against the live gateway and a real stdio upstream."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from governance.models import ApprovalRequest, AuditEvent
from governance.services.approvals import approval_decide, approval_request_create
from governance.services.permissions import permission_revoke
from governance.services.tokens import api_token_verify

from .conftest import MODERN, faulty_calls, gateway_db, grant, make_token, make_user, mcp_client, run
from .test_disconnect import _drop, _open_call, _wait_for

pytestmark = [gateway_db, pytest.mark.slow]


def test_an_approval_whose_requester_lost_access_during_the_call_is_voided_not_given_back(
    gateway, member_on, admin_user, faulty_server, faulty_call_log, settings
):
    settings.SCOUT_MCP_MAX_CALLS_PER_SERVER = 1
    member = member_on(faulty_server)
    approver, hog = make_user("gw_approver", is_staff=True), make_user("gw_hog")
    grant(admin_user, faulty_server, approver, "discover", "approve")
    grant(admin_user, faulty_server, hog, "discover", "execute")
    tool, note = faulty_server.tools.get(name="record_note"), {"note": "wire the funds"}
    request = approval_request_create(principal=api_token_verify(member.token), tool=tool, arguments=note)
    approval_decide(request=request, approver=approver, approve=True, reason="go")
    approved = {"tool_id": "faulty::record_note", "arguments": note, "approval_id": request.approval_id}

    hang = _open_call(gateway, make_token(hog), {"tool_id": "faulty::hang", "arguments": {}})  # the one slot
    try:
        _wait_for(lambda: faulty_calls(faulty_call_log, "hang") == 1, "the hog's call holds the slot")
        settings.SCOUT_MCP_CALL_TIMEOUT = 5  # the member's call waits this long for the slot (the hog's: 30 s)
        waiting = _call_in_background(gateway, member.token, approved)
        _wait_for(lambda: ApprovalRequest.objects.get(pk=request.pk).status == "consumed", "the approval is in use")
        permission_revoke(actor=admin_user, target=faulty_server, action="execute", holder=member.user)
        refused = waiting.result(timeout=60)
    finally:
        _drop(hang)

    assert refused.is_error and refused.structured_content == {"upstream_failure": "busy"}, refused
    assert "approval_id" not in refused.content[0].text
    assert ApprovalRequest.objects.get(pk=request.pk).status == "expired"
    expired = AuditEvent.objects.filter(event_type="approval.expired", approval_ref=request.approval_id).get()
    assert expired.payload["reason"] == "requester_lost_access"
    execution = AuditEvent.objects.filter(event_type="execution", tool_ref="faulty::record_note").get()
    assert "approval_given_back" not in execution.payload

    # Access restored: the approval voided by the revocation stays void; the call asks an approver again.
    grant(admin_user, faulty_server, member.user, "execute")
    settings.SCOUT_MCP_CALL_TIMEOUT = 30

    async def again():
        async with mcp_client(gateway, member.token, mode=MODERN) as client:
            return await client.call_tool("execute_tool", approved)

    assert run(again).is_error
    assert faulty_calls(faulty_call_log, "record_note") == 0


def _call_in_background(gateway: Any, token: str, payload: dict[str, Any]) -> Future:
    async def call() -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            return await client.call_tool("execute_tool", payload)

    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(run, call)
    pool.shutdown(wait=False)
    return future
