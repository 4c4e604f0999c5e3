"""The server list reads a page of servers in a fixed number of queries for a tenant's operator: which fields each
row hides (a shared server's connection, ``server_fields_locked``) was asked three queries a row (adminux25)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governance.models import ServerTenant
from tests.api.conftest import give_perms
from tests.api.test_servers import OPERATOR_PERMS
from tests.governance.factories import ServerFactory, tenant_with

pytestmark = pytest.mark.django_db


def _servers(tenant, n: int, *, start: int) -> None:
    """``n`` shared servers and ``n`` of ``tenant``'s, half of those naming a variable (their URL is locked too)."""
    for i in range(start, start + n):
        ServerFactory(slug=f"shared-{i}", transport="streamable_http", url=f"https://shared-{i}.example/mcp")
        own = ServerFactory(slug=f"own-{i}", env_vars=["API_KEY"] if i % 2 else [])
        ServerTenant.objects.create(server=own, tenant=tenant)


def _listed(client) -> tuple[int, list[dict]]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/v1/servers/")
    assert response.status_code == 200
    return len(queries.captured_queries), response.json()["results"]


def test_a_tenant_operator_lists_servers_in_the_same_queries_for_more_rows(client, owner):
    tenant = tenant_with("tenant-a", owner)
    give_perms(owner, *OPERATOR_PERMS)
    client.force_login(owner)
    _servers(tenant, 2, start=0)
    few, rows = _listed(client)
    _servers(tenant, 6, start=2)
    many, rows = _listed(client)
    assert len(rows) == 16 and many == few
    # What each row shows is as before: a shared server's connection hidden, and their own tenant's one that names a
    # variable a superuser set (its URL is locked); their own other ones shown whole.
    shown = {row["slug"]: row for row in rows}
    assert not {"url", "command", "env_vars"} & ({*shown["shared-3"]} | {*shown["own-3"]})
    assert {"url", "command", "env_vars"} <= {*shown["own-4"]}
