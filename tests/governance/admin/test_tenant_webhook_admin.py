"""The tenant form names the tenant's approval webhook by environment variable and shows the operator whether each
is set, never its value; only a superuser names the variables (the install's environment is theirs)."""

import re

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from governance.roles import OPERATORS
from tests.governance.factories import tenant_with

pytestmark = pytest.mark.django_db
URL_ENV, SECRET_ENV = "ACME_APPROVAL_WEBHOOK_URL", "ACME_APPROVAL_WEBHOOK_SECRET"
HOOK_URL = "https://hooks.example.com/T0KEN-in-the-path"


@pytest.fixture(autouse=True)
def _web_server_sends(settings):
    """These read the page of an install without a Celery worker, where this web server sends the webhook and its
    badges decide (CI sets REDIS_URL, which turns eager tasks off); test_tenant_webhook_worker_badge covers the
    worker's wording."""
    settings.CELERY_TASK_ALWAYS_EAGER = True


@pytest.fixture
def acme(monkeypatch):
    """Tenant acme naming both variables; only the URL's is set."""
    monkeypatch.setenv(URL_ENV, HOOK_URL)
    monkeypatch.delenv(SECRET_ENV, raising=False)
    tenant = tenant_with("acme")
    tenant.approval_webhook_url_env, tenant.approval_webhook_secret_env = URL_ENV, SECRET_ENV
    tenant.save()
    return tenant


def _badges(html: str) -> list[str]:
    return re.findall(r'<span class="scout-badge s-\w+ webhook-env">([^<]*)</span>', html)


def test_the_form_shows_the_variables_with_help_and_whether_each_is_set(client, superuser, acme):
    client.force_login(superuser)
    page = client.get(reverse("admin:governance_tenant_change", args=[acme.pk])).content.decode()
    assert 'name="approval_webhook_url_env"' in page and 'name="approval_webhook_secret_env"' in page
    assert "their values are never stored or shown" in page and "Name the environment variables" in page
    assert ">Webhook URL: environment variable name:</label>" in page
    assert ">Signing secret: environment variable name:</label>" in page
    assert "Not sent until every variable is set:" in page  # the secret's variable is named but not set
    assert _badges(page) == [f"{URL_ENV} set", f"{SECRET_ENV} not set"]
    assert "Hold down" not in page  # the members picker needs no multi-select hint
    assert "hooks.example.com" not in page and "T0KEN" not in page
    listing = client.get(reverse("admin:governance_tenant_changelist")).content.decode()
    assert _badges(listing) == [f"{URL_ENV} set", f"{SECRET_ENV} not set"] and "hooks.example.com" not in listing


def test_a_tenant_without_its_own_webhook_says_it_uses_the_install_wide_one(client, superuser):
    client.force_login(superuser)
    beta = tenant_with("beta")
    page = client.get(reverse("admin:governance_tenant_change", args=[beta.pk])).content.decode()
    assert "The install-wide webhook, SCOUT_APPROVAL_WEBHOOK_URL (not configured: e-mail only)" in page
    assert _badges(page) == []


def test_a_superuser_names_the_variables_and_a_url_is_refused(client, superuser):
    client.force_login(superuser)
    beta = tenant_with("beta")
    url = reverse("admin:governance_tenant_change", args=[beta.pk])
    form = {"name": "Beta", "approval_webhook_secret_env": "BETA_HOOK_SECRET"}
    refused = client.post(url, {**form, "approval_webhook_url_env": "https://hooks.example.com/x"})
    assert refused.status_code == 200 and "is not an environment variable name" in refused.content.decode()
    assert client.post(url, {**form, "approval_webhook_url_env": "BETA_HOOK_URL"}).status_code == 302
    beta.refresh_from_db()
    assert (beta.approval_webhook_url_env, beta.approval_webhook_secret_env) == ("BETA_HOOK_URL", "BETA_HOOK_SECRET")


def test_a_tenants_operator_reads_the_webhook_but_cannot_rename_its_variables(client, django_user_model, acme):
    operator = django_user_model.objects.create_user(username="op-acme", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    operator.user_permissions.add(Permission.objects.get(codename="change_tenant"))  # even with change rights
    acme.members.add(operator)
    client.force_login(operator)
    url = reverse("admin:governance_tenant_change", args=[acme.pk])
    page = client.get(url).content.decode()
    assert 'name="approval_webhook_url_env"' not in page and URL_ENV in page
    # Words for a reader: who names the variables, not instructions they cannot follow; the same labels.
    assert "A superuser names the environment variables" in page and "Name the environment variables" not in page
    assert "Webhook URL: environment variable name:" in page and "Approval webhook url env" not in page
    assert _badges(page) == [f"{URL_ENV} set", f"{SECRET_ENV} not set"] and "hooks.example.com" not in page
    saved = client.post(url, {"name": "Acme", "members": [operator.pk], "approval_webhook_url_env": "SECRET_KEY"})
    assert saved.status_code == 302
    acme.refresh_from_db()
    assert acme.approval_webhook_url_env == URL_ENV


def test_a_webhook_with_every_variable_set_says_where_requests_go(client, superuser, acme, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "s3cret")
    client.force_login(superuser)
    page = client.get(reverse("admin:governance_tenant_change", args=[acme.pk])).content.decode()
    assert "This tenant&#x27;s own webhook, signed:" in page and _badges(page) == [
        f"{URL_ENV} set",
        f"{SECRET_ENV} set",
    ]
    assert "s3cret" not in page
