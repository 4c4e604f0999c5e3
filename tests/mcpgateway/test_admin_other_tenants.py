"""Z12 in the gateway's own admin pages: pinned tools and idempotency records were listed for the whole install.
An admin of tenant A given their model permissions read tenant B's pinned tools and the results of tenant B's
calls (an idempotency record keeps the result it replays), and could pin or unpin tenant B's tools."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from mcpgateway.models import IdempotencyRecord, PinnedTool
from tests.governance.admin.test_tenant_admin import world  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db


def _give(user, *codenames):
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="mcpgateway", codename__in=codenames))


def test_pinned_tools_of_another_tenant_are_neither_listed_nor_pinned(client, world):  # noqa: F811
    operator = world["operator"]
    _give(operator, "view_pinnedtool", "add_pinnedtool", "change_pinnedtool")
    bravo_tool, alpha_tool = world["bravo-srv"].tools.get(), world["alpha-srv"].tools.get()
    bravo_pin = PinnedTool.objects.create(tool=bravo_tool, note="bravo payroll")
    client.force_login(operator)
    listed = client.get(reverse("admin:mcpgateway_pinnedtool_changelist")).content.decode()
    assert "bravo" not in listed
    assert client.get(reverse("admin:mcpgateway_pinnedtool_change", args=[bravo_pin.pk])).status_code == 302
    bravo_pin.delete()
    client.post(reverse("admin:mcpgateway_pinnedtool_add"), {"tool": bravo_tool.pk, "position": 0, "note": ""})
    assert not PinnedTool.objects.filter(tool=bravo_tool).exists()
    client.post(reverse("admin:mcpgateway_pinnedtool_add"), {"tool": alpha_tool.pk, "position": 0, "note": ""})
    assert PinnedTool.objects.filter(tool=alpha_tool).exists()


def test_idempotency_records_are_read_only_by_whom_may_read_the_whole_install(client, world, superuser):  # noqa: F811
    now = timezone.now()
    record = IdempotencyRecord.objects.create(
        principal_key="u9|a:|t:tenant-b",
        key="k1",
        tool_ref="bravo-srv::bravo_tool",
        arguments_digest="0" * 64,
        status="succeeded",
        result='{"content": [{"type": "text", "text": "bravo salary table"}]}',
        created_at=now,
        expires_at=now + timezone.timedelta(hours=1),
    )
    operator = world["operator"]
    _give(operator, "view_idempotencyrecord")
    client.force_login(operator)
    listed = client.get(reverse("admin:mcpgateway_idempotencyrecord_changelist"))
    assert listed.status_code == 403 and "bravo" not in listed.content.decode()
    assert client.get(reverse("admin:mcpgateway_idempotencyrecord_change", args=[record.pk])).status_code == 403
    client.force_login(superuser)
    assert "bravo" in client.get(reverse("admin:mcpgateway_idempotencyrecord_changelist")).content.decode()


@pytest.fixture
def shared_and_own(django_user_model, superuser):
    """Tenant A's operator, given the pinned tools' permissions; a shared server's tool a superuser pinned, and a tool
    of tenant A's own server."""
    from django.contrib.auth.models import Group

    from governance.models import ServerTenant
    from governance.roles import OPERATORS
    from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

    operator = django_user_model.objects.create_user(username="op-a", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    _give(operator, "view_pinnedtool", "add_pinnedtool", "change_pinnedtool", "delete_pinnedtool")
    tenant = tenant_with("tenant-a", operator)
    shared_tool = ToolFactory(server=ServerFactory(slug="shared-srv"), name="lookup")
    own = ServerFactory(slug="own-srv")
    ServerTenant.objects.create(server=own, tenant=tenant)
    shared_pin = PinnedTool.objects.create(tool=shared_tool, position=1, note="every tenant's favourite")
    return {"operator": operator, "shared_pin": shared_pin, "own_tool": ToolFactory(server=own, name="lookup")}


def test_a_tenant_admin_neither_pins_nor_unpins_nor_moves_a_shared_servers_tool(client, shared_and_own, superuser):
    """Z12: a pinned tool is listed in tools/list to every caller who may see it, so pinning a shared server's tool
    shapes what every tenant's agents are shown, which is a superuser's (as its curation, risk class and review are):
    tenant A's operator pinned one for every tenant, unpinned or moved a superuser's pin (its page, the list's
    position box, the delete action). The shared pin is now read-only to them; their own tenant's tools stay theirs."""
    operator, shared_pin, own_tool = (
        shared_and_own["operator"],
        shared_and_own["shared_pin"],
        shared_and_own["own_tool"],
    )
    client.force_login(operator)
    changelist = reverse("admin:mcpgateway_pinnedtool_changelist")
    page = client.get(reverse("admin:mcpgateway_pinnedtool_change", args=[shared_pin.pk]))
    assert page.status_code == 200 and 'name="position"' not in page.content.decode()  # read, not changed
    moved = client.post(
        reverse("admin:mcpgateway_pinnedtool_change", args=[shared_pin.pk]),
        {"tool": shared_pin.tool_id, "position": 0, "note": "mine now"},
    )
    assert moved.status_code == 403
    client.post(
        changelist,
        {
            "form-TOTAL_FORMS": 1,
            "form-INITIAL_FORMS": 1,
            "form-0-id": shared_pin.pk,
            "form-0-position": 9,
            "_save": "Save",
        },
    )
    unpinned = client.post(
        changelist, {"action": "delete_selected", "_selected_action": [shared_pin.pk], "post": "yes"}
    )
    assert unpinned.status_code == 403
    shared_pin.refresh_from_db()
    assert (shared_pin.position, shared_pin.note) == (1, "every tenant's favourite")

    shared_pin.delete()  # and pinning it anew for every tenant:
    client.post(reverse("admin:mcpgateway_pinnedtool_add"), {"tool": shared_pin.tool_id, "position": 0, "note": ""})
    assert not PinnedTool.objects.filter(tool_id=shared_pin.tool_id).exists()

    added = client.post(reverse("admin:mcpgateway_pinnedtool_add"), {"tool": own_tool.pk, "position": 0, "note": ""})
    assert added.status_code == 302  # their own tenant's tool: theirs to pin
    own_pin = PinnedTool.objects.get(tool=own_tool)
    client.post(
        changelist,
        {
            "form-TOTAL_FORMS": 1,
            "form-INITIAL_FORMS": 1,
            "form-0-id": own_pin.pk,
            "form-0-position": 5,
            "_save": "Save",
        },
    )
    own_pin.refresh_from_db()
    assert own_pin.position == 5
    assert client.post(changelist, {"action": "delete_selected", "_selected_action": [own_pin.pk], "post": "yes"})
    assert not PinnedTool.objects.filter(pk=own_pin.pk).exists()

    client.force_login(superuser)  # who may shape what every tenant shares pins the shared tool
    pinned = client.post(reverse("admin:mcpgateway_pinnedtool_add"), {"tool": shared_pin.tool_id, "position": 0})
    assert pinned.status_code == 302 and PinnedTool.objects.filter(tool_id=shared_pin.tool_id).exists()
