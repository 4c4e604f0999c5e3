"""Audit trail: an 'Approval requested (pending)' row says what became of the request since ('since: denied by
approver'), linked to the request for whoever may open it; the event itself stays as written."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.choices import AuditEventType, AuditOutcome
from governance.models import AuditEvent
from governance.roles import OPERATORS
from governance.services.approvals import approval_decide
from tests.governance.admin.test_approval_inbox import pending  # noqa: F401 - a request to decide

pytestmark = pytest.mark.django_db


def _asked_row(client, approval_id: str) -> str:
    """The 'Approval requested' row of the audit trail, searched by the request's id."""
    url = reverse("admin:governance_auditevent_changelist")
    page = client.get(url, {"q": approval_id, "event_type__exact": AuditEventType.APPROVAL_REQUESTED})
    assert page.status_code == 200
    [row] = [row for row in page.content.decode().split("<tr") if "Approval requested" in row and "<td" in row]
    return row


def test_a_decided_request_says_since_whom_linked_to_it(client, superuser, approver, pending):  # noqa: F811
    client.force_login(superuser)
    assert "since:" not in _asked_row(client, pending.approval_id)  # still pending: nothing to add

    approval_decide(request=pending, approver=approver, approve=False, reason="not during the freeze")
    row = _asked_row(client, pending.approval_id)
    link = reverse("admin:governance_approvalrequest_change", args=[pending.pk])
    assert f'since: <a href="{link}">denied by approver</a>' in row
    event = AuditEvent.objects.get(event_type=AuditEventType.APPROVAL_REQUESTED, approval_ref=pending.approval_id)
    assert event.outcome == AuditOutcome.PENDING  # immutable: the row tells the rest


def test_an_operator_reads_the_state_without_a_link_to_the_inbox(client, django_user_model, approver, pending):  # noqa: F811
    operator = django_user_model.objects.create_user(username="op", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    approval_decide(request=pending, approver=approver, approve=True, reason="")
    client.force_login(operator)
    row = _asked_row(client, pending.approval_id)
    assert "since: approved by approver" in row
    assert reverse("admin:governance_approvalrequest_change", args=[pending.pk]) not in row  # not theirs to open
