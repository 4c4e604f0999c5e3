"""A tenant's approval requests go to its own webhook (environment variables named on the tenant, never their
values), signed with its own secret, and not to the install-wide one; a tenant without one, and shared requests,
use the install-wide webhook; a variable that is not set is a recorded, logged failure naming it, never a value."""

import json
import logging

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from governance.models import NotificationAttempt
from governance.services.approvals import approval_request_create
from tests.governance.factories import tenant_token, tenant_with

from .test_approval_notify import (
    setup,  # noqa: F401 - fixture: a requester (member, no tenant) and two approvers
    signed_with,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("setup")]
INSTALL_SECRET = "install-wide-webhook-secret"
ACME_SECRET = "acme-own-webhook-secret"
ACME_URL_ENV, ACME_SECRET_ENV = "ACME_APPROVAL_WEBHOOK_URL", "ACME_APPROVAL_WEBHOOK_SECRET"


@pytest.fixture
def webhooks(settings, monkeypatch, receiver, tenant_receiver):
    """The install-wide webhook at ``receiver``; tenant acme's own at ``tenant_receiver``, named by variables.
    Returns what each received: (install-wide, acme's)."""
    settings.SCOUT_APPROVAL_WEBHOOK_URL, settings.SCOUT_APPROVAL_WEBHOOK_SECRET = receiver[0], INSTALL_SECRET
    monkeypatch.setenv(ACME_URL_ENV, tenant_receiver[0])
    monkeypatch.setenv(ACME_SECRET_ENV, ACME_SECRET)
    acme = tenant_with("acme")
    acme.approval_webhook_url_env, acme.approval_webhook_secret_env = ACME_URL_ENV, ACME_SECRET_ENV
    acme.full_clean()
    acme.save()
    return receiver[1], tenant_receiver[1]


@pytest.fixture
def ask(mutating_tool, django_capture_on_commit_callbacks):
    """ask(principal): an approval request for the mutating tool, notified after commit as in production."""

    def _ask(principal):
        with django_capture_on_commit_callbacks(execute=True):
            return approval_request_create(principal=principal, tool=mutating_tool, arguments={"name": "x"})

    return _ask


def test_a_tenants_request_reaches_only_its_own_webhook_signed_with_its_secret(acme_token, webhooks, ask):
    install_wide, own = webhooks
    request = ask(acme_token[2])
    assert install_wide == []
    ((headers, body),) = own
    assert signed_with(ACME_SECRET, headers, body)
    payload = json.loads(body)
    assert payload["approval_id"] == request.approval_id and payload["tenant"] == "acme"
    assert NotificationAttempt.objects.get(channel="webhook").outcome == "sent"


def test_a_tenant_without_its_own_webhook_uses_the_install_wide_one(member, webhooks, ask):
    install_wide, own = webhooks
    request = ask(tenant_token(member, "beta")[2])
    assert own == []
    ((headers, body),) = install_wide
    assert signed_with(INSTALL_SECRET, headers, body)
    assert json.loads(body)["approval_id"] == request.approval_id and json.loads(body)["tenant"] == "beta"


def test_a_shared_request_uses_the_install_wide_webhook(setup, acme_token, webhooks, ask):  # noqa: F811
    """``setup`` is the member's tenant-less token: a shared request, though the member is also in acme."""
    install_wide, own = webhooks
    request = ask(setup)
    assert own == []
    ((headers, body),) = install_wide
    assert signed_with(INSTALL_SECRET, headers, body) and json.loads(body)["approval_id"] == request.approval_id


@pytest.mark.parametrize("unset", [ACME_URL_ENV, ACME_SECRET_ENV])
def test_a_variable_not_set_is_a_logged_failure_naming_it(
    unset, acme_token, webhooks, ask, monkeypatch, caplog, client, superuser, tenant_receiver
):
    """Nothing is sent (not unsigned, not to the install-wide webhook); the log and the notification log name the
    variable, never the URL or a secret."""
    monkeypatch.delenv(unset)
    with caplog.at_level(logging.WARNING, logger="governance.services.notifications"):
        request = ask(acme_token[2])
    install_wide, own = webhooks
    assert install_wide == [] and own == []
    failed = NotificationAttempt.objects.get(channel="webhook")
    assert (
        failed.outcome == "failed"
        and failed.detail == f"tenant acme's approval webhook: environment variable(s) not set: {unset}"
    )
    assert f"approval webhook for {request.approval_id} not sent" in caplog.text and unset in caplog.text
    written = caplog.text + failed.detail + failed.target
    assert tenant_receiver[0].split("//")[1].split("/")[0] not in written and ACME_SECRET not in written
    client.force_login(superuser)
    page = client.get(reverse("admin:governance_notificationattempt_changelist") + "?outcome__exact=failed")
    assert f"environment variable(s) not set: {unset}" in page.content.decode()


def test_a_tenant_names_variables_never_values(db):
    acme = tenant_with("acme")
    acme.approval_webhook_url_env = "https://hooks.example.com/T0KEN"
    with pytest.raises(ValidationError) as refused:
        acme.full_clean()
    assert "is not an environment variable name" in str(refused.value.message_dict["approval_webhook_url_env"])
    acme.approval_webhook_url_env, acme.approval_webhook_secret_env = "", ACME_SECRET_ENV
    with pytest.raises(ValidationError) as refused:
        acme.full_clean()
    assert "needs the webhook URL's variable" in str(refused.value.message_dict["approval_webhook_url_env"])
