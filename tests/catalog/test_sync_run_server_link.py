"""Sync runs list: a run's server opens the server's page (its status, tools and Sync now) for whoever may open
servers, as an operator may; for a reader who may not, the name stays plain text."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from django.utils import timezone

from catalog.choices import SyncStatus
from catalog.models import SyncRun
from governance.roles import OPERATORS
from tests.governance.factories import ServerFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def run() -> SyncRun:
    server = ServerFactory(slug="github-enterprise")
    return SyncRun.objects.create(server=server, status=SyncStatus.SUCCESS, started_at=timezone.now(), added=3)


def test_an_operator_opens_the_server_from_its_run(client, django_user_model, run):
    operator = django_user_model.objects.create_user(username="op", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(operator)
    listing = client.get(reverse("admin:catalog_syncrun_changelist")).content.decode()
    server_page = reverse("admin:catalog_server_change", args=[run.server_id])
    assert f'<a href="{server_page}">github-<wbr>enterprise</a>' in listing
    assert client.get(server_page).status_code == 200


def test_a_reader_who_may_not_open_servers_reads_the_name(client, django_user_model, run):
    reader = django_user_model.objects.create_user(username="reader", is_staff=True)
    reader.user_permissions.add(Permission.objects.get(codename="view_syncrun"))
    client.force_login(reader)
    listing = client.get(reverse("admin:catalog_syncrun_changelist")).content.decode()
    assert "github-<wbr>enterprise" in listing
    assert reverse("admin:catalog_server_change", args=[run.server_id]) not in listing
