"""Concurrency on one approval (Z9), on whichever database the run uses: of two uses exactly one wins, and of two
decisions exactly one is kept."""

import threading

import pytest
from django.db import connection

from governance.choices import ApprovalStatus
from governance.models import ApprovalRequest, AuditEvent
from governance.principals import principal_for_user
from governance.services.approvals import ApprovalError, approval_consume, approval_decide, approval_request_create
from governance.services.permissions import permission_grant
from tests.governance.factories import ServerFactory, ToolFactory

ARGS = {"repo": "acme/site"}


def _at_once(*calls) -> list[str]:
    """Run ``calls`` in threads released together; each one's outcome: "ok", an ApprovalError code, or the error."""
    barrier = threading.Barrier(len(calls))
    outcomes: list[str] = [""] * len(calls)

    def run(index: int, call) -> None:
        try:
            barrier.wait(timeout=60)
            call()
            outcomes[index] = "ok"
        except ApprovalError as exc:
            outcomes[index] = exc.code
        except Exception as exc:  # noqa: BLE001 - recorded and asserted by the caller
            outcomes[index] = f"error: {exc!r}"
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index, call)) for index, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("attempt", range(3))
def test_two_concurrent_uses_exactly_one_wins(member, approver, superuser, attempt):
    server = ServerFactory(slug=f"race-{attempt}")
    tool = ToolFactory(server=server, name="delete_repo", annotations=None)
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=server, action=action, holder=member)
    permission_grant(actor=superuser, target=server, action="approve", holder=approver)
    principal = principal_for_user(member, agent="racer")
    request = approval_request_create(principal=principal, tool=tool, arguments=ARGS)
    approval_decide(request=request, approver=approver, approve=True, reason="go")

    def use() -> None:
        approval_consume(approval_id=request.approval_id, principal=principal, tool=tool, arguments=ARGS)

    outcomes = _at_once(use, use)

    assert sorted(outcomes) == ["ok", "used"], outcomes
    request.refresh_from_db()
    assert request.status == ApprovalStatus.CONSUMED
    assert AuditEvent.objects.filter(event_type="approval.consumed", approval_ref=request.approval_id).count() == 1
    assert ApprovalRequest.objects.filter(status=ApprovalStatus.CONSUMED).count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("attempt", range(3))
def test_two_approvers_deciding_one_request_at_once_make_one_decision(
    member, approver, superuser, django_user_model, attempt
):
    """One approves while another denies (an inbox page and the REST API, say): exactly one decision is kept and
    audited; the other is told the request is no longer pending."""
    second = django_user_model.objects.create_user(username=f"approver-two-{attempt}", password="x")
    server = ServerFactory(slug=f"decide-race-{attempt}")
    tool = ToolFactory(server=server, name="delete_repo", annotations=None)
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=server, action=action, holder=member)
    for person in (approver, second):
        permission_grant(actor=superuser, target=server, action="approve", holder=person)
    request = approval_request_create(principal=principal_for_user(member, agent="racer"), tool=tool, arguments=ARGS)

    approving, denying = _at_once(
        lambda: approval_decide(request=request, approver=approver, approve=True, reason="decided"),
        lambda: approval_decide(request=request, approver=second, approve=False, reason="decided"),
    )

    assert sorted([approving, denying]) == ["not_pending", "ok"], (approving, denying)
    request.refresh_from_db()
    approved = approving == "ok"
    assert request.status == (ApprovalStatus.APPROVED if approved else ApprovalStatus.DENIED)
    assert request.decided_by_id == (approver.pk if approved else second.pk)
    decisions = AuditEvent.objects.filter(
        event_type__in=["approval.approved", "approval.denied"], approval_ref=request.approval_id
    )
    assert list(decisions.values_list("event_type", flat=True)) == [
        "approval.approved" if approved else "approval.denied"
    ]
