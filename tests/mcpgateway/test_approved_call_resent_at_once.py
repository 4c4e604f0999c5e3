"""A call that needs approval sent twice at once (F13, Z9, T17): a 2026-07-28 client re-sends a call whose stream
broke, so the first and its repeat can both be in the gateway before either has finished.

- Approved, with one idempotency key: the upstream runs it once, and the repeat is answered as a repeat of that key
  (still running, or its result), never told that the approval was used and to ask for a new one: an agent told
  that asks an approver again, and a second approval runs the call a second time.
- Not yet asked for: one approval request is opened, not two an approver could both approve.

Postgres only: the tests hold a lock so both calls are inside the gateway at once, which is deterministic there
(SQLite has one writer: its calls never overlap this way).
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from mcpgateway.models import IdempotencyRecord
from tests.postgres_locks import until_sessions_wait_on_locks

from .conftest import faulty_calls, gateway_db, grant, make_user
from .test_access_change_mid_call import _send

pytestmark = [gateway_db, pytest.mark.slow]
TOOL = "faulty::record_note"
ARGUMENTS = {"note": "ship the release"}


def _needs_postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs Postgres: two calls inside the gateway at once, held by a lock")


def test_an_approved_call_sent_twice_at_once_with_one_key_runs_once_and_the_repeat_is_answered_as_one(
    gateway, member_on, admin_user, faulty_server, faulty_call_log
):
    _needs_postgres()
    answers = _approved_call_sent_twice(
        gateway, admin_user, faulty_server, member_on(faulty_server).token, idempotency_key="k-1"
    )

    assert faulty_calls(faulty_call_log, "record_note") == 1
    ran = [a for a in answers if not a.get("isError")]
    assert len(ran) == 1 and ran[0]["content"][0]["text"] == "stored 16 characters", answers
    other = answers[1 - answers.index(ran[0])]
    structured = other.get("structuredContent") or {}
    # A repeat of the key: its result, or "still running" (wait for it); never "used: request a new one".
    assert "approval_rejected" not in structured, other
    assert other == ran[0] or structured.get("idempotency_conflict") is True, other


def test_an_approved_call_sent_twice_at_once_without_a_key_runs_once(
    gateway, member_on, admin_user, faulty_server, faulty_call_log
):
    """Z9 over HTTP: two concurrent uses of one approval, exactly one runs; the other is told it was used."""
    _needs_postgres()
    answers = _approved_call_sent_twice(
        gateway, admin_user, faulty_server, member_on(faulty_server).token, idempotency_key=None
    )

    assert faulty_calls(faulty_call_log, "record_note") == 1
    assert sorted(bool(a.get("isError")) for a in answers) == [False, True], answers
    (refused,) = [a for a in answers if a.get("isError")]
    assert refused["structuredContent"]["approval_rejected"] == "used"


def test_an_approved_call_sent_twice_at_once_with_two_keys_runs_once_and_frees_the_refused_key(
    gateway, member_on, admin_user, faulty_server, faulty_call_log
):
    """redteam49, Z9/T17: each copy of the approved call with a key of its own (an agent that retries with a fresh key
    instead of the same one): two keys claimed, yet one approval runs one call; the other is told it was used, and
    its key is not kept (sent again it is claimed anew, not answered "still running" or with a stored refusal)."""
    _needs_postgres()
    answers = _approved_call_sent_twice(
        gateway, admin_user, faulty_server, member_on(faulty_server).token, idempotency_key="k-1", second_key="k-2"
    )

    assert faulty_calls(faulty_call_log, "record_note") == 1
    assert sorted(bool(a.get("isError")) for a in answers) == [False, True], answers
    (refused,) = [a for a in answers if a.get("isError")]
    assert refused["structuredContent"]["approval_rejected"] == "used"
    assert len(IdempotencyRecord.objects.all()) == 1  # the call that ran keeps its key; the refused one none


def _approved_call_sent_twice(
    gateway, admin_user, faulty_server, token: str, *, idempotency_key: str | None, second_key: str | None = None
) -> list[dict]:
    """The call of the member with ``token`` approved, then sent twice while a lock on the approval's row keeps both
    inside the gateway (as an approver's page or the sweep may hold it); the two answers. The second is sent with
    ``second_key`` when given, else with the first's key."""
    from governance.models import ApprovalRequest
    from governance.services.approvals import approval_decide, approval_request_create
    from governance.services.tokens import api_token_verify

    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, faulty_server, approver, "discover", "approve")
    tool = faulty_server.tools.get(name="record_note")
    request = approval_request_create(principal=api_token_verify(token), tool=tool, arguments=ARGUMENTS)
    approval_decide(request=request, approver=approver, approve=True, reason="go")

    call = {"tool_id": TOOL, "arguments": ARGUMENTS, "approval_id": request.approval_id}
    if idempotency_key is not None:
        call["idempotency_key"] = idempotency_key
    with transaction.atomic():
        ApprovalRequest.objects.select_for_update().get(pk=request.pk)
        repeat_call = call if second_key is None else {**call, "idempotency_key": second_key}
        first, repeat = _send(gateway, token, call), _send(gateway, token, repeat_call)
        until_sessions_wait_on_locks(2, "both calls are inside the gateway")
    return [first.result(timeout=60), repeat.result(timeout=60)]


def test_a_call_sent_twice_at_once_before_any_approval_opens_one_request(
    gateway, member_on, faulty_server, faulty_call_log
):
    _needs_postgres()
    from governance.models import ApprovalRequest

    token = member_on(faulty_server).token
    call = {"tool_id": TOOL, "arguments": ARGUMENTS}
    with transaction.atomic():
        with connection.cursor() as cursor:  # no request can be opened until this transaction ends; reads go on
            cursor.execute("LOCK TABLE governance_approvalrequest IN SHARE ROW EXCLUSIVE MODE")
        first, repeat = _send(gateway, token, call), _send(gateway, token, call)
        until_sessions_wait_on_locks(2, "both calls are inside the gateway")
    answers = [first.result(timeout=60), repeat.result(timeout=60)]

    assert ApprovalRequest.objects.count() == 1, list(ApprovalRequest.objects.values_list("approval_id", flat=True))
    (request,) = ApprovalRequest.objects.all()
    assert [a["structuredContent"]["approval_id"] for a in answers] == [request.approval_id] * 2, answers
    assert faulty_calls(faulty_call_log, "record_note") == 0
