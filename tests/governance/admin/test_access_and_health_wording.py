"""What the admin says: an access row's column reads what it grants ("Group | May"), not the model's "Permission";
and a Degraded server's tools are hidden from clients, which operators may not expect, so every place that shows a
server's health says it (the server's page and list, the operator's home, the dashboard)."""

import re

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.roles import OPERATORS
from tests.governance.factories import ServerFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client, django_user_model):
    person = django_user_model.objects.create_user(username="op", is_staff=True)
    person.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(person)
    return person


def _headers(html: str, prefix: str) -> list[str]:
    group = html[html.index(f'id="{prefix}-group"') :]
    head = group[group.index("<thead>") : group.index("</thead>")]
    return [re.sub(r"<[^>]+>|\s+", " ", cell).strip() for cell in re.findall(r"<th[^>]*>(.*?)</th>", head, re.S)]


def test_an_access_rows_columns_say_what_it_grants(client, operator, grant, member):
    server = ServerFactory(slug="github")
    grant(Group.objects.get(name=OPERATORS), server, "discover")
    grant(member, server, "execute")
    html = client.get(reverse("admin:catalog_server_change", args=[server.pk])).content.decode()
    assert _headers(html, "group_grants")[1:3] == ["Group", "May"]
    assert _headers(html, "user_grants")[1:3] == ["Person", "May"]
    assert ">Permission" not in html


def test_a_degraded_servers_hidden_tools_are_said_where_health_is_shown(client, operator, django_user_model):
    from django.utils import timezone

    server = ServerFactory(slug="flaky", transport="stdio", command="x", status="degraded")
    server.last_synced_at = timezone.now()
    server.save()
    ServerFactory(slug="fine", transport="stdio", command="x", status="active", last_synced_at=timezone.now())
    page = client.get(reverse("admin:catalog_server_change", args=[server.pk])).content.decode()
    assert "Its tools are hidden from clients (search, inspect, execute) until a sync succeeds" in page
    listing = client.get(reverse("admin:catalog_server_changelist")).content.decode()
    assert listing.count("tools hidden from clients") == 1  # the degraded server's row, not the active one's
    home = client.get(reverse("admin:index")).content.decode()
    assert home.count("tools hidden from clients") == 1
    dashboard = client.get(reverse("dashboard")).content.decode()
    assert "a Degraded (its last sync failed), Unavailable, Disabled or Archived server&#x27;s tools are hidden" in (
        dashboard
    )
