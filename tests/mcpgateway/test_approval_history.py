"""An approver's history without the audit trail: a request they approved says, on its page and on the inbox's row,
that the call which used it ran and how it ended (a real call through the gateway to a real upstream)."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from .conftest import MODERN, gateway_db, grant, make_token, make_user, mcp_client, run
from .test_approvals import TOOL, _admin_approve

pytestmark = [gateway_db, pytest.mark.slow]


def _admin_get(base_url: str, username: str, *paths: str) -> list[str]:
    """The admin pages at ``paths`` as ``username`` reads them, logged in over HTTP."""
    with httpx.Client(base_url=base_url, timeout=30) as browser:
        login_page = browser.get("/admin/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page.text).group(1)
        browser.post(
            "/admin/login/?next=/admin/",
            data={"username": username, "password": f"pw-{username}-123", "csrfmiddlewaretoken": csrf},
        )
        pages = [browser.get(path) for path in paths]
    assert all(page.status_code == 200 for page in pages), [page.status_code for page in pages]
    return [page.text for page in pages]


def test_an_approver_reads_how_the_call_they_approved_ended(gateway, admin_user, faulty_server):
    from governance.models import ApprovalRequest

    member = make_user("gw_member")
    approver = make_user("gw_approver", is_staff=True)  # an approver by their grant alone: no audit permission
    grant(admin_user, faulty_server, member, "discover", "execute")
    grant(admin_user, faulty_server, approver, "discover", "approve")
    token = make_token(member)
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
    page, inbox = _admin_get(gateway.url, "gw_approver", path, "/admin/governance/approvalrequest/?decided=me")
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
