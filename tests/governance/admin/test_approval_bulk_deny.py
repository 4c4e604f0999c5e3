"""Deny selected: an approver refuses several pending calls at once with one reason, each by the single denial's
service (its checks, its audit event); only the requests waiting for them can be ticked, and a refusal is counted."""

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.urls import reverse

from governance.choices import ApprovalStatus
from governance.models import ApprovalRequest, AuditEvent
from governance.services.approvals import approval_decide, approval_request_create

pytestmark = pytest.mark.django_db
INBOX = "admin:governance_approvalrequest_changelist"


@pytest.fixture
def three(member_token, approver, grant, server, mutating_tool) -> list[ApprovalRequest]:
    """Three pending calls of the member's agent, which ``approver`` may decide."""
    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    grant(approver, server, "approve")
    return [
        approval_request_create(principal=principal, tool=mutating_tool, arguments={"repo": name})
        for name in ("alpha", "beta", "gamma")
    ]


def deny(client, requests, reason: str, **extra):
    data = {"action": "deny_selected", "index": "0", "reason": reason, **extra}
    data[ACTION_CHECKBOX_NAME] = [str(request.pk) for request in requests]
    return client.post(reverse(INBOX), data, follow=True)


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_an_approver_denies_the_selected_requests_with_one_reason_each_audited(client, approver, three):
    client.force_login(approver)
    response = deny(client, three[:2], "No repository is deleted this week.")
    assert messages_of(response) == ["Denied 2 requests: each agent is told your reason."]
    for request in three[:2]:
        request.refresh_from_db()
        assert (request.status, request.decided_by, request.decision_reason) == (
            ApprovalStatus.DENIED,
            approver,
            "No repository is deleted this week.",
        )
        event = AuditEvent.objects.get(event_type="approval.denied", approval_ref=request.approval_id)
        assert event.payload["reason"] == "No repository is deleted this week."
    three[2].refresh_from_db()
    assert three[2].status == ApprovalStatus.PENDING  # not ticked


def test_a_bulk_denial_without_a_reason_denies_nothing(client, approver, three):
    client.force_login(approver)
    response = deny(client, three, "   ")
    assert messages_of(response) == ["Nothing denied: a denial needs a reason, which each agent is told."]
    assert set(ApprovalRequest.objects.values_list("status", flat=True)) == {ApprovalStatus.PENDING}
    assert not AuditEvent.objects.filter(event_type="approval.denied").exists()


def test_requests_decided_meanwhile_are_counted_not_denied(client, approver, three, django_user_model, grant, server):
    other = django_user_model.objects.create_user(username="other-approver", is_staff=True)
    grant(other, server, "approve")
    approval_decide(request=three[0], approver=other, approve=True, reason="")  # decided while the page was open
    client.force_login(approver)
    response = deny(client, three, "Not today.")
    assert messages_of(response) == [
        "Denied 2 requests: each agent is told your reason.",
        "Not denied: 1 already decided.",
    ]
    three[0].refresh_from_db()
    assert three[0].status == ApprovalStatus.APPROVED and three[0].decided_by == other


def test_only_requests_the_person_may_decide_are_denied(client, superuser, three):
    """A superuser reads every request but decides only with an approve grant: the same refusal as one denial."""
    client.force_login(superuser)
    response = deny(client, three[:1], "Not today.")
    assert messages_of(response) == ["Not denied: 1 not yours to decide."]
    three[0].refresh_from_db()
    assert three[0].status == ApprovalStatus.PENDING


def test_a_request_outside_the_inbox_is_never_denied(client, outsider, grant, three):
    """An approver of another server who posts a request's id by hand: not in their inbox, not touched."""
    from tests.governance.factories import ServerFactory

    outsider.is_staff = True
    outsider.save()
    grant(outsider, ServerFactory(slug="jira"), "approve")
    client.force_login(outsider)
    deny(client, three, "Not mine, but no.")
    assert set(ApprovalRequest.objects.values_list("status", flat=True)) == {ApprovalStatus.PENDING}


def test_select_across_pages_denies_only_the_ticked_requests(client, approver, three):
    client.force_login(approver)
    deny(client, three[:1], "Only this one.", select_across="1")
    statuses = dict(ApprovalRequest.objects.values_list("pk", "status"))
    assert [statuses[request.pk] for request in three] == ["denied", "pending", "pending"]


def test_only_the_requests_waiting_for_the_person_can_be_ticked(client, approver, three, member):
    approval_decide(request=three[0], approver=approver, approve=False, reason="no")
    client.force_login(approver)
    html = client.get(reverse(INBOX)).content.decode()
    assert 'id="bulk-deny"' in html and "0 of 2 selected" in html
    for request, tickable in zip(three, (False, True, True), strict=True):
        row = html.split(request.approval_id, 1)[0].rsplit("<tr", 1)[1]
        assert (f'value="{request.pk}"' in row) is tickable, request


def test_no_bulk_denial_for_someone_nothing_waits_for(client, approver, three):
    for request in three:
        approval_decide(request=request, approver=approver, approve=False, reason="no")
    client.force_login(approver)
    html = client.get(reverse(INBOX)).content.decode()
    assert 'id="bulk-deny"' not in html and 'id="action-toggle"' not in html
