"""New approval requests reach approvers: an e-mail to each person who may approve the tool, and a webhook
signed with HMAC-SHA256, sent after commit from a task (never inside the agent's call)."""

import hashlib
import hmac
import json

import pytest
from django.contrib.auth.models import Group

from governance.services.approvals import approval_request_create

pytestmark = pytest.mark.django_db
SECRET = "webhook-test-secret"


@pytest.fixture
def setup(member_token, grant, server, mutating_tool, django_user_model):
    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    direct = django_user_model.objects.create_user(username="ann", email="ann@example.com", is_staff=True)
    grant(direct, server, "approve")
    via_group = django_user_model.objects.create_user(username="bob", email="bob@example.com", is_staff=True)
    group = Group.objects.create(name="payments approvers")
    via_group.groups.add(group)
    grant(group, mutating_tool, "approve")
    django_user_model.objects.create_user(username="carl", email="carl@example.com", is_staff=True)  # no grant
    principal.user.email = "member@example.com"
    principal.user.save()
    return principal


def test_approvers_are_emailed_after_commit(setup, mutating_tool, mailoutbox, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        request = approval_request_create(principal=setup, tool=mutating_tool, arguments={"name": "secret-repo"})
        assert mailoutbox == []  # nothing before the request is committed
    (mail,) = mailoutbox
    assert sorted(mail.to) == ["ann@example.com", "bob@example.com"]  # not carl (no grant), not the requester
    assert "github::delete_repo" in mail.subject and "High risk" in mail.subject
    assert f"/admin/governance/approvalrequest/{request.pk}/decide/" in mail.body
    assert "secret-repo" not in mail.body  # argument values stay in the admin


def test_the_webhook_gets_signed_json(setup, mutating_tool, settings, receiver, django_capture_on_commit_callbacks):
    url, received = receiver
    settings.SCOUT_APPROVAL_WEBHOOK_URL = url
    settings.SCOUT_APPROVAL_WEBHOOK_SECRET = SECRET
    with django_capture_on_commit_callbacks(execute=True):
        request = approval_request_create(principal=setup, tool=mutating_tool, arguments={"name": "x"})
    ((headers, body),) = received
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["x-scout-signature"], expected)
    payload = json.loads(body)
    assert payload["approval_id"] == request.approval_id and payload["risk_class"] == "high"
    assert payload["decide_url"].endswith(f"/admin/governance/approvalrequest/{request.pk}/decide/")


def test_no_webhook_without_a_url(setup, mutating_tool, settings, receiver, django_capture_on_commit_callbacks):
    _, received = receiver
    settings.SCOUT_APPROVAL_WEBHOOK_URL = ""
    with django_capture_on_commit_callbacks(execute=True):
        approval_request_create(principal=setup, tool=mutating_tool, arguments={"name": "x"})
    assert received == []


def test_a_tenants_request_is_mailed_only_to_approvers_of_that_tenant(
    setup, acme_token, mutating_tool, mailoutbox, django_capture_on_commit_callbacks
):
    """Z12: ann (in acme) and bob (in no tenant) may both approve the tool; acme's request reaches ann only."""
    from django.contrib.auth import get_user_model

    from governance.models import Tenant

    Tenant.objects.get(slug="acme").members.add(get_user_model().objects.get(username="ann"))
    _, _, in_acme = acme_token
    with django_capture_on_commit_callbacks(execute=True):
        approval_request_create(principal=in_acme, tool=mutating_tool, arguments={"name": "acme-repo"})
    assert sorted(address for message in mailoutbox for address in message.to) == ["ann@example.com"]


def test_the_email_says_which_agent_asks_only_when_there_is_one(
    setup, mutating_tool, mailoutbox, django_capture_on_commit_callbacks
):
    from governance.principals import principal_for_user

    with django_capture_on_commit_callbacks(execute=True):
        approval_request_create(principal=setup, tool=mutating_tool, arguments={"name": "a"})
    with django_capture_on_commit_callbacks(execute=True):  # the same person, signed in without an agent
        approval_request_create(principal=principal_for_user(setup.user), tool=mutating_tool, arguments={"name": "b"})
    with_agent, without_agent = mailoutbox
    assert "member via triage-agent asks to call github::delete_repo" in with_agent.body
    assert "member asks to call github::delete_repo" in without_agent.body
