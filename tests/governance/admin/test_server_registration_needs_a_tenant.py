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
