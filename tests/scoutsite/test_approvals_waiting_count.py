"""Every count of waiting approvals (the header badge, the approver's home, the decide page's "N more waiting") counts
what the approver may decide now, as the inbox's "Waiting for you" lists it: not a request whose requester lost
access, nor one whose token was revoked or expired, nor their own."""

import re

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.models import ServerUserObjectPermission
from governance.principals import principal_for_user
from governance.roles import APPROVERS
from governance.services.approvals import approval_request_create
from governance.services.tokens import api_token_create, api_token_revoke, api_token_verify
from tests.governance.factories import in_days

pytestmark = pytest.mark.django_db
INBOX = reverse("admin:governance_approvalrequest_changelist")


@pytest.fixture
def waiting(django_user_model, grant, server, mutating_tool):
    """An approver and four pending requests of which one waits for them: {name: request}, the approver."""
    approver = django_user_model.objects.create_user(username="appr", is_staff=True)
    approver.groups.add(Group.objects.get(name=APPROVERS))
    grant(Group.objects.get(name=APPROVERS), server, "approve")
    asked = {}
    for name in ("live", "lost", "revoked"):
        person = django_user_model.objects.create_user(username=name)
        grant(person, server, "discover", "execute")
        token, raw = api_token_create(user=person, name="t", scopes=["discover", "execute"], expires_at=in_days(30))
        asked[name] = approval_request_create(principal=api_token_verify(raw), tool=mutating_tool, arguments={})
        if name == "revoked":
            api_token_revoke(token=token)
    grant(approver, server, "discover", "execute")
    asked["own"] = approval_request_create(principal=principal_for_user(approver), tool=mutating_tool, arguments={})
    ServerUserObjectPermission.objects.filter(user__username="lost", permission__codename="execute_server").delete()
    return asked, approver


def _badge(html: str) -> int:
    return int(re.search(r'id="pending-approvals".*?<strong>(\d+)</strong>', html, re.S).group(1))


def test_the_badge_and_the_home_count_only_what_the_approver_may_decide(client, waiting):
    asked, approver = waiting
    client.force_login(approver)
    home = client.get(reverse("admin:index")).content.decode()
    assert _badge(home) == 1
    assert 'class="scout-count">1<' in home
    panel = home.split('id="approver-home"')[1].split("</section>")[0]
    assert reverse("admin:governance_approvalrequest_decide", args=[asked["live"].pk]) in panel
    assert '<td data-label="Asked by">live<' in panel  # who asked, as the inbox names them
    for name in ("lost", "revoked", "own"):
        assert reverse("admin:governance_approvalrequest_decide", args=[asked[name].pk]) not in panel


def test_the_badge_leads_to_the_requests_it_counts(client, waiting):
    asked, approver = waiting
    client.force_login(approver)
    page = client.get(INBOX).content.decode()
    assert f'href="{INBOX}?waiting=you"' in page
    listed = client.get(INBOX, {"waiting": "you"}).content.decode()
    assert listed.count('class="scout-button"') == 1 == _badge(listed)
    assert asked["live"].approval_id in listed and asked["lost"].approval_id not in listed


def test_after_a_decision_the_next_and_the_rest_are_what_waits(
    client, waiting, django_user_model, grant, server, mutating_tool
):
    asked, approver = waiting
    other = django_user_model.objects.create_user(username="other")
    grant(other, server, "discover", "execute")
    approval_request_create(principal=principal_for_user(other), tool=mutating_tool, arguments={"n": 2})
    client.force_login(approver)
    decide = reverse("admin:governance_approvalrequest_decide", args=[asked["live"].pk])
    page = client.post(decide, {"_deny": "1", "reason": "not now"}, follow=True).content.decode()
    assert 'id="next-approval"' in page and "more waiting" not in page  # one left: the other's, not the 3 unusable
    assert _badge(page) == 1


def test_the_count_agrees_with_the_list_over_many_requests_of_each_asker(
    waiting, django_user_model, grant, server, mutating_tool
):
    """The badge's count reads groups (who asked, tool), not requests: several requests of one token or one person
    count each, an unusable asker's count none, expired and decided ones none."""
    from governance.choices import ApprovalStatus
    from governance.models import ApprovalRequest
    from governance.selectors import approval_requests_waiting_count, approval_requests_waiting_for

    asked, approver = waiting
    dana = django_user_model.objects.create_user(username="dana")
    grant(dana, server, "discover", "execute")
    _, raw = api_token_create(user=dana, name="t", scopes=["discover", "execute"], expires_at=in_days(30))
    for n in range(3):
        approval_request_create(principal=api_token_verify(raw), tool=mutating_tool, arguments={"n": n})
        approval_request_create(principal=principal_for_user(dana), tool=mutating_tool, arguments={"s": n})
    lost = django_user_model.objects.get(username="lost")
    for n in range(2):
        approval_request_create(principal=principal_for_user(lost), tool=mutating_tool, arguments={"l": n})
    expired, decided = ApprovalRequest.objects.filter(requester=dana).order_by("pk")[:2]
    ApprovalRequest.objects.filter(pk=expired.pk).update(expires_at=in_days(-1))
    ApprovalRequest.objects.filter(pk=decided.pk).update(status=ApprovalStatus.DENIED)

    listed = approval_requests_waiting_for(user=approver)
    assert approval_requests_waiting_count(user=approver) == len(listed) == 1 + 6 - 2  # live's, dana's 6 less 2
    grant(lost, server, "execute")  # lost's three (two in a session, one by token) wait again
    assert approval_requests_waiting_count(user=approver) == len(approval_requests_waiting_for(user=approver)) == 8
