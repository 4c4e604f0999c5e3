"""A failed sync says what failed and what to do where the operator looks: at the top of the server's page (not only
in its Health section, below the connection fields it asks to correct) and on the failed run's page, with the way to
the other. Once a sync succeeds, neither says it any more."""

import re
import sys
from pathlib import Path

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
    assert "install it on every machine that runs Scout" in panel  # this error's next step
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
    assert "did not answer in time" not in panel and "To fix it" not in panel and "syncrun" not in panel


def _add_form(**fields: str) -> dict:
    data = {"name": "New", "environment": "production", "args": "[]", "env_vars": "[]", "header_env": "{}"}
    data |= {"openapi_credentials": "[]", "openapi_document": "", **fields}
    for prefix in ("group_grants", "user_grants", "tenants"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    return data


TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")
# Real failures, each with the words of its own next step (none is the general one).
FAILURES = {
    "no-command": ({"transport": "stdio", "command": "mcp-server-not-installed-here"}, "install it on every machine"),
    "no-variable": (
        {"transport": "stdio", "command": TIME_SERVER, "env_vars": '["SCOUT_TEST_NEVER_SET"]'},
        "Set the environment variable(s) named in the error in the environment of every Scout process",
    ),
    "nothing-listening": ({"transport": "http", "url": "http://127.0.0.1:9/mcp"}, "Nothing answered at that address"),
    "garbage-document": (
        {"transport": "openapi", "base_url": "http://127.0.0.1:9/v1", "openapi_document": "hello: [1, 2"},
        "Correct the OpenAPI document",
    ),
}


@pytest.mark.django_db(transaction=True)  # the first sync's message is added once the new server is committed
@pytest.mark.parametrize("case", FAILURES)
def test_each_failure_says_its_own_next_step_wherever_the_operator_reads_it(
    client, django_user_model, loopback_upstreams, case
):
    """The error says what is wrong; the step beside it says what to do about that error (install the command, set
    the variable, start the server, correct the document), on the test page, the message on saving, the server's
    page and the run's. Before, every failure got one general paragraph about commands, arguments and URLs."""
    fields, step = FAILURES[case]
    client.force_login(_staff(django_user_model, "op", OPERATORS))
    tested = client.post(reverse("admin:catalog_server_test_connection"), _add_form(slug=case, **fields))
    assert step in tested.content.decode().replace("&#x27;", "'")
    response = client.post(reverse("admin:catalog_server_add"), _add_form(slug=case, **fields), follow=True)
    run = SyncRun.objects.get(server__slug=case)
    assert run.status == SyncStatus.FAILED
    [message] = [str(message) for message in response.context["messages"] if "First sync" in str(message)]
    assert step in message.replace("&#x27;", "'") and SYNC_FAILED_NEXT.replace("'", "&#x27;") not in message
    page = client.get(reverse("admin:catalog_server_change", args=[run.server.pk])).content.decode()
    assert step in _panel(page).replace("&#x27;", "'")
    run_page = client.get(reverse("admin:catalog_syncrun_change", args=[run.pk])).content.decode()
    assert step in run_page.split("What to do:", 1)[1].split("</div>", 1)[0].replace("&#x27;", "'")


def test_a_host_scout_may_not_reach_says_who_lists_it(client, django_user_model, settings):
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = []
    client.force_login(_staff(django_user_model, "op", OPERATORS))
    fields = _add_form(slug="remote", transport="http", url="https://mcp.example.com/mcp")
    page = client.post(reverse("admin:catalog_server_test_connection"), fields).content.decode()
    assert "host mcp.example.com is not in SCOUT_UPSTREAM_ALLOWED_HOSTS" in page
    assert "whoever runs Scout adds its host" in page.split('id="test-connection-next">', 1)[1].split("</p>", 1)[0]


def test_the_log_line_and_the_sync_command_say_what_to_do_too(make_server, caplog, capsys):
    """An operator who reads the logs (a Celery worker's, the web process's) or runs ``manage.py catalog_sync`` got the
    error only ("sync of clock failed: clock: environment variable(s) not set: CLOCK_TOKEN"): the admin's next step is
    now said there too, with how to sync again. A real server (mcp-server-time) whose variable is not set."""
    from django.core.management import CommandError, call_command

    from catalog.services.sync import server_sync

    server = make_server("clock", transport="stdio", command=TIME_SERVER, env_vars=["SCOUT_TEST_NEVER_SET"])
    step = "Set the environment variable(s) named in the error in the environment of every Scout process"
    again = "Then sync it again: Sync now on its page in the admin, or manage.py catalog_sync clock."
    with caplog.at_level("WARNING", logger="catalog.services.sync"):
        assert server_sync(server_pk=server.pk, trigger="command").status == SyncStatus.FAILED
    [line] = [record.getMessage() for record in caplog.records if "sync of clock failed" in record.getMessage()]
    assert "environment variable(s) not set: SCOUT_TEST_NEVER_SET. What to do: " + step in line and again in line

    with pytest.raises(CommandError, match="1 of 1 sync"):
        call_command("catalog_sync", "clock", "--no-progress")
    printed = capsys.readouterr().out
    assert f"    What to do: {step}" in printed and again in printed
