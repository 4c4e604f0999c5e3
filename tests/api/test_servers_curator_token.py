"""/api/v1/servers/ through a curator's own token (redteam40, T14): a curator reads which servers there are and whether
they serve, not how they are started or reached, as on their admin pages; an operator's token reads it whole."""

import pytest
from django.contrib.auth.models import Group

from tests.api.conftest import api_db, make_token

pytestmark = api_db
URL_SECRET = "s3cr3t-path-4711"
ARG_SECRET = "k3y-arg-4711"


@pytest.fixture
def servers():
    from catalog.choices import Transport
    from tests.governance.factories import ServerFactory

    url = f"https://mcp.example/api/s/{URL_SECRET}/mcp"
    ServerFactory(slug="hosted", transport=Transport.HTTP, url=url, last_error=f"hosted: HTTP 503 from {url}")
    ServerFactory(slug="keyed", transport=Transport.STDIO, command="mcp-server-time", args=[f"--api-key={ARG_SECRET}"])


def _person(django_user_model, name: str, role: str) -> str:
    person = django_user_model.objects.create_user(username=name, is_staff=True)
    person.groups.add(Group.objects.get(name=role))
    return make_token(person, ["api"])


def test_a_curators_token_reads_no_servers_launch_details(api, servers, django_user_model):
    from governance.roles import CURATORS, OPERATORS

    curator, operator = _person(django_user_model, "cur", CURATORS), _person(django_user_model, "op", OPERATORS)
    listed = api.get("servers/", token=curator)
    assert listed.status_code == 200 and {row["slug"] for row in listed.json()["results"]} == {"hosted", "keyed"}
    for body in [listed.text, *(api.get(f"servers/{slug}/", token=curator).text for slug in ("hosted", "keyed"))]:
        assert URL_SECRET not in body and ARG_SECRET not in body, body
    row = api.get("servers/hosted/", token=curator).json()
    assert row["slug"] == "hosted" and row["transport"] == "http" and not {"url", "args", "last_error"} & set(row)
    # The operator's own token reads the connection it runs.
    assert api.get("servers/hosted/", token=operator).json()["url"].endswith(f"/s/{URL_SECRET}/mcp")
    assert ARG_SECRET in api.get("servers/keyed/", token=operator).text


def test_a_tenant_operators_token_reads_no_shared_servers_connection(api, servers, django_user_model):
    """A shared server's connection is a superuser's: tenant A's operator's token reads the server without it, and
    their own tenant's server whole."""
    from catalog.choices import Transport
    from catalog.models import Server
    from governance.models import ServerTenant
    from governance.roles import OPERATORS
    from tests.governance.factories import tenant_with

    person = django_user_model.objects.create_user(username="op-a", is_staff=True)
    person.groups.add(Group.objects.get(name=OPERATORS))
    tenant = tenant_with("tenant-a", person)
    operator = make_token(person, ["api"], tenant=tenant)
    own = Server.objects.create(slug="own", name="Own", transport=Transport.HTTP, url="https://own.example/mcp/p-4711")
    ServerTenant.objects.create(server=own, tenant=tenant)
    for path in ("servers/", "servers/hosted/", "servers/keyed/"):
        body = api.get(path, token=operator)
        assert body.status_code == 200 and URL_SECRET not in body.text and ARG_SECRET not in body.text, body.text
    assert api.get("servers/own/", token=operator).json()["url"].endswith("/mcp/p-4711")
