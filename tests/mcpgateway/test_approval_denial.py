"""A denied request: the agent is told the approver's reason and not to retry the call unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import MODERN, faulty_calls, gateway_db, grant, make_token, make_user, mcp_client, run

pytestmark = [gateway_db, pytest.mark.slow]
TOOL = "faulty::record_note"


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def test_the_denial_reason_reaches_the_agent_with_do_not_retry(gateway, admin_user, faulty_server, faulty_call_log):
    from governance.models import ApprovalRequest
    from governance.services.approvals import approval_decide

    member = make_user("gw_member")
    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, faulty_server, member, "discover", "execute")
    grant(admin_user, faulty_server, approver, "approve")
    token = make_token(member)

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
