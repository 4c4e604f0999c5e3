"""The approver inbox over the Django test client: approver decides; requester and others are refused."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from governance.choices import ApprovalStatus
from governance.models import ApprovalRequest, AuditEvent
from governance.services.approvals import approval_decide, approval_request_create

pytestmark = pytest.mark.django_db

HOSTILE_ARGS = {"title": "<script>alert(1)</script>", "body": "line1\nline2"}


@pytest.fixture
def pending(member_token, approver, grant, server, mutating_tool):
    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    grant(approver, server, "approve")
    return approval_request_create(principal=principal, tool=mutating_tool, arguments=HOSTILE_ARGS)


def decide_url(request) -> str:
    return reverse("admin:governance_approvalrequest_decide", args=[request.pk])


def test_inbox_lists_pending_first_with_envelope_and_escaped_arguments(client, approver, pending, member_token):
    _, _, principal = member_token
    done = approval_request_create(principal=principal, tool=pending.tool, arguments={"other": 1})
    done.status = ApprovalStatus.DENIED
    done.save()
    client.force_login(approver)
    listing = client.get(reverse("admin:governance_approvalrequest_changelist"))
    assert listing.status_code == 200
    body = listing.content.decode()
    assert body.index(pending.approval_id) < body.index(done.approval_id)

    page = client.get(decide_url(pending))
    assert page.status_code == 200
    html = page.content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    for text in ("human subject: member", "agent: triage-agent", "tenant: -", "github::delete_repo", "High"):
        assert text in html


def test_approver_approves_with_a_reason(client, approver, pending):
    client.force_login(approver)
    response = client.post(decide_url(pending), {"reason": "checked with the team", "_approve": "1"})
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.APPROVED and pending.decided_by == approver
    assert pending.decision_reason == "checked with the team"
    assert AuditEvent.objects.filter(event_type="approval.approved", approval_ref=pending.approval_id).count() == 1


def test_approver_denies_with_a_reason(client, approver, pending):
    client.force_login(approver)
    response = client.post(decide_url(pending), {"reason": "not during the freeze", "_deny": "1"})
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.DENIED


def test_deny_without_reason_is_refused(client, approver, pending):
    client.force_login(approver)
    response = client.post(decide_url(pending), {"reason": "", "_deny": "1"})
    assert response.status_code == 409
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_requester_cannot_approve_their_own_request_in_the_admin(client, pending, grant, server):
    requester = pending.requester
    requester.is_staff = True
    requester.save()
    grant(requester, server, "approve")  # even with approve rights
    client.force_login(requester)
    response = client.post(decide_url(pending), {"reason": "mine", "_approve": "1"})
    assert response.status_code == 403
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_staff_without_approve_permission_cannot_see_or_decide(client, owner, grant, server, pending):
    grant(owner, server, "discover", "execute")
    client.force_login(owner)
    assert client.get(reverse("admin:governance_approvalrequest_changelist")).status_code == 403
    response = client.post(decide_url(pending), {"reason": "x", "_approve": "1"})
    assert response.status_code == 403
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_approver_of_another_server_does_not_see_the_request(client, outsider, grant, pending):
    from tests.governance.factories import ServerFactory

    outsider.is_staff = True
    outsider.save()
    grant(outsider, ServerFactory(slug="jira"), "approve")
    client.force_login(outsider)
    listing = client.get(reverse("admin:governance_approvalrequest_changelist"))
    assert listing.status_code == 200
    assert pending.approval_id not in listing.content.decode()
    assert client.post(decide_url(pending), {"reason": "x", "_approve": "1"}).status_code == 404
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_superuser_reads_every_request_but_needs_a_grant_to_decide(client, superuser, pending):
    client.force_login(superuser)
    assert pending.approval_id in client.get(reverse("admin:governance_approvalrequest_changelist")).content.decode()
    assert client.post(decide_url(pending), {"reason": "x", "_approve": "1"}).status_code == 403
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_an_empty_inbox_says_when_requests_arrive_and_a_filtered_one_says_it_is_filtered(
    client, approver, grant, server
):
    grant(approver, server, "approve")
    client.force_login(approver)
    url = reverse("admin:governance_approvalrequest_changelist")
    empty = client.get(url).content.decode()
    assert 'id="inbox-empty"' in empty and "when an agent calls a tool whose risk needs" in empty
    filtered = client.get(url + "?status__exact=denied").content.decode()
    assert 'id="inbox-empty"' in filtered and "No request matches these filters." in filtered


def test_an_inbox_with_requests_shows_no_empty_note(client, approver, pending):
    client.force_login(approver)
    html = client.get(reverse("admin:governance_approvalrequest_changelist")).content.decode()
    assert pending.approval_id in html and 'id="inbox-empty"' not in html


def test_a_past_decision_is_found_by_its_reason_and_says_who_decided_and_why(client, approver, pending):
    # The list said "Denied" and nothing else, and its search did not read reasons: finding why a call was refused
    # meant opening requests one by one.
    client.force_login(approver)
    client.post(decide_url(pending), {"reason": "not during the freeze", "_deny": "1"})
    pending.refresh_from_db()
    client.get(reverse("admin:index"))  # shows the decision's message, which names the request
    found = client.get(reverse("admin:governance_approvalrequest_changelist"), {"q": "freeze"}).content.decode()
    assert pending.approval_id in found
    when = timezone.localtime(pending.decided_at).strftime("%Y-%m-%d %H:%M")
    assert f"by approver {when}: “not during the freeze”" in found
    nothing = client.get(reverse("admin:governance_approvalrequest_changelist"), {"q": "thaw"}).content.decode()
    assert pending.approval_id not in nothing


def test_inbox_rows_tell_calls_apart_by_their_arguments_and_say_when_each_lapses(
    client, approver, pending, member_token
):
    """Twenty calls of one tool differ only by their arguments: each row shows them short (escaped, a long value cut)
    and the time it must be decided by, or that it lapsed undecided."""
    _, _, principal = member_token
    long = approval_request_create(principal=principal, tool=pending.tool, arguments={"body": "y" * 300})
    client.force_login(approver)

    def row(request) -> str:  # the whole row: the request's id is its last cell
        html = client.get(reverse("admin:governance_approvalrequest_changelist")).content.decode()
        at = html.index(request.approval_id)
        return html[html.rindex("<tr", 0, at) : html.index("</tr>", at)]

    shown = row(pending)
    assert "body: &quot;line1\\nline2&quot; · title: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in shown
    deadline = f"{timezone.localtime(pending.expires_at):%Y-%m-%d %H:%M}"
    assert f'decide before <span class="scout-time">{deadline}</span>' in shown  # the time on one line
    assert "y" * 30 in row(long) and "y" * 40 not in row(long)
    approval_decide(request=long, approver=approver, approve=True, reason="")
    long.refresh_from_db()
    until = f"{timezone.localtime(long.expires_at):%Y-%m-%d %H:%M}"
    assert f"the agent may make the call once, before {until}" in row(long)
    ApprovalRequest.objects.filter(pk=pending.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    assert "expired, undecided" in row(pending)


def test_inbox_rows_name_the_agent_that_asked(client, approver, pending):
    """The home page and the decide page said "member via triage-agent", the inbox only "member": which of a person's
    agents keeps asking was read by opening each request."""
    client.force_login(approver)
    html = client.get(reverse("admin:governance_approvalrequest_changelist")).content.decode()
    row = html.split(pending.approval_id, 1)[1].split("</tr>", 1)[0]
    assert 'member<br><small class="asking-agent">via triage-agent</small>' in row


def _header_classes(html: str) -> dict[str, str]:
    """Each column's header classes, by its field name."""
    return {name: classes for classes, name in re.findall(r'<th scope="col" class="([^"]*column-(\w+)[^"]*)"', html)}


