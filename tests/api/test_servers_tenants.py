"""Z12 in the catalog API: an operator's token of tenant A lists, reads, edits, archives and syncs shared servers
and tenant A's, never tenant B's (answered like an unknown slug), and reads no tenant B sync run; a session sees
the servers its person may manage (a superuser every one)."""

import pytest
from django.utils import timezone

from tests.api.conftest import api_db, give_perms, make_token
from tests.api.test_servers import OPERATOR_PERMS
from tests.governance.factories import ServerFactory, tenant_with

pytestmark = api_db


@pytest.fixture
def tenants(catalog, owner, django_user_model):
    """owner operates in tenant A (a-server); tenant B owns b-secret-server; github and payroll are shared."""
    from catalog.models import SyncRun
    from governance.models import ServerTenant

    bea = django_user_model.objects.create_user(username="bea-b")
    tenant_a, tenant_b = tenant_with("tenant-a", owner), tenant_with("tenant-b", bea)
    for slug, tenant in (("a-server", tenant_a), ("b-secret-server", tenant_b)):
        server = ServerFactory(slug=slug)
        ServerTenant.objects.create(server=server, tenant=tenant)
        SyncRun.objects.create(server=server, status="success", started_at=timezone.now(), source=f"beat:{slug}")
    give_perms(owner, *OPERATOR_PERMS)
    return make_token(owner, ["api"], tenant=tenant_a)


def test_a_tenants_token_never_reaches_another_tenants_server(api, tenants):
    listed = api.get("servers/", token=tenants)
    assert listed.status_code == 200
    assert [server["slug"] for server in listed.json()["results"]] == ["a-server", "github", "payroll"]
    assert "b-secret-server" not in listed.text
    unknown = api.get("servers/no-such-server/", token=tenants)
    for method, path, body in (
        ("GET", "servers/b-secret-server/", None),
        ("PATCH", "servers/b-secret-server/", {"name": "mine now"}),
        ("POST", "servers/b-secret-server/archive/", None),
        ("POST", "servers/b-secret-server/sync/", None),
    ):
        response = api.request(method, path, token=tenants, json=body)
        assert (response.status_code, response.json()) == (unknown.status_code, unknown.json()), path
    assert api.get("servers/a-server/", token=tenants).status_code == 200
    runs = api.get("sync-runs/", token=tenants)
    assert runs.status_code == 200 and "beat:a-server" in runs.text and "b-secret-server" not in runs.text
    from catalog.models import Server, SyncRun

    assert Server.objects.get(slug="b-secret-server").name != "mine now"
    b_run = SyncRun.objects.get(source="beat:b-secret-server")
    assert api.get(f"sync-runs/{b_run.pk}/", token=tenants).status_code == 404


def test_a_session_sees_the_servers_its_person_may_manage(client, tenants, owner, superuser):
    client.force_login(owner)
    listed = client.get("/api/v1/servers/")
    assert listed.status_code == 200
    assert [server["slug"] for server in listed.json()["results"]] == ["a-server", "github", "payroll"]
    client.force_login(superuser)
    assert "b-secret-server" in client.get("/api/v1/servers/").content.decode()
