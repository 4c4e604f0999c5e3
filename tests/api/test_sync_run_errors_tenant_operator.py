"""A shared server's sync runs read by a tenant's operator (redteam42, Z12/T14): a run's error repeats the server's URL,
path and all, where a hosted MCP server's secret often is. redteam40 hid a shared server's connection from tenant
operators on its page and in ``servers/``, but its runs still spelt the URL out: the run list, the run's page and its
progress JSON, the admin's search over errors (a row count per guessed prefix), ``sync-runs/``, the answer to a sync
the operator started, and their home page (the server's last error, the week's failed runs). Each now reads the URL
cut to its origin; their own tenant's server, and a superuser, read it whole. Real failed syncs (nothing listens)."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from catalog.choices import Transport
from catalog.models import Server, SyncRun
from catalog.services.sync import server_sync
from governance.models import ServerTenant
from governance.roles import OPERATORS
from tests.api.conftest import api_db, make_token
from tests.governance.factories import tenant_with
from tests.scoutsite.test_operator_failing_server import _closed_port

pytestmark = api_db
SHARED_SECRET = "s3cr3t-path-4711"
OWN_SECRET = "own-path-0815"


@pytest.fixture
def failed_runs(loopback_upstreams, django_user_model):
    """A shared server and tenant A's own, each with one failed sync whose error names its URL; A's operator."""
    port = _closed_port()
    shared = Server.objects.create(slug="hosted", name="Hosted", transport=Transport.HTTP,
                                   url=f"http://127.0.0.1:{port}/api/mcp/s/{SHARED_SECRET}/mcp")  # fmt: skip
    own = Server.objects.create(slug="own", name="Own", transport=Transport.HTTP,
                                url=f"http://127.0.0.1:{port}/mcp/{OWN_SECRET}")  # fmt: skip
    operator = django_user_model.objects.create_user(username="op-a", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    tenant = tenant_with("tenant-a", operator)
    ServerTenant.objects.create(server=own, tenant=tenant)
    for server in (shared, own):
        server_sync(server_pk=server.pk)
    runs = {run.server.slug: run for run in SyncRun.objects.select_related("server")}
    assert SHARED_SECRET in runs["hosted"].error and OWN_SECRET in runs["own"].error  # what there is to leak
    return runs, operator, tenant


def test_a_tenant_operator_reads_a_shared_servers_run_errors_cut_to_the_origin(client, failed_runs):
    runs, operator, _ = failed_runs
    client.force_login(operator)
    listed = client.get(reverse("admin:catalog_syncrun_changelist")).content.decode()
    page = client.get(reverse("admin:catalog_syncrun_change", args=[runs["hosted"].pk])).content.decode()
    progress = client.get(reverse("admin:catalog_syncrun_progress", args=[runs["hosted"].pk])).content.decode()
    home = client.get(reverse("admin:index")).content.decode()  # the server's last error and its failed runs
    for body in (listed, page, progress, home):
        assert SHARED_SECRET not in body and "connection refused" in body, body
    assert "http://127.0.0.1:" in page and "http://127.0.0.1:" in progress  # the origin is still said
    assert OWN_SECRET in listed and OWN_SECRET in home  # their own server's runs: whole
    assert OWN_SECRET in client.get(reverse("admin:catalog_syncrun_change", args=[runs["own"].pk])).content.decode()
    # Searching errors: a prefix of the hidden path matches nothing, of their own path their run; the slug still finds.
    search = reverse("admin:catalog_syncrun_changelist")
    assert client.get(search, {"q": SHARED_SECRET[:6]}).context["cl"].result_count == 0
    assert client.get(search, {"q": OWN_SECRET[:6]}).context["cl"].result_count == 1
    assert client.get(search, {"q": "hosted"}).context["cl"].result_count == 1
    # Test connection of the shared server (its stored URL: the tenant's operator may not change it) likewise.
    test = f"{reverse('admin:catalog_server_test_connection')}?server={runs['hosted'].server_id}"
    tested = client.post(test, {"name": "Hosted", "transport": "http"}).content.decode()
    assert "connection refused" in tested and SHARED_SECRET not in tested, tested
    # A sync of the shared server started from its page says how it failed, without the path.
    synced = client.post(reverse("admin:catalog_server_sync", args=[runs["hosted"].server_id]), follow=True)
    said = " ".join(str(message) for message in synced.context["messages"])
    assert "failed" in said and SHARED_SECRET not in said, said


def test_a_tenant_operators_token_reads_a_shared_servers_run_errors_cut_and_a_superuser_whole(
    api, failed_runs, superuser
):
    runs, operator, tenant = failed_runs
    token = make_token(operator, ["api"], tenant=tenant)
    listed = api.get("sync-runs/", token=token)
    one = api.get(f"sync-runs/{runs['hosted'].pk}/", token=token)
    synced = api.post("servers/hosted/sync/", token=token)
    for answer in (listed, one, synced):
        assert answer.status_code in (200, 202) and SHARED_SECRET not in answer.text, answer.text
    assert "http://127.0.0.1:" in one.json()["error"] and OWN_SECRET in listed.text
    assert SHARED_SECRET in api.get(f"sync-runs/{runs['hosted'].pk}/", token=make_token(superuser, ["api"])).text