def test_the_inbox_marks_no_column_sorted_and_sorts_status_pending_first(client, approver, pending, member_token):
    """Rows come pending first, which no column says: "request id" was marked sorted (an opaque id, marked by the
    model's newest-first order behind it) and is not sortable now. Sorted by status, the rows come pending first
    too, not in the statuses' alphabetical order (denied before pending)."""
    _, _, principal = member_token
    done = approval_request_create(principal=principal, tool=pending.tool, arguments={"other": 1})
    ApprovalRequest.objects.filter(pk=done.pk).update(status=ApprovalStatus.DENIED)  # the newer one, decided
    client.force_login(approver)
    inbox = reverse("admin:governance_approvalrequest_changelist")
    html = client.get(inbox).content.decode()
    headers = _header_classes(html)
    assert not [name for name, classes in headers.items() if "sorted" in classes.split()], headers
    assert "sortable" not in headers["request_column"], headers
    assert html.index(pending.approval_id) < html.index(done.approval_id)
    status_header = html.split("column-status_column", 1)[1].split("</th>", 1)[0]
    (sort,) = re.findall(r'href="(\?o=[^"]+)"', status_header)
    body = client.get(inbox + sort.replace("&amp;", "&")).content.decode()
    assert _header_classes(body)["status_column"].split()[-2:] == ["sorted", "ascending"]
    assert body.index(pending.approval_id) < body.index(done.approval_id)
