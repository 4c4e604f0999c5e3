"""Z12 in the admin: an operator of tenant A manages shared servers and tenant A's, never tenant B's (not in a
list, not on a page, not in a grant), and reads only shared and tenant A's audit events."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from governance.models import AuditEvent, ServerTenant, ServerUserObjectPermission
from governance.roles import OPERATORS
from governance.services.audit import audit_record
from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model, member, outsider):
    operator = django_user_model.objects.create_user(username="op-a", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    tenant_a, tenant_b = tenant_with("tenant-a", operator, member), tenant_with("tenant-b", outsider)
    servers = {}
    for slug, tenant in (("shared-srv", None), ("alpha-srv", tenant_a), ("bravo-srv", tenant_b)):
        server = ServerFactory(slug=slug)
        if tenant is not None:
            ServerTenant.objects.create(server=server, tenant=tenant)
        ToolFactory(server=server, name=f"{slug.split('-')[0]}_tool")
        servers[slug] = server
    return {"operator": operator, "a": tenant_a, "b": tenant_b, **servers}


def test_operator_sees_shared_and_own_tenants_servers_and_tools_only(client, world):
    client.force_login(world["operator"])
    servers = client.get(reverse("admin:catalog_server_changelist")).content.decode()
    tools = client.get(reverse("admin:catalog_tool_changelist")).content.decode()
    for page in (servers, tools):
        assert "shared" in page and "alpha" in page
        assert "bravo" not in page
    foreign = client.get(reverse("admin:catalog_server_change", args=[world["bravo-srv"].pk]))
    assert foreign.status_code == 302  # the admin's answer for an object that does not exist for you
    assert "bravo" not in client.get(foreign["Location"], follow=True).content.decode()


def test_operator_cannot_grant_another_tenants_server(client, world, member):
    client.force_login(world["operator"])
    discover = Permission.objects.get(codename="discover_server")
    url = reverse("admin:governance_serveruserobjectpermission_add")
    refused = client.post(url, {"user": member.pk, "permission": discover.pk, "content_object": world["bravo-srv"].pk})
    assert refused.status_code == 200 and "no such server" in refused.content.decode()
    assert not ServerUserObjectPermission.objects.exists()
    granted = client.post(url, {"user": member.pk, "permission": discover.pk, "content_object": world["alpha-srv"].pk})
    assert granted.status_code == 302
    assert ServerUserObjectPermission.objects.filter(content_object=world["alpha-srv"], user=member).exists()


def test_operator_reads_shared_and_own_tenants_audit_events(client, world):
    for slug in ("shared-srv", "alpha-srv", "bravo-srv"):
        tool = world[slug].tools.get()
        audit_record(event_type="review.held", principal=None, tool=tool, outcome="success", payload={})
    client.force_login(world["operator"])
    page = client.get(reverse("admin:governance_auditevent_changelist")).content.decode()
    assert "shared-srv::shared_tool" in page and "alpha-srv::alpha_tool" in page
    assert "bravo" not in page  # neither a row nor a filter choice names it
    bravo = AuditEvent.objects.get(target_server="bravo-srv")
    alpha = AuditEvent.objects.get(target_server="alpha-srv")
    assert client.get(reverse("admin:governance_auditevent_change", args=[alpha.pk])).status_code == 200
    assert client.get(reverse("admin:governance_auditevent_change", args=[bravo.pk])).status_code == 302


def test_operators_home_and_dashboard_show_no_other_tenants_servers_or_tools(client, world):
    for slug in ("alpha-srv", "bravo-srv"):
        tool = world[slug].tools.get()
        audit_record(event_type="execution", principal=None, tool=tool, outcome="success", payload={"duration_ms": 5})
    client.force_login(world["operator"])
    home = client.get(reverse("admin:index")).content.decode()
    assert "alpha-srv" in home and "bravo" not in home
    figures = client.get(reverse("dashboard_data")).json()
    assert figures["top_tools"] == [["alpha-srv::alpha_tool", 1]]
    assert sum(figures["servers"].values()) == 2  # shared and alpha, not bravo
