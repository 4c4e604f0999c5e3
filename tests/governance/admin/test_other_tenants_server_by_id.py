"""Z12: the server pages' own views take a server (or sync run) id: sync, the OpenAPI preview, the connection test
and the progress poll. They looked the id up among every server, so an operator of tenant A reached tenant B's:
queued its sync (the message named it), read its OpenAPI operations and sync progress, and tested a connection
with tenant B's stored credentials sent to a URL of their choosing. Another tenant's id now answers like an unknown
one."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from catalog.models import OpenAPIDocument, Server, SyncRun
from governance.models import ServerTenant
from governance.roles import OPERATORS
from tests.governance.factories import ServerFactory, tenant_with

pytestmark = pytest.mark.django_db
SECRET = "bravo-credential-4f1c9e"
UNKNOWN_PK = 999_999


@pytest.fixture
def world(django_user_model, outsider, monkeypatch):
    monkeypatch.setenv("BRAVO_TOKEN", SECRET)
    operator = django_user_model.objects.create_user(username="op-a", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    tenant_with("tenant-a", operator)
    bravo = ServerFactory(
        slug="bravo-srv", transport="http", url="https://bravo.example/mcp", header_env={"Authorization": "BRAVO_TOKEN"}
    )
    ServerTenant.objects.create(server=bravo, tenant=tenant_with("tenant-b", outsider))
    return operator, bravo


@pytest.fixture
def listener(loopback_upstreams):
    """A web server of the attacker's: records the headers of every request it gets, answers 404."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            seen.append(dict(self.headers))
            self.send_response(404)
            self.end_headers()

        do_GET = do_POST  # noqa: N815

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/mcp", seen
    server.shutdown()


def test_another_tenants_server_cannot_be_synced_by_id(client, world):
    operator, bravo = world
    client.force_login(operator)
    unknown = client.post(reverse("admin:catalog_server_sync", args=[UNKNOWN_PK]))
    foreign = client.post(reverse("admin:catalog_server_sync", args=[bravo.pk]), follow=True)
    assert unknown.status_code == 404 and foreign.status_code == 404
    assert "bravo" not in foreign.content.decode()
    assert not SyncRun.objects.exists()


def test_another_tenants_openapi_operations_cannot_be_read_by_id(client, world):
    operator, bravo = world
    Server.objects.filter(pk=bravo.pk).update(transport="openapi", base_url="https://bravo.example")
    paths = {"/payroll": {"get": {"operationId": "bravoPayroll", "responses": {"200": {"description": "ok"}}}}}
    text = json.dumps({"openapi": "3.0.3", "info": {"title": "B", "version": "1"}, "paths": paths})
    OpenAPIDocument.objects.create(server=bravo, text=text)
    client.force_login(operator)
    preview = "admin:catalog_server_openapi_preview"
    foreign = client.get(reverse(preview, args=[bravo.pk]))
    assert foreign.status_code == client.get(reverse(preview, args=[UNKNOWN_PK])).status_code
    assert foreign.status_code == 404 and "bravoPayroll" not in foreign.content.decode()


def test_another_tenants_sync_progress_cannot_be_read_by_id(client, world):
    operator, bravo = world
    run = SyncRun.objects.create(server=bravo, status="failed", started_at=timezone.now(), error="bravo token refused")
    client.force_login(operator)
    foreign = client.get(reverse("admin:catalog_syncrun_progress", args=[run.pk]))
    assert foreign.status_code == 404 and "bravo" not in foreign.content.decode()


def test_a_connection_test_never_sends_another_tenants_credentials(client, world, listener):
    """The connection test of an existing server keeps what the form leaves out (its stored header variables):
    with tenant B's server id, tenant B's credential went to the URL the operator typed."""
    operator, bravo = world
    url, seen = listener
    client.force_login(operator)
    form = {"slug": "probe", "name": "Probe", "transport": "http", "url": url, "environment": "production"}
    response = client.post(reverse("admin:catalog_server_test_connection") + f"?server={bravo.pk}", form)
    assert response.status_code == 200
    assert seen, "the connection test reached the listener"
    assert not any(SECRET in value for headers in seen for value in headers.values())
    assert "bravo" not in response.content.decode()
    for odd in ("abc", "1.5", "-1"):  # not an id: the same as none, never a 500
        assert client.post(reverse("admin:catalog_server_test_connection") + f"?server={odd}", form).status_code == 200
