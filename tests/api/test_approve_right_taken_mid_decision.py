"""An approver's right taken away while their decision is in flight (redteam27, T5/Z6): the decision checked the
right, then wrote itself with nothing between the two, so a revocation committed in between (the approve grant, the
group's grant, the deciding token) was followed by a decision of someone who no longer had the right. Postgres: the
test holds the request's row so the decision is under way (its right checked) when the revocation comes."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth.models import Group
from django.db import connection, transaction

from governance.choices import AuditEventType
from governance.models import ApiToken, ApprovalRequest, AuditEvent
from governance.services.permissions import permission_revoke
from governance.services.tokens import api_token_revoke
from tests.api.conftest import api_db, make_token
from tests.postgres_locks import sessions_waiting_on_locks, until_sessions_wait_on_locks

pytestmark = api_db


def _approver_with_right(taken: str, approver, catalog, grant):
    """Give ``approver`` the approve right on github (by a grant of their own, or their group's); returns its holder
    and the raw token they decide with."""
    holder = Group.objects.create(name="approvers") if taken == "group_grant" else approver
    if taken == "group_grant":
        approver.groups.add(holder)
    grant(holder, catalog.github, "approve")
    return holder, make_token(approver, ["api", "approve"])


@pytest.mark.parametrize("taken", ["grant", "group_grant", "token"])
def test_a_decision_in_flight_is_never_recorded_after_its_approvers_right_was_taken(
    api, pending, approver, catalog, grant, superuser, taken
):
    if connection.vendor != "postgresql":
        pytest.skip("needs Postgres: a decision held under way by a row lock while the right is taken away")
    holder, raw = _approver_with_right(taken, approver, catalog, grant)
    token = ApiToken.objects.get(user=approver)

    def take() -> None:
        try:
            if taken == "token":
                api_token_revoke(token=token, actor=superuser)
            else:
                permission_revoke(actor=superuser, target=catalog.github, action="approve", holder=holder)
        finally:
            connection.close()

    pool = ThreadPoolExecutor(max_workers=2)
    with transaction.atomic():
        ApprovalRequest.objects.select_for_update().filter(pk=pending.pk).exists()  # the decision's write waits
        deciding = pool.submit(api.post, f"approvals/{pending.approval_id}/approve/", token=raw, json={})
        until_sessions_wait_on_locks(1, "the decision is under way, its right checked")
        taking = pool.submit(take)
        # The revocation either ends at once (nothing makes it wait for the decision in flight) or waits for it.
        deadline = time.monotonic() + 30
        while not taking.done() and sessions_waiting_on_locks() < 2:
            assert time.monotonic() < deadline, "the revocation neither ended nor waited"
            time.sleep(0.05)
    response = deciding.result(timeout=60)
    taking.result(timeout=60)
    pool.shutdown()

    taken_event = AuditEventType.TOKEN_REVOKED if taken == "token" else AuditEventType.REVOKE
    events = AuditEvent.objects.filter(event_type__in=[AuditEventType.APPROVAL_APPROVED, taken_event]).order_by("pk")
    pending.refresh_from_db()
    # Either order of the two is sound, each seen whole by the other: here the decision had its lock first, so the
    # revocation waits for it; the decision never lands after the revocation, by someone without the right.
    assert list(events.values_list("event_type", flat=True)) == [AuditEventType.APPROVAL_APPROVED, taken_event]
    assert pending.status == "approved"
    # The answer reads the request back through the inbox, after the revocation: a 404 when the right is gone.
    assert response.status_code in (200, 404)


@pytest.mark.parametrize("taken", ["grant", "group_grant", "token"])
def test_a_right_taken_while_the_decision_waits_for_its_decider_is_seen_and_nothing_decided(
    api, pending, approver, catalog, grant, superuser, taken
):
    """The other order: the revocation holds the decider's row first (the test holds it and revokes in the same
    transaction), so the decision, its right checked at the door, waits, then finds the right gone: 404, still
    pending, no approval recorded."""
    from django.contrib.auth import get_user_model

    if connection.vendor != "postgresql":
        pytest.skip("needs Postgres: a decision held under way by a row lock while the right is taken away")
    holder, raw = _approver_with_right(taken, approver, catalog, grant)

    pool = ThreadPoolExecutor(max_workers=1)
    with transaction.atomic():
        get_user_model().objects.select_for_update().filter(pk=approver.pk).exists()
        deciding = pool.submit(api.post, f"approvals/{pending.approval_id}/approve/", token=raw, json={})
        until_sessions_wait_on_locks(1, "the decision waits for its decider's row")
        if taken == "token":
            api_token_revoke(token=ApiToken.objects.get(user=approver), actor=superuser)
        else:
            permission_revoke(actor=superuser, target=catalog.github, action="approve", holder=holder)
    response = deciding.result(timeout=60)
    pool.shutdown()

    pending.refresh_from_db()
    assert response.status_code == 404, response.text  # as for a request not in the inbox
    assert pending.status == "pending" and pending.decided_by_id is None
    assert not AuditEvent.objects.filter(event_type=AuditEventType.APPROVAL_APPROVED).exists()
