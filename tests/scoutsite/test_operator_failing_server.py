"""An operator's home, with an upstream that fails to sync (a real Streamable HTTP sync to a closed port): which server
fails, since when (its first failed run since it last synced), its last error as the sync recorded it (escaped), and
a button that retries the sync from the home."""

import socket

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from catalog.choices import SyncStatus, Transport
from catalog.models import Server, SyncRun
from catalog.services.sync import server_sync
from governance.roles import OPERATORS

pytestmark = pytest.mark.django_db


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # free once closed: nothing listens there


@pytest.fixture
def failing(loopback_upstreams):
    server = Server.objects.create(slug="zz-payments", name="Payments", transport=Transport.HTTP,
                                   url=f"http://127.0.0.1:{_closed_port()}/mcp")  # fmt: skip
    first = server_sync(server_pk=server.pk)
    assert first.status == SyncStatus.FAILED
    return server, first


def _panel(client) -> str:
    html = client.get(reverse("admin:index")).content.decode()
    return html[html.index('id="operator-home"') :].split("</section>")[0]


def test_the_home_says_which_server_fails_since_when_why_and_retries_it(client, django_user_model, failing):
    server, first = failing
    operator = django_user_model.objects.create_user(username="op", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(operator)
    since = f"failing since {first.started_at.astimezone():%Y-%m-%d %H:%M}"
    row = _panel(client).split('id="failing-zz-payments"')[1].split("</td>")[0]
    assert since in row
    server.refresh_from_db()
    assert server.last_error and "connection refused or unreachable" in server.last_error
    assert "zz-payments: connection refused or unreachable: http://127.0.0.1:" in row
    retry = reverse("admin:catalog_server_sync", args=[server.pk])
    assert f'<form method="post" action="{retry}">' in row and "Retry sync" in row
    assert client.post(retry).status_code == 302  # the sync runs (eagerly here), and fails again
    assert SyncRun.objects.filter(server=server, status=SyncStatus.FAILED).count() == 2
    assert since in _panel(client).split('id="failing-zz-payments"')[1]  # since the first failure, not the retry


def test_a_servers_error_is_shown_escaped(client, django_user_model, failing):
    server, _ = failing
    Server.objects.filter(pk=server.pk).update(last_error="zz-payments: HTTP 500 <script>alert(1)</script>")
    operator = django_user_model.objects.create_user(username="op", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(operator)
    row = _panel(client).split('id="failing-zz-payments"')[1]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in row and "<script>alert" not in row
