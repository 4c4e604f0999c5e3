"""New approval requests reach approvers: an e-mail to each person who may approve the tool, and a webhook
signed with HMAC-SHA256, sent after commit from a task (never inside the agent's call)."""

import hashlib
import hmac
import json
import time

import pytest
from django.contrib.auth.models import Group

from governance.services.approvals import approval_request_create

pytestmark = pytest.mark.django_db
SECRET = "webhook-test-secret"
TOLERANCE_SECONDS = 300  # what the README tells receivers to accept


def signed_with(secret: str, headers: dict, body: bytes, *, now: float | None = None) -> bool:
    """A receiver's check, as the README describes it: ``X-Scout-Signature: t=<unix seconds>,v1=<hex>`` where v1 is
    HMAC-SHA256 of ``<t>.<raw body>`` with the secret, and t within the tolerance of the receiver's clock."""
    fields = dict(part.split("=", 1) for part in headers["x-scout-signature"].split(","))
    signed = f"{fields['t']}.".encode() + body
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    fresh = abs((time.time() if now is None else now) - int(fields["t"])) <= TOLERANCE_SECONDS
    return fresh and hmac.compare_digest(fields["v1"], expected)


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
    assert signed_with(SECRET, headers, body)
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


def test_a_captured_webhook_call_cannot_be_replayed_later(
    setup, mutating_tool, settings, receiver, django_capture_on_commit_callbacks
):
    """The signature covers a timestamp as well as the body, so a call captured on the way (a proxy log, a leaky
    receiver) verifies only within the tolerance: replayed later, or with its timestamp moved on, it fails."""
    url, received = receiver
    settings.SCOUT_APPROVAL_WEBHOOK_URL, settings.SCOUT_APPROVAL_WEBHOOK_SECRET = url, SECRET
    before = int(time.time())
    with django_capture_on_commit_callbacks(execute=True):
        approval_request_create(principal=setup, tool=mutating_tool, arguments={"name": "x"})
    ((headers, body),) = received
    sent_at = int(dict(part.split("=", 1) for part in headers["x-scout-signature"].split(","))["t"])
    assert before <= sent_at <= int(time.time())
    assert signed_with(SECRET, headers, body, now=sent_at)
    assert not signed_with(SECRET, headers, body, now=sent_at + TOLERANCE_SECONDS + 1)  # replayed later
    moved = {**headers, "x-scout-signature": headers["x-scout-signature"].replace(f"t={sent_at}", f"t={sent_at + 600}")}
    assert not signed_with(SECRET, moved, body, now=sent_at + 600)  # its timestamp moved on: the HMAC no longer fits


def test_the_webhook_goes_straight_to_its_receiver_never_through_a_proxy_from_the_environment(
    setup, mutating_tool, settings, receiver, tenant_receiver, monkeypatch, django_capture_on_commit_callbacks
):
    """httpx reads HTTP(S)_PROXY from the worker's environment by default: a proxy set there for something else
    read every approval request (who asks for which tool) and could answer 2xx for a receiver never reached."""
    url, received = receiver
    proxy_url, through_proxy = tenant_receiver  # records what it is sent, as a proxy would see it
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, proxy_url.removesuffix("/hook"))
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    settings.SCOUT_APPROVAL_WEBHOOK_URL, settings.SCOUT_APPROVAL_WEBHOOK_SECRET = url, SECRET
    with django_capture_on_commit_callbacks(execute=True):
        approval_request_create(principal=setup, tool=mutating_tool, arguments={"name": "x"})
    assert through_proxy == [] and len(received) == 1


def test_a_webhook_over_plain_http_to_another_host_is_refused_and_recorded(
    setup, mutating_tool, settings, django_capture_on_commit_callbacks
):
    from governance.models import NotificationAttempt
    from governance.services.notifications import webhook_url_refused

    settings.SCOUT_APPROVAL_WEBHOOK_URL = "http://hooks.example.test/approvals"
    with django_capture_on_commit_callbacks(execute=True):
        approval_request_create(principal=setup, tool=mutating_tool, arguments={"name": "x"})
    [attempt] = NotificationAttempt.objects.filter(channel="webhook")
    assert attempt.outcome == "failed" and attempt.target == "hooks.example.test"
    assert attempt.detail.startswith("the approval webhook URL is http:// to another host: use https")

    assert webhook_url_refused("https://hooks.example.test/a") == ""
    assert webhook_url_refused("http://127.0.0.1:9000/a") == webhook_url_refused("http://[::1]/a") == ""
    assert webhook_url_refused("ftp://hooks.example.test/a") != ""
    settings.SCOUT_APPROVAL_WEBHOOK_ALLOW_HTTP = True  # an operator's explicit choice (a private network)
    assert webhook_url_refused("http://hooks.example.test/approvals") == ""


