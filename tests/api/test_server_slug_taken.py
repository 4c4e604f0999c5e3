"""A taken slug reveals nothing about servers the caller cannot see (Z12).

Slugs are install-wide (tool ids name them), so registering tenant B's slug must fail for tenant A's operator too.
The refusal is the same, word for word bar its random suggestion, whether the server holding the slug is one they
see or another tenant's: it names no server, and it suggests a slug that is free, whose random suffix says nothing
about which other slugs are taken."""

import re

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from catalog.models import Server, validate_server_slug
from governance.models import ServerTenant
from governance.roles import OPERATORS
from tests.api.conftest import api_db, give_perms, make_token
from tests.api.test_servers import OPERATOR_PERMS
from tests.governance.factories import ServerFactory, tenant_with

pytestmark = api_db

SUGGESTION = re.compile(r"e\.g\. '([^']+)'")


@pytest.fixture
def world(owner, django_user_model, settings):
    """owner operates in tenant A; tenant B owns "b-secret"; "shared-one" is shared (owner sees it)."""
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["probe.example"]
    settings.SCOUT_API_RATE = "10000/minute"
    bea = django_user_model.objects.create_user(username="bea-b")
    tenant_a = tenant_with("tenant-a", owner)
    secret = ServerFactory(slug="b-secret", name="Tenant B payroll")
    ServerTenant.objects.create(server=secret, tenant=tenant_with("tenant-b", bea))
    ServerFactory(slug="shared-one", name="Shared one")
    owner.is_staff = True
    owner.save()
    owner.groups.add(Group.objects.get(name=OPERATORS))
    give_perms(owner, *OPERATOR_PERMS)
    return {"token": make_token(owner, ["api"], tenant=tenant_a)}


def _refusal(message: str) -> str:
    """The message with its suggestion checked (free, a valid slug) and blanked."""
    suggestion = SUGGESTION.search(message).group(1)
    validate_server_slug(suggestion)
    assert not Server.objects.filter(slug=suggestion).exists()
    return SUGGESTION.sub("e.g. '…'", message)


def test_over_rest_a_taken_slug_is_answered_alike_whoever_holds_it(api, world):
    body = {"name": "Probe", "transport": "http", "url": "https://probe.example/mcp"}
    answers = []
    for slug in ("b-secret", "shared-one"):
        response = api.post("servers/", token=world["token"], json={**body, "slug": slug})
        assert response.status_code == 400, response.text
        assert "Tenant B" not in response.text and "already exists" not in response.text
        error = response.json()["error"]
        answers.append((error["code"], error["message"], _refusal(" ".join(error["fields"]["slug"]))))
    assert answers[0] == answers[1]
    assert "not available" in answers[0][2]
    assert Server.objects.filter(slug__in=["b-secret", "shared-one"]).count() == 2  # nothing registered or moved


def test_in_the_admin_a_taken_slug_is_answered_alike_whoever_holds_it(client, world, owner):
    client.force_login(owner)
    tenant = owner.tenants.get()
    answers = []
    for slug in ("b-secret", "shared-one"):
        form = {"slug": slug, "name": "Probe", "environment": "production", "transport": "http"}
        form.update({"url": "https://probe.example/mcp", "tenancy-TOTAL_FORMS": "1", "tenancy-INITIAL_FORMS": "0"})
        form["tenancy-0-tenant"] = str(tenant.pk)
        for prefix in ("group_grants", "user_grants"):
            form.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
        page = client.post(reverse("admin:catalog_server_add"), form)
        assert page.status_code == 200  # the form again, with the error
        errors = page.context["adminform"].form.errors
        assert "Tenant B" not in page.content.decode()
        answers.append(_refusal(" ".join(errors["slug"])))
    assert answers[0] == answers[1] and "not available" in answers[0]
