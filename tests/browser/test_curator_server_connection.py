"""A curator reads the server list and pages (which server a tool comes from, whether it serves) but does not start or
reach servers: a hosted MCP server's URL often carries its secret in the path, a stdio server's arguments a key, and
its last error repeats the URL (``safe_url`` keeps the path). Over a real browser: the curator's page shows neither,
the error's URL cut to its origin; the operator's page shows both (redteam40)."""

import pytest
from django.contrib.auth.models import Group

from catalog.choices import Transport
from catalog.models import Server
from catalog.services.sync import server_sync
from governance.roles import CURATORS, OPERATORS
from tests.governance.factories import ServerFactory
from tests.scoutsite.test_operator_failing_server import _closed_port

from .conftest import admin_login, find_now

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
URL_SECRET = "s3cr3t-path-4711"
ARG_SECRET = "k3y-arg-4711"


def test_a_curator_reads_no_servers_url_secret_arguments_or_error_path(
    browser, live_server, django_user_model, loopback_upstreams
):
    from selenium.webdriver.common.by import By

    port = _closed_port()
    hosted = Server.objects.create(slug="hosted", name="Hosted", transport=Transport.HTTP,
                                   url=f"http://127.0.0.1:{port}/api/mcp/s/{URL_SECRET}/mcp")  # fmt: skip
    server_sync(server_pk=hosted.pk)  # fails: nothing listens there; the last error names the URL
    hosted.refresh_from_db()
    assert URL_SECRET in hosted.last_error and "connection refused or unreachable" in hosted.last_error
    keyed = ServerFactory(
        slug="keyed", transport=Transport.STDIO, command="mcp-server-time", args=[f"--api-key={ARG_SECRET}"]
    )
    for name, role in (("cur", CURATORS), ("op", OPERATORS)):
        person = django_user_model.objects.create_user(username=name, password=f"pw-{name}-123", is_staff=True)
        person.groups.add(Group.objects.get(name=role))

    admin_login(browser, live_server.url, "cur", "pw-cur-123", path=f"/admin/catalog/server/{hosted.pk}/change/")
    page = browser.page_source
    assert "hosted" in browser.find_element(By.ID, "content").text
    assert URL_SECRET not in page, "the URL's secret path reached a curator"
    failed = browser.find_element(By.ID, "sync-failed").text  # the failure is still said, its URL cut to the origin
    assert "connection refused or unreachable" in failed and f"http://127.0.0.1:{port}/…" in failed, failed
    browser.get(f"{live_server.url}/admin/catalog/server/{keyed.pk}/change/")
    assert "keyed" in browser.find_element(By.ID, "content").text
    assert ARG_SECRET not in browser.page_source, "a stdio server's argument reached a curator"
    # Nor offered a connection test, which takes the connection it does not see (and refused them: 403).
    assert not find_now(browser, By.ID, "test-connection")
    # Nor spelt out by the server list's row count: a lookup on a connection field is refused (400).
    for lookup in (f"url__contains={URL_SECRET[:4]}", f"args__contains={ARG_SECRET[:4]}", "last_error__contains=s3"):
        browser.get(f"{live_server.url}/admin/catalog/server/?{lookup}")
        assert "Bad Request (400)" in browser.page_source and "hosted" not in browser.page_source, lookup

    browser.delete_all_cookies()
    admin_login(browser, live_server.url, "op", "pw-op-123", path=f"/admin/catalog/server/{hosted.pk}/change/")
    assert URL_SECRET in browser.find_element(By.ID, "sync-failed").text  # the operator's own connection
    assert browser.find_element(By.NAME, "url").get_attribute("value").endswith(f"/s/{URL_SECRET}/mcp")
    browser.get(f"{live_server.url}/admin/catalog/server/{keyed.pk}/change/")
    assert ARG_SECRET in browser.page_source
    assert browser.find_element(By.ID, "test-connection").is_displayed()


def test_a_tenant_operator_reads_no_shared_servers_connection_but_their_own_servers(
    browser, live_server, shared_server_tenants
):
    """A shared server's connection is a superuser's (every tenant's credential; only a superuser changes it): tenant
    A's operator reads the server, not its URL's secret, while their own tenant's server shows its URL."""
    from selenium.webdriver.common.by import By

    from governance.models import ServerTenant, Tenant
    from tests.browser.conftest import OPERATOR_A

    shared = shared_server_tenants().server
    url = f"https://mcp.example/api/s/{URL_SECRET}/mcp"
    Server.objects.filter(pk=shared.pk).update(
        transport=Transport.HTTP, url=url, status="degraded", last_error=f"shared-srv: HTTP 503 from {url}"
    )
    own = Server.objects.create(slug="own-srv", name="Own", transport=Transport.HTTP,
                                url="https://own.example/mcp/own-path-4711")  # fmt: skip
    ServerTenant.objects.create(server=own, tenant=Tenant.objects.get(slug="tenant-a"))

    admin_login(browser, live_server.url, *OPERATOR_A, path=f"/admin/catalog/server/{shared.pk}/change/")
    assert "shared-srv" in browser.find_element(By.ID, "content").text
    assert URL_SECRET not in browser.page_source, "a shared server's secret reached a tenant's operator"
    assert "https://mcp.example/…" in browser.find_element(By.ID, "sync-failed").text
    browser.get(f"{live_server.url}/admin/catalog/server/{own.pk}/change/")
    assert browser.find_element(By.NAME, "url").get_attribute("value").endswith("/mcp/own-path-4711")