def readme_verifier():
    """The receiver's check exactly as the README prints it (its first Python block after the signature header)."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    section = readme[readme.index("### Receiving the approval webhook") :]
    code = section[section.index("```python\n") + len("```python\n") :]
    namespace: dict = {}
    exec(code[: code.index("```")], namespace)  # noqa: S102 - the README's own sample, run as a receiver would
    return namespace["scout_webhook_ok"]


def test_the_readmes_verifier_accepts_a_real_call_and_refuses_malformed_headers_without_raising(
    setup, mutating_tool, settings, receiver, django_capture_on_commit_callbacks
):
    """A receiver copying the README got an exception (a 500) for a header without "=", a non-numeric t, or a
    non-ASCII v1 (hmac.compare_digest refuses non-ASCII str): a refusal must be False, never a crash."""
    verify = readme_verifier()
    url, received = receiver
    settings.SCOUT_APPROVAL_WEBHOOK_URL, settings.SCOUT_APPROVAL_WEBHOOK_SECRET = url, SECRET
    with django_capture_on_commit_callbacks(execute=True):
        approval_request_create(principal=setup, tool=mutating_tool, arguments={"name": "x"})
    ((headers, body),) = received
    header = headers["x-scout-signature"]
    assert verify(header, body, SECRET) is True
    assert verify(header, body + b" ", SECRET) is False
    t = header.split(",")[0]
    for malformed in ("", "garbage", "t=,v1=", "t=abc,v1=00", "t=\u00b2,v1=00", f"{t},v1=\u00e9", t, "v1=00"):
        assert verify(malformed, body, SECRET) is False, malformed


def test_a_receiver_answering_its_headers_a_byte_at_a_time_is_cut_at_the_timeout(
    setup, mutating_tool, settings, monkeypatch
):
    """httpx's timeout bounds each read, not the call: a receiver sending its status line and then a byte of its
    headers just before each read timed out held the Celery worker as long as it liked. The timeout is the whole
    call's."""
    from governance.models import NotificationAttempt
    from governance.services import notifications
    from tests.drip_server import dripping

    monkeypatch.setattr(notifications, "WEBHOOK_TIMEOUT_SECONDS", 0.5)
    request = approval_request_create(principal=setup, tool=mutating_tool, arguments={"name": "x"})
    with dripping(where="headers", interval=0.1, pieces=60) as (url, finished):  # about 6 s in all
        settings.SCOUT_APPROVAL_WEBHOOK_URL, settings.SCOUT_APPROVAL_WEBHOOK_SECRET = f"{url}/hook", SECRET
        with pytest.raises(notifications.WebhookError, match="did not answer within 0.5 s"):
            notifications.approval_notify(request_pk=request.pk)
        assert finished == []  # the receiver was still sending when Scout gave up on it
    [attempt] = NotificationAttempt.objects.filter(channel="webhook")
    assert attempt.outcome == "failed" and attempt.detail == "approval webhook did not answer within 0.5 s"


def test_a_receivers_body_is_never_waited_for(setup, mutating_tool, settings, monkeypatch):
    """The status code is the answer: a receiver dripping a body after it held the worker for as long as the body
    took (or filled its memory with a large one)."""
    from governance.models import NotificationAttempt
    from governance.services import notifications
    from tests.drip_server import dripping

    monkeypatch.setattr(notifications, "WEBHOOK_TIMEOUT_SECONDS", 0.5)
    request = approval_request_create(principal=setup, tool=mutating_tool, arguments={"name": "x"})
    with dripping(where="body", interval=0.1, pieces=60) as (url, finished):  # about 6 s in all
        settings.SCOUT_APPROVAL_WEBHOOK_URL, settings.SCOUT_APPROVAL_WEBHOOK_SECRET = f"{url}/hook", SECRET
        notifications.approval_notify(request_pk=request.pk)
        assert finished == []  # sent, and done with, while the receiver was still sending its body
    [attempt] = NotificationAttempt.objects.filter(channel="webhook")
    assert attempt.outcome == "sent" and attempt.status_code == 200
