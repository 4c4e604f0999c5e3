"""Z12: a tool's related tools on its admin page. The field offered and accepted every tool of the install, so a
curator of tenant A could relate tenant B's tool by id (its page then named it: an oracle over every id), and a
tool of tenant A related to a shared tool was named on that shared tool's page to tenant B's curators."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.models import ServerTenant
from governance.roles import CURATORS
from tests.catalog.test_admin import _inline_management
from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model):
    curators = Group.objects.get(name=CURATORS)
    people, tools = {}, {}
    for name, slug in (("cara-a", "tenant-a"), ("cobb-b", "tenant-b")):
        people[name] = django_user_model.objects.create_user(username=name, is_staff=True)
        people[name].groups.add(curators)
        tenant_with(slug, people[name])
    for slug, tenant in (("shared-srv", None), ("alpha-srv", "tenant-a"), ("bravo-srv", "tenant-b")):
        server = ServerFactory(slug=slug)
        if tenant is not None:
            ServerTenant.objects.create(server=server, tenant=tenant_with(tenant))
        tools[slug] = ToolFactory(server=server, name=f"{slug.split('-')[0]}_tool")
    return people, tools


def _curate(client, tool, related) -> object:
    data = {
        "title": "",
        "purpose": "",
        "entity_types": "",
        "operation_verbs": "",
        "related_tools": [str(other.pk) for other in related],
        "enabled": "on",
        **{
            _: v
            for prefix in ("aliases", "keywords", "examples", "negative_examples", "group_grants", "user_grants")
            for _, v in _inline_management(prefix, []).items()
        },
    }
    return client.post(reverse("admin:catalog_tool_change", args=[tool.pk]), data)


def test_a_curator_relates_no_other_tenants_tool(client, world):
    people, tools = world
    client.force_login(people["cara-a"])
    refused = _curate(client, tools["alpha-srv"], [tools["bravo-srv"]])
    assert refused.status_code == 200 and "bravo" not in refused.content.decode()
    assert not tools["alpha-srv"].related_tools.exists()
    assert _curate(client, tools["alpha-srv"], [tools["shared-srv"]]).status_code == 302
    assert list(tools["alpha-srv"].related_tools.all()) == [tools["shared-srv"]]


def test_a_shared_tools_page_names_no_other_tenants_related_tool_and_keeps_it(client, world, superuser):
    people, tools = world
    shared = tools["shared-srv"]
    client.force_login(superuser)  # a shared tool's curation is a superuser's (test_shared_servers_shaped_by_...)
    assert _curate(client, shared, [tools["alpha-srv"], tools["bravo-srv"]]).status_code == 302
    client.force_login(people["cobb-b"])
    page = client.get(reverse("admin:catalog_tool_change", args=[shared.pk])).content.decode()
    assert "alpha" not in page
    # Tenant B's curator may not save the shared tool's page (a curator grants no access, and curates no shared
    # tool): refused, and nothing of its curation changes.
    assert _curate(client, shared, []).status_code == 403
    assert set(shared.related_tools.all()) == {tools["alpha-srv"], tools["bravo-srv"]}
