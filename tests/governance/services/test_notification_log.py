"""Every approval notification attempt is recorded for operators: e-mails and webhook calls, sent or failed;
a retry sends only what was not sent yet; the log holds the webhook's host, never its path or secret."""

import smtplib
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.models import NotificationAttempt
from governance.roles import APPROVERS, OPERATORS
from governance.services import notifications
from governance.services.approvals import approval_request_create
from governance.services.notifications import WebhookError, approval_notify

from .test_approval_notify import setup  # noqa: F401 - fixture: a requester and two approvers with e-mail

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint():
    """A real HTTP endpoint on 127.0.0.1 answering with the status in ``answer[0]``."""
    answer = [204]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(answer[0])
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/hooks/T0KEN-in-the-path", answer, server.server_port
    server.shutdown()


@pytest.fixture
def request_row(setup, mutating_tool, settings):  # noqa: F811 - the imported fixture
    settings.SCOUT_APPROVAL_WEBHOOK_URL = ""  # created without notifying; each test notifies itself
    return approval_request_create(principal=setup, tool=mutating_tool, arguments={"name": "x"})


def test_a_failed_webhook_is_recorded_and_a_retry_sends_only_what_is_missing(
    request_row, settings, endpoint, mailoutbox
):
    url, answer, port = endpoint
    settings.SCOUT_APPROVAL_WEBHOOK_URL = url
    answer[0] = 500
    with pytest.raises(WebhookError):
        approval_notify(request_pk=request_row.pk, attempt=1)
    answer[0] = 204
    approval_notify(request_pk=request_row.pk, attempt=2)
    rows = list(NotificationAttempt.objects.order_by("id").values_list("channel", "outcome", "attempt", "status_code"))
    assert rows == [("email", "sent", 1, None), ("webhook", "failed", 1, 500), ("webhook", "sent", 2, 204)]
    assert len(mailoutbox) == 1  # the retry did not e-mail the approvers again
    failed = NotificationAttempt.objects.get(outcome="failed")
    assert failed.detail == "approval webhook answered 500" and failed.approval == request_row
    assert {row.target for row in NotificationAttempt.objects.filter(channel="webhook")} == {f"127.0.0.1:{port}"}
    assert not NotificationAttempt.objects.filter(target__contains="T0KEN").exists()


def test_an_unreachable_webhook_and_a_mail_failure_are_recorded(request_row, settings, monkeypatch):
    settings.SCOUT_APPROVAL_WEBHOOK_URL = "http://127.0.0.1:9/hook"  # discard port: nothing listens

    def refuse(**kwargs):
        raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")

    monkeypatch.setattr(notifications, "send_mail", refuse)
    with pytest.raises(WebhookError):
        approval_notify(request_pk=request_row.pk)  # the mail failure did not stop the webhook attempt
    by_channel = {row.channel: row for row in NotificationAttempt.objects.all()}
    assert by_channel["email"].outcome == "failed" and "SMTPServerDisconnected" in by_channel["email"].detail
    assert by_channel["email"].target == "ann@example.com, bob@example.com"
    assert by_channel["webhook"].outcome == "failed" and "unreachable" in by_channel["webhook"].detail


def test_operators_read_the_log_and_approvers_do_not(client, request_row, settings, endpoint, django_user_model):
    url, answer, _ = endpoint
    settings.SCOUT_APPROVAL_WEBHOOK_URL = url
    answer[0] = 503
    with pytest.raises(WebhookError):
        approval_notify(request_pk=request_row.pk)
    operator = django_user_model.objects.create_user(username="op", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(operator)
    page = client.get(reverse("admin:governance_notificationattempt_changelist"))
    html = page.content.decode()
    assert page.status_code == 200 and "approval webhook answered 503" in html and request_row.approval_id in html
    home = client.get(reverse("admin:index")).content.decode()
    assert "Notifications to approvers that failed in the last 7 days: 1" in home
    reader = django_user_model.objects.create_user(username="reader", is_staff=True)
    reader.groups.add(Group.objects.get(name=APPROVERS))
    client.force_login(reader)
    assert client.get(reverse("admin:governance_notificationattempt_changelist")).status_code == 403


def test_an_operator_reads_only_shared_and_their_tenants_attempts(
    client, request_row, mutating_tool, django_user_model
):
    """Z12: the log names approvers' addresses and requests, so a tenant's attempts stay with that tenant (as
    its inbox and audit trail); the home page's failure count is the operator's log, not the install's."""
    from governance.models import ApprovalRequest
    from tests.governance.factories import tenant_with

    operator = django_user_model.objects.create_user(username="op-a", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    acme, globex = tenant_with("acme", operator), tenant_with("globex")
    shared, own, foreign = request_row, ApprovalRequest.objects.get(pk=request_row.pk), None
    own.pk, own.approval_id, own.tenant = None, "apr_acme", acme
    own.save()
    foreign = ApprovalRequest.objects.get(pk=request_row.pk)
    foreign.pk, foreign.approval_id, foreign.tenant = None, "apr_globex", globex
    foreign.save()
    for row, address in ((shared, "shared@example.com"), (own, "acme@example.com"), (foreign, "globex@example.com")):
        NotificationAttempt.objects.create(
            approval=row, channel="email", outcome="failed", target=address, detail="mail server refused"
        )
    NotificationAttempt.objects.create(approval=None, channel="email", outcome="failed", target="gone@example.com")
    client.force_login(operator)
    html = client.get(reverse("admin:governance_notificationattempt_changelist")).content.decode()
    assert "shared@example.com" in html and "acme@example.com" in html
    assert "globex@example.com" not in html and "apr_globex" not in html and "gone@example.com" not in html
    home = client.get(reverse("admin:index")).content.decode()
    assert "Notifications to approvers that failed in the last 7 days: 2" in home
    superuser = django_user_model.objects.create_superuser(username="root", email="root@example.com")
    client.force_login(superuser)
    html = client.get(reverse("admin:governance_notificationattempt_changelist")).content.decode()
    assert all(f"{who}@example.com" in html for who in ("shared", "acme", "globex", "gone"))
