"""Z6 over HTTP: an approval is worth nothing once its requester lost access, however the access went."""

from __future__ import annotations

from typing import Any

import pytest

from mcpgateway.constants import UNKNOWN_TOOL_MESSAGE
from tests.celery_results import task_result

from .conftest import (
    MODERN,
    admin_pages,
    faulty_calls,
    gateway_db,
    grant,
    make_user,
    mcp_client,
    run,
    unknown_tool_text,
)
from .test_approvals import _admin_approve

pytestmark = [gateway_db, pytest.mark.slow]
TOOL = "faulty::record_note"
ARGUMENTS = {"note": "ship the release"}


@pytest.fixture
def setup(gateway, member_on, admin_user, faulty_server) -> dict[str, Any]:
    member, token = member_on(faulty_server)
    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, faulty_server, approver, "discover", "approve")
    return {"token": token, "member": member}


def _inbox(base_url: str, username: str) -> str:
    [page] = admin_pages(base_url, username, "/admin/governance/approvalrequest/")
    assert page.status_code == 200, page.text[:300]
    return page.text


def test_an_approved_call_is_refused_and_shown_unusable_after_the_requester_lost_access(
    gateway, setup, faulty_call_log
):
    from governance.models import ApprovalRequest, ServerUserObjectPermission
    from governance.tasks import expire_approvals

    async def ask(approval_id: str | None = None) -> Any:
        async with mcp_client(gateway, setup["token"], mode=MODERN) as client:
            payload: dict[str, Any] = {"tool_id": TOOL, "arguments": ARGUMENTS}
            if approval_id:
                payload["approval_id"] = approval_id
            return await client.call_tool("execute_tool", payload)

    first = run(ask)
    approval_id = first.structured_content["approval_id"]
    assert _admin_approve(gateway.url, first.structured_content["approval_url"], "gw_approver").status_code == 302
    assert ApprovalRequest.objects.get(approval_id=approval_id).status == "approved"
    assert "no longer usable" not in _inbox(gateway.url, "gw_approver")

    # Access goes behind the services' back (a shell, a script): no permission_revoke, so nothing voided it.
    ServerUserObjectPermission.objects.filter(user=setup["member"], permission__codename="execute_server").delete()
    assert ApprovalRequest.objects.get(approval_id=approval_id).status == "approved"

    # The inbox tells the approver at once ...
    assert "no longer usable: requester lost access" in _inbox(gateway.url, "gw_approver")

    # ... and use is refused like any tool the caller may not run, with no upstream call.
    async def use() -> Any:
        async with mcp_client(gateway, setup["token"], mode=MODERN) as client:
            return await client.call_tool(
                "execute_tool", {"tool_id": TOOL, "arguments": ARGUMENTS, "approval_id": approval_id}
            )

    refused = run(use)
    assert unknown_tool_text(refused) == UNKNOWN_TOOL_MESSAGE
    assert faulty_calls(faulty_call_log, "record_note") == 0

    # The periodic sweep marks it expired, so it leaves the inbox's open requests.
    assert task_result(expire_approvals.delay()) == 1
    assert ApprovalRequest.objects.get(approval_id=approval_id).status == "expired"
    assert "no longer usable" not in _inbox(gateway.url, "gw_approver")
