"""A curator who may curate no tool (once Scout has tenants: in no tenant, or a tenant without servers) read a home
of work: 1,129 requests to "attach each to the tool that should have served it" and zero counts everywhere else,
then met refusals tool by tool (the demo's curator at a year's volume). The home now says so first, and why."""

import pytest
from django.urls import reverse

from governance.models import ServerTenant
from governance.roles import CURATORS
from tests.governance.factories import ServerFactory, ToolFactory, staff_in_role, tenant_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def curator():
    return staff_in_role("cur", CURATORS)


def _home(client) -> str:
    return " ".join(client.get(reverse("admin:index")).content.decode().split())


def test_a_curator_who_curates_nothing_is_told_why_and_what_to_ask(client, curator):
    ToolFactory(server=ServerFactory(slug="shared-srv"), name="lookup")
    client.force_login(curator)
    assert 'id="curates-nothing"' not in _home(client)  # no tenants: every server is theirs to curate

    tenant = tenant_with("tenant-a")
    home = _home(client)
    assert 'id="curates-nothing"' in home and "You are in no tenant: ask a superuser to add you to yours" in home

    tenant.members.add(curator)
    assert "Your tenant has no server of its own yet." in _home(client)

    own = ServerFactory(slug="own-srv")
    ServerTenant.objects.create(server=own, tenant=tenant)
    assert 'id="curates-nothing"' not in _home(client)


def test_a_superuser_curates_shared_tools_whatever_the_tenants(client, superuser):
    ToolFactory(server=ServerFactory(slug="shared-srv"), name="lookup")
    tenant_with("tenant-a")
    client.force_login(superuser)
    home = _home(client)
    assert 'id="curator-home"' in home and 'id="curates-nothing"' not in home
