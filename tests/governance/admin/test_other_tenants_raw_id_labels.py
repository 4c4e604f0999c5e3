"""Z12: a raw-id box (a grant's server or tool, its person, an agent's parent, an agent grant's tool, a pinned tool)
named the object of whatever id it held, looked up in the whole table: an operator of tenant A typing ids into a
form that then failed named tenant B's servers, tools, agents and people beside the box. It names only what the
admin may pick."""

import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from tests.governance.admin.test_tenant_admin import world  # noqa: F401 - a fixture
from tests.governance.factories import agent_of

pytestmark = pytest.mark.django_db


def _label_beside(page: str, name: str) -> str:
    """What the raw-id box ``name`` names (the <strong> Django renders after its lookup link)."""
    found = re.search(rf'id="lookup_id_{name}"[^>]*></a>\s*<strong>(.*?)</strong>', page, re.S)
    return found.group(1) if found else ""


@pytest.mark.parametrize(
    ("url_name", "field", "target"),
    [
        ("governance_serveruserobjectpermission_add", "content_object", "server"),
        ("governance_tooluserobjectpermission_add", "content_object", "tool"),
        ("governance_serveruserobjectpermission_add", "user", "person"),
        ("governance_agent_add", "parent", "agent"),
        ("governance_agent_add", "grants-0-tool", "tool"),
    ],
)
def test_a_raw_id_box_names_no_other_tenants_object(client, world, outsider, url_name, field, target):  # noqa: F811
    bravo_tool = world["bravo-srv"].tools.get()
    ids = {
        "server": world["bravo-srv"].pk,
        "tool": bravo_tool.pk,
        "person": outsider.pk,  # tenant B's
        "agent": agent_of(outsider, "bravo-agent", tenant=world["b"]).pk,
    }
    own = {"server": world["alpha-srv"].pk, "tool": world["alpha-srv"].tools.get().pk}
    client.force_login(world["operator"])
    data = {field: ids[target], "permission": Permission.objects.get(codename="discover_server").pk}
    data.update({"grants-TOTAL_FORMS": "1", "grants-INITIAL_FORMS": "0"})
    page = client.post(reverse(f"admin:{url_name}"), data).content.decode()
    assert _label_beside(page, field) == ""
    assert "bravo" not in page and "outsider" not in page
    if target in own:  # the same box still names what the admin may pick
        page = client.post(reverse(f"admin:{url_name}"), {**data, field: own[target]}).content.decode()
        assert "alpha" in _label_beside(page, field)
