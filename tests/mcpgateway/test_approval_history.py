"""An approver's history without the audit trail: a request they approved says, on its page and on the inbox's row,
that the call which used it ran and how it ended (a real call through the gateway to a real upstream)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from .conftest import MODERN, admin_pages, gateway_db, grant, make_user, mcp_client, run
from .test_approvals import TOOL, _admin_approve

pytestmark = [gateway_db, pytest.mark.slow]


def test_an_approver_reads_how_the_call_they_approved_ended(gateway, member_on, admin_user, faulty_server):
    from governance.models import ApprovalRequest

    token = member_on(faulty_server).token
    approver = make_user("gw_approver", is_staff=True)  # an approver by their grant alone: no audit permission
    grant(admin_user, faulty_server, approver, "discover", "approve")
    arguments = {"note": "ship the release"}

    async def ask(approval_id: str | None = None) -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            payload: dict[str, Any] = {"tool_id": TOOL, "arguments": arguments}
            if approval_id:
                payload["approval_id"] = approval_id
            return await client.call_tool("execute_tool", payload)

    first = run(ask)
    approval_id, approval_url = first.structured_content["approval_id"], first.structured_content["approval_url"]
    run(lambda: ask(approval_id))  # a poll while it waits: not part of the history
    assert _admin_approve(gateway.url, approval_url, "gw_approver").status_code == 302
    assert not run(lambda: ask(approval_id)).is_error
    request = ApprovalRequest.objects.get(approval_id=approval_id)
    assert request.status == "consumed"

    path = approval_url.removeprefix(gateway.url)
    responses = admin_pages(gateway.url, "gw_approver", path, "/admin/governance/approvalrequest/?decided=me")
    assert [response.status_code for response in responses] == [200, 200]
    page, inbox = (response.text for response in responses)
    history = re.search(r'<div class="scout-panel" id="approval-history">(.*?)</div>', page, re.S).group(1)
    steps = [
        " ".join(re.sub(r"<[^>]+>", "", step).split()) for step in re.findall(r"<li[^>]*>(.*?)</li>", history, re.S)
    ]
    assert [step.split(" — ", 1)[1] for step in steps] == [
        "Approval requested: pending, gw_member",
        "Approval approved: success, gw_approver",
        "Approval used: success, gw_member",
        "Execution: success, gw_member",
    ], steps
    assert f"decided by gw_approver {request.decided_at:%Y-%m-%d}" in page  # when, on the status line
    row = next(row for row in inbox.split("<tr") if approval_id in row)
    assert "Used" in row and "by gw_approver" in row and '<small class="call-outcome">the call: success, ' in row
