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
        result={"content": [{"type": "text", "text": "bravo salary table"}]},
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
