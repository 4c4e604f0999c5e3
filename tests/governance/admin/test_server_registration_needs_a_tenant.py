"""An operator in no tenant, once Scout has tenants, may register no server: a new server is a tenant's or shared
by every tenant, which only a superuser registers. The home offered "Register a server" all the same, and the form,
filled in, answered "This field is required" under an empty tenant list (the demo's operator at a year's volume)."""

import pytest
from django.urls import reverse

from governance.roles import OPERATORS
from tests.governance.factories import staff_in_role, tenant_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return staff_in_role("op", OPERATORS)


def test_an_operator_in_no_tenant_is_told_why_and_offered_no_dead_end(client, operator):
    add = reverse("admin:catalog_server_add")
    client.force_login(operator)
    assert f'href="{add}"' in client.get(reverse("admin:index")).content.decode()  # no tenants yet: theirs to add

    tenant = tenant_with("tenant-a")
    home = client.get(reverse("admin:index")).content.decode()
    assert f'href="{add}"' not in home  # neither the button nor the navigation's "Add"
    assert 'id="register-not-yours"' in home and "Ask a superuser to add you to your tenant" in home
    assert client.get(add).status_code == 403

    tenant.members.add(operator)
    home = client.get(reverse("admin:index")).content.decode()
    assert f'href="{add}"' in home and 'id="register-not-yours"' not in home
    form = client.get(add)
    assert form.status_code == 200 and f'<option value="{tenant.pk}">' in form.content.decode()


def test_a_superuser_registers_servers_whatever_the_tenants(client, superuser):
    tenant_with("tenant-a")
    client.force_login(superuser)
    home = client.get(reverse("admin:index")).content.decode()
    assert f'href="{reverse("admin:catalog_server_add")}"' in home and 'id="register-not-yours"' not in home
    assert client.get(reverse("admin:catalog_server_add")).status_code == 200


def test_a_new_servers_form_after_an_error_reads_as_a_new_servers(client, operator, settings):
    """The tenant section is headed "Tenant" with what it means, not Django's "Tenant: #1", and a URL typed into a
    form that came back with an error is a box holding it, not "Currently: <link> Change:" as for a saved server.
    The form still saves the server as the operator's tenant's."""
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["probe.example"]
    tenant = tenant_with("tenant-a", operator)
    client.force_login(operator)
    data = {"slug": "", "name": "Probe", "environment": "production", "transport": "http"}
    data.update({"url": "https://probe.example/mcp", "description": "", "header_env": "{}", "status": "active"})
    for prefix in ("group_grants", "user_grants", "sync_runs"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    data.update({"tenancy-TOTAL_FORMS": "1", "tenancy-INITIAL_FORMS": "0", "tenancy-0-tenant": str(tenant.pk)})
    page = client.post(reverse("admin:catalog_server_add"), data)
    assert page.status_code == 200 and "This field is required" in page.content.decode()  # the slug
    html = page.content.decode()
    assert "Currently:" not in html and "Change:" not in html
    assert 'type="url" name="url" value="https://probe.example/mcp"' in html
    assert ">#1</span>" not in html and 'class="help scout-inline-help">Only this tenant' in html
    assert f'<option value="{tenant.pk}" selected>' in html

    from catalog.models import Server

    saved = client.post(reverse("admin:catalog_server_add"), {**data, "slug": "probe"})
    assert saved.status_code == 302 and Server.objects.get(slug="probe").tenancy.tenant == tenant
