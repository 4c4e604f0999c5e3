"""A failed sync says what failed and what to do where the operator looks: at the top of the server's page (not only
in its Health section, below the connection fields it asks to correct) and on the failed run's page, with the way to
the other. Once a sync succeeds, neither says it any more."""

import re

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from catalog.choices import SYNC_FAILED_NEXT, ServerStatus, SyncStatus
from catalog.models import Server, SyncRun
from governance.roles import CURATORS, OPERATORS

pytestmark = pytest.mark.django_db


def _panel(html: str) -> str:
    found = re.search(r'<div class="scout-panel scout-sync-failed" id="sync-failed">(.*?)</div>', html, re.S)
    return found.group(1) if found else ""


def _staff(django_user_model, name: str, role: str):
    person = django_user_model.objects.create_user(username=name, is_staff=True)
    person.groups.add(Group.objects.get(name=role))
    return person


def test_a_failed_sync_says_what_to_do_on_the_server_and_the_run_until_one_succeeds(
    client, django_user_model, scripted, make_server
):
    server = make_server("weather", transport="stdio", command="/nonexistent/scout-mcp-weather")
    client.force_login(_staff(django_user_model, "op", OPERATORS))
    page = reverse("admin:catalog_server_change", args=[server.pk])
    client.post(reverse("admin:catalog_server_sync", args=[server.pk]))  # a real sync, which fails
    run = SyncRun.objects.get(server=server)
    assert run.status == SyncStatus.FAILED and Server.objects.get(pk=server.pk).status == ServerStatus.UNAVAILABLE

    html = client.get(page).content.decode()
    panel = _panel(html)
    assert "The last sync failed" in panel and "/nonexistent/scout-mcp-weather" in panel
    assert "Unavailable: its tools are hidden from clients until a sync succeeds." in panel
    assert SYNC_FAILED_NEXT.replace("'", "&#x27;") in panel
    assert f'href="{reverse("admin:catalog_syncrun_change", args=[run.pk])}"' in panel
    assert html.index('id="sync-failed"') < html.index('name="command"')  # above the fields to correct

    run_page = client.get(reverse("admin:catalog_syncrun_change", args=[run.pk])).content.decode()
    what = run_page.split("What to do:", 1)[1].split("</div>", 1)[0]
    assert f'Server <a href="{page}">weather</a> is Unavailable' in what and "Test connection" in what

    # The command corrected (as the form would), a sync succeeds: the server is Active and neither page says more.
    working, _ = scripted({"pages": [[{"name": "forecast", "inputSchema": {"type": "object"}}]]}, slug="scripted")
    Server.objects.filter(pk=server.pk).update(command=working.command, args=working.args)
    client.post(reverse("admin:catalog_server_sync", args=[server.pk]))
    assert Server.objects.get(pk=server.pk).status == ServerStatus.ACTIVE
    assert 'id="sync-failed"' not in client.get(page).content.decode()
    assert "What to do" not in client.get(reverse("admin:catalog_syncrun_change", args=[run.pk])).content.decode()


def test_who_may_not_change_the_server_reads_the_failure_without_the_steps(client, django_user_model, make_server):
    server = make_server("weather", transport="stdio", command="x")
    Server.objects.filter(pk=server.pk).update(status=ServerStatus.DEGRADED, last_error="weather: timed out")
    client.force_login(_staff(django_user_model, "cur", CURATORS))  # reads servers, changes none, reads no runs
    panel = _panel(client.get(reverse("admin:catalog_server_change", args=[server.pk])).content.decode())
    assert "weather: timed out" in panel and "Degraded: its tools are hidden" in panel
    assert "To fix it" not in panel and "syncrun" not in panel
