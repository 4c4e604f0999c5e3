"""T13: how many approval requests one person keeps waiting at once (SCOUT_APPROVAL_MAX_PENDING_PER_PERSON).

Each new request is a row in every approver's inbox, a mail to each of them and a webhook call; an agent that
varies its arguments (or a person minting more tokens and agents) opened them without end, at the /mcp rate."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.governance.conftest import classify

from .conftest import MODERN, faulty_calls, gateway_db, grant, make_token, make_user, mcp_client, run

pytestmark = [gateway_db, pytest.mark.slow]
TOOL = "faulty::record_note"


def _execute(gateway: Any, token: str, note: str, approval_id: str | None = None) -> Any:
    async def call() -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            payload: dict[str, Any] = {"tool_id": TOOL, "arguments": {"note": note}}
            if approval_id:
                payload["approval_id"] = approval_id
            return await client.call_tool("execute_tool", payload)

    return run(call)


def test_a_person_keeps_at_most_the_set_number_of_requests_waiting_whatever_their_tokens(
    gateway, admin_user, faulty_server, faulty_call_log, settings
):
    from governance.models import ApprovalRequest, AuditEvent
    from governance.services.approvals import approval_decide

    settings.SCOUT_APPROVAL_MAX_PENDING_PER_PERSON = 2
    member, other = make_user("gw_member"), make_user("gw_other")
    approver = make_user("gw_approver", is_staff=True)
    for caller in (member, other):
        grant(admin_user, faulty_server, caller, "discover", "execute")
    grant(admin_user, faulty_server, approver, "discover", "approve")
    first, second = make_token(member), make_token(member)

    asked = [_execute(gateway, first, "one"), _execute(gateway, second, "two")]
    assert all(result.structured_content.get("approval_required") for result in asked)
    refused = _execute(gateway, second, "three")  # another token of the same person: the same count
    assert refused.is_error and refused.structured_content == {"approval_rejected": "too_many_pending"}
    text = refused.content[0].text
    assert "2 approval requests waiting" in text and "SCOUT_APPROVAL_MAX_PENDING_PER_PERSON" not in text
    assert ApprovalRequest.objects.filter(requester=member).count() == 2
    assert AuditEvent.objects.filter(event_type="approval.rejected", payload__code="too_many_pending").count() == 1

    # A call already waiting is still pointed to its request, another person is not counted with them ...
    again = _execute(gateway, first, "one")
    assert again.structured_content["approval_id"] == asked[0].structured_content["approval_id"]
    assert _execute(gateway, make_token(other), "theirs").structured_content.get("approval_required")
    # ... and once one is decided, the next may wait.
    decided = ApprovalRequest.objects.get(approval_id=asked[0].structured_content["approval_id"])
    approval_decide(request=decided, approver=approver, approve=False, reason="not now")
    assert _execute(gateway, second, "three").structured_content.get("approval_required")
    assert faulty_calls(faulty_call_log, "record_note") == 0


def test_two_new_requests_for_two_tools_at_once_open_no_more_than_the_limit(
    gateway, member_on, admin_user, faulty_server, faulty_call_log, settings
):
    """Postgres: both calls are inside the gateway at once, held by a lock on the requests' table (SQLite has one
    writer, so its calls never overlap this way)."""
    from django.db import connection, transaction

    from governance.models import ApprovalRequest
    from governance.services.policy import tool_policy_ensure
    from tests.postgres_locks import until_sessions_wait_on_locks

    if connection.vendor != "postgresql":
        pytest.skip("needs Postgres: two calls inside the gateway at once, held by a lock")
    settings.SCOUT_APPROVAL_MAX_PENDING_PER_PERSON = 1
    member = member_on(faulty_server).user
    ping = faulty_server.tools.get(name="ping")  # a second tool needing approval: classified a critical write
    classify(
        tool_policy_ensure(tool=ping),
        actor=admin_user,
        operation_class="write",
        reversibility="irreversible",
        risk="critical",
    )
    tokens = [make_token(member), make_token(member)]
    calls = [(tokens[0], TOOL, {"note": "one"}), (tokens[1], "faulty::ping", {"text": "two"})]

    pool = ThreadPoolExecutor(max_workers=2)
    with transaction.atomic():
        with connection.cursor() as cursor:  # no request can be opened until this transaction ends; reads go on
            cursor.execute("LOCK TABLE governance_approvalrequest IN SHARE ROW EXCLUSIVE MODE")
        answers = [pool.submit(_call, gateway, *call) for call in calls]
        until_sessions_wait_on_locks(2, "both calls are inside the gateway")
    results = [answer.result(timeout=60) for answer in answers]
    pool.shutdown()

    assert ApprovalRequest.objects.filter(requester=member).count() == 1
    codes = sorted(
        "asked"
        if result.structured_content.get("approval_required")
        else result.structured_content["approval_rejected"]
        for result in results
    )
    assert codes == ["asked", "too_many_pending"], [r.structured_content for r in results]
    assert faulty_calls(faulty_call_log, "record_note") == 0 and faulty_calls(faulty_call_log, "ping") == 0


def _call(gateway: Any, token: str, tool_id: str, arguments: dict[str, Any]) -> Any:
    async def call() -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            return await client.call_tool("execute_tool", {"tool_id": tool_id, "arguments": arguments})

    return run(call)
