"""A tenant's operator may not name the install's environment or start its processes (Z12, T14).

The gateway's processes serve every tenant and hold every tenant's credentials (and Scout's own secrets) in their
environment. An operator of tenant A could register a server whose header variable named any of them
(SECRET_KEY, tenant B's token) with a URL of their own, or a stdio command of their choosing, and one connection
test sent the secret there or ran the command; on a shared server they could point its URL elsewhere and receive
its credential with every tenant's calls. Naming environment variables and commands is the superuser's (as for a
tenant's approval webhook), and a shared server's connection is not a tenant operator's to move."""

import sys

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from catalog.models import Server
from governance.roles import OPERATORS
from tests.governance.admin.test_other_tenants_server_by_id import listener  # noqa: F401 - a fixture
from tests.governance.factories import ServerFactory, tenant_with

pytestmark = pytest.mark.django_db
SECRET = "install-secret-8d2a71"


@pytest.fixture
def operator_a(django_user_model, monkeypatch):
    monkeypatch.setenv("PLANTED_SECRET", SECRET)
    operator = django_user_model.objects.create_user(username="op-a", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    tenant_with("tenant-a", operator)
    return operator


def _form(**fields) -> dict:
    data = {"slug": "probe", "name": "Probe", "environment": "production", "transport": "http", "url": ""}
    data.update({"command": "", "args": "[]", "env_vars": "[]", "header_env": "{}"})
    for prefix in ("tenancy", "group_grants", "user_grants", "sync_runs"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    data.update(fields)
    return data


def _sent(seen) -> bool:
    return any(SECRET in value for headers in seen for value in headers.values())


def test_a_tenant_operator_names_no_environment_variable(client, operator_a, listener):  # noqa: F811
    url, seen = listener
    client.force_login(operator_a)
    leak = _form(url=url, header_env='{"X-Leak": "PLANTED_SECRET"}', env_vars='["PLANTED_SECRET"]')
    client.post(reverse("admin:catalog_server_test_connection"), leak)
    assert seen and not _sent(seen)
    client.post(reverse("admin:catalog_server_add"), leak)
    assert all(not server.header_env and not server.env_vars for server in Server.objects.all())


def test_a_tenant_operators_openapi_connection_test_sends_no_credential(client, operator_a, listener):  # noqa: F811
    """Test connection reads an OpenAPI service's document too (fetched with its credentials on the base URL's origin):
    credentials a tenant operator names are not theirs to name, so the fetch carries none."""
    url, seen = listener
    base = url.removesuffix("/mcp")
    client.force_login(operator_a)
    named = '[{"type": "bearer", "env": "PLANTED_SECRET"}]'
    probe = _form(transport="openapi", base_url=base, openapi_url=f"{base}/openapi.json", openapi_credentials=named)
    page = client.post(reverse("admin:catalog_server_test_connection"), probe).content.decode()
    assert seen and not _sent(seen) and SECRET not in page  # fetched (the listener answered 404), without the secret
    assert not Server.objects.exists()


def test_a_tenant_operator_starts_no_command(client, operator_a, tmp_path):
    marker = tmp_path / "ran"
    client.force_login(operator_a)
    args = f'["-c", "open({str(marker)!r}, \\"w\\").write(\\"x\\")"]'
    run = _form(transport="stdio", command=sys.executable, args=args)
    client.post(reverse("admin:catalog_server_test_connection"), run)
    assert not marker.exists()
    client.post(reverse("admin:catalog_server_add"), run)
    assert not Server.objects.filter(command=sys.executable).exists()


def test_a_tenant_operator_cannot_point_a_shared_server_elsewhere(client, operator_a, listener):  # noqa: F811
    url, seen = listener
    shared = ServerFactory(
        slug="shared-srv", transport="http", url="https://shared.example/mcp", header_env={"X-Key": "PLANTED_SECRET"}
    )
    client.force_login(operator_a)
    moved = _form(slug="shared-srv", name="Shared", url=url)
    moved.pop("header_env")  # left out: the form keeps the stored variable
    client.post(reverse("admin:catalog_server_test_connection") + f"?server={shared.pk}", moved)
    assert not _sent(seen)
    client.post(reverse("admin:catalog_server_change", args=[shared.pk]), moved)
    shared.refresh_from_db()
    assert shared.url == "https://shared.example/mcp" and shared.header_env == {"X-Key": "PLANTED_SECRET"}


def test_a_tenant_operator_cannot_move_their_servers_credentials(client, operator_a, listener, live_server, settings):  # noqa: F811
    """A superuser named the variable holding the credential of tenant A's server: A's operator moving its URL (form,
    connection test, REST) had Scout send the credential to a host of theirs. A server without credentials is still
    theirs to move."""
    import httpx

    from governance.models import ServerTenant
    from tests.api.conftest import give_perms, make_token
    from tests.api.test_servers import OPERATOR_PERMS

    url, seen = listener
    tenant = operator_a.tenants.get()
    keyed = ServerFactory(
        slug="keyed-srv", transport="http", url="https://own.example/mcp", header_env={"X-Key": "PLANTED_SECRET"}
    )
    plain = ServerFactory(slug="plain-srv", transport="http", url="https://plain.example/mcp")
    for server in (keyed, plain):
        ServerTenant.objects.create(server=server, tenant=tenant)
    client.force_login(operator_a)
    moved = _form(slug="keyed-srv", name="Keyed", url=url, status="active")
    moved.pop("header_env")  # read-only: the form keeps the stored variable
    client.post(reverse("admin:catalog_server_test_connection") + f"?server={keyed.pk}", moved)
    assert not _sent(seen)
    client.post(reverse("admin:catalog_server_change", args=[keyed.pk]), moved)
    keyed.refresh_from_db()
    assert keyed.url == "https://own.example/mcp"
    page = client.get(reverse("admin:catalog_server_change", args=[keyed.pk])).content.decode()
    assert "only a superuser changes where its calls go" in page  # why the URL is read-only

    settings.SCOUT_API_RATE = "10000/minute"
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = [*settings.SCOUT_UPSTREAM_ALLOWED_HOSTS, "*.example"]
    give_perms(operator_a, *OPERATOR_PERMS)
    headers = {"Authorization": f"Bearer {make_token(operator_a, ['api'], tenant=tenant)}"}
    base = f"{live_server.url}/api/v1/servers/"
    response = httpx.patch(base + "keyed-srv/", json={"url": "https://attacker.example/mcp"}, headers=headers)
    assert response.status_code == 403, response.text
    assert Server.objects.get(slug="keyed-srv").url == "https://own.example/mcp"
    response = httpx.patch(base + "plain-srv/", json={"url": "https://moved.example/mcp"}, headers=headers)
    assert response.status_code == 200, response.text


def test_a_superuser_still_names_them(client, superuser, listener, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PLANTED_SECRET", SECRET)
    url, seen = listener
    client.force_login(superuser)
    client.post(
        reverse("admin:catalog_server_test_connection"), _form(url=url, header_env='{"X-Key": "PLANTED_SECRET"}')
    )
    assert _sent(seen)  # the superuser named the variable on purpose: it is sent where they said


def test_a_tenant_operators_token_names_no_environment_variable_over_rest(live_server, operator_a, settings):
    import httpx

    from tests.api.conftest import give_perms, make_token
    from tests.api.test_servers import OPERATOR_PERMS

    settings.SCOUT_API_RATE = "10000/minute"
    give_perms(operator_a, *OPERATOR_PERMS)
    token = make_token(operator_a, ["api"], tenant=operator_a.tenants.get())
    headers = {"Authorization": f"Bearer {token}"}
    ServerFactory(slug="shared-srv", transport="http", url="https://shared.example/mcp")
    base = f"{live_server.url}/api/v1/servers/"
    for method, path, body in (
        ("POST", "", {"slug": "probe", "name": "P", "transport": "http", "url": "https://x.example/mcp",
                      "header_env": {"X-Leak": "PLANTED_SECRET"}}),
        ("POST", "", {"slug": "probe", "name": "P", "transport": "stdio", "command": sys.executable}),
        ("PATCH", "shared-srv/", {"url": "https://attacker.example/mcp"}),
    ):  # fmt: skip
        response = httpx.request(method, base + path, json=body, headers=headers, timeout=60)
        assert response.status_code == 403, (path, body, response.text)
    assert not Server.objects.filter(slug="probe").exists()
    assert Server.objects.get(slug="shared-srv").url == "https://shared.example/mcp"


def test_a_tenant_operator_cannot_claim_a_shared_server(client, operator_a):
    """Giving a shared server a tenant takes it away from every other tenant (and its credentials with it)."""
    from governance.models import ServerTenant

    shared = ServerFactory(slug="shared-srv", transport="http", url="https://shared.example/mcp")
    own = ServerFactory(slug="own-srv", transport="http", url="https://own.example/mcp")
    ServerTenant.objects.create(server=own, tenant=operator_a.tenants.get())
    client.force_login(operator_a)
    claim = _form(slug="shared-srv", name="Shared", status="active", **{"tenancy-TOTAL_FORMS": "1"})
    claim["tenancy-0-tenant"] = str(operator_a.tenants.get().pk)
    assert client.post(reverse("admin:catalog_server_change", args=[shared.pk]), claim).status_code == 302
    assert not ServerTenant.objects.filter(server=shared).exists()
    page = client.get(reverse("admin:catalog_server_change", args=[own.pk])).content.decode()
    assert "tenancy-0-tenant" in page  # their own server's tenant section is still there


def test_the_form_says_why_a_tenant_operator_sees_the_command_read_only(client, operator_a, admin_user):
    # The command showed "-" and the form answered "A stdio server needs a command": a dead end with no reason.
    client.force_login(operator_a)
    refused = client.post(reverse("admin:catalog_server_add"), _form(transport="stdio", command=sys.executable))
    assert "A stdio server needs a command." in refused.text
    assert "set by a superuser once Scout has tenants" in refused.text
    assert "ask a superuser to add a stdio server" in refused.text
    shared = ServerFactory(slug="shared-srv")
    page = client.get(reverse("admin:catalog_server_change", args=[shared.pk]))
    assert "This server is shared by every tenant: only a superuser changes its connection." in page.text
    client.force_login(admin_user)
    assert "set by a superuser" not in client.get(reverse("admin:catalog_server_add")).text


def _transport_choices(client) -> tuple[list[str], str]:
    import re

    page = client.get(reverse("admin:catalog_server_add")).content.decode()
    select = re.search(r'<select name="transport".*?</select>', page, re.S).group(0)
    offered = re.findall(r'<option value="([^"]*)"', select)
    selected = re.search(r'<option value="([^"]*)"[^>]*selected', select).group(1)
    return offered, selected


def test_a_tenant_operators_new_server_form_offers_only_what_they_can_add(client, operator_a, superuser):
    """stdio needs a command, which a tenant's operator may not name: the form opened on it led to a refusal."""
    client.force_login(operator_a)
    offered, selected = _transport_choices(client)
    assert selected == "http" and "stdio" not in offered and "openapi" in offered
    client.force_login(superuser)
    offered, selected = _transport_choices(client)
    assert selected == "stdio" and "stdio" in offered
