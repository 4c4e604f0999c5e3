"""The server form as an operator uses it: access given on the form itself (through the audited services),
a first sync on create, "Never synced" until then, a connection test that saves nothing, and a sync run page
that names the tools it added."""

import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from catalog.models import Server, SyncRun
from governance.models import AuditEvent, ServerGroupObjectPermission
from governance.roles import APPROVERS, OPERATORS

pytestmark = pytest.mark.django_db
TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user(username="op", is_staff=True)
    user.groups.add(Group.objects.get(name=OPERATORS))
    return user


def _form(**extra) -> dict:
    data = {
        "slug": "time",
        "name": "Time",
        "description": "",
        "category": "",
        "environment": "production",
        "transport": "stdio",
        "command": TIME_SERVER,
        "args": '["--local-timezone", "UTC"]',
        "env_vars": "[]",
        "url": "",
        "header_env": "{}",
    }
    for prefix in ("group_grants", "user_grants", "sync_runs"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    data.update(extra)
    return data


def _approve_permission_pk() -> int:
    from django.contrib.auth.models import Permission

    return Permission.objects.get(codename="approve_server").pk


def test_operator_registers_grants_and_syncs_from_the_form(client, operator, django_capture_on_commit_callbacks):
    client.force_login(operator)
    approvers = Group.objects.get(name=APPROVERS)
    data = _form(
        **{
            "group_grants-TOTAL_FORMS": "1",
            "group_grants-0-group": str(approvers.pk),
            "group_grants-0-permission": str(_approve_permission_pk()),
        }
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("admin:catalog_server_add"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    server = Server.objects.get(slug="time")
    assert ServerGroupObjectPermission.objects.filter(
        content_object=server, group=approvers, permission__codename="approve_server"
    ).exists()
    assert AuditEvent.objects.filter(event_type="grant").exists()  # through the service
    run = SyncRun.objects.get(server=server)  # the first sync ran on create
    assert run.status == "success" and server.tools.count() >= 2
    page = client.get(reverse("admin:catalog_syncrun_change", args=[run.pk])).content.decode()
    assert 'class="run-tool run-added"' in page and "time::get_current_time" in page


def _messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


# The first sync's message is added when the new server is committed, still within the request: these tests
# commit (transaction=True), as a real request does.
@pytest.mark.django_db(transaction=True)
def test_the_first_sync_message_says_it_succeeded_and_who_sees_the_tools(client, operator):
    from django.contrib.auth.models import Permission

    client.force_login(operator)
    discover = Permission.objects.get(codename="discover_server").pk
    given = _form(
        slug="clock",
        **{"group_grants-TOTAL_FORMS": "1", "group_grants-0-group": str(Group.objects.get(name=APPROVERS).pk)},
        **{"group_grants-0-permission": str(discover)},
    )
    response = client.post(reverse("admin:catalog_server_add"), given, follow=True)
    # The slug as written (a message's first letter is capitalised: "Clock: first sync..." named no server). Save
    # leads to the server list, where no access section is "below": the message links the server's page instead.
    # Tasks run in-process here (as in the demo): the sync has run, and the message says how it went.
    assert response.redirect_chain[-1][0] == reverse("admin:catalog_server_changelist")
    page = reverse("admin:catalog_server_change", args=[Server.objects.get(slug="clock").pk]) + "#group_grants-group"
    assert (
        "First sync of clock succeeded: 2 tools added. Its tools are visible to the groups and people given "
        f'discover in <a id="access-note" href="{page}">its access sections</a>.' in _messages(response)
    )
    assert f'<a id="access-note" href="{page}">its access sections</a>' in response.content.decode()  # a link

    response = client.post(reverse("admin:catalog_server_add"), _form(slug="clock-2"), follow=True)
    page = reverse("admin:catalog_server_change", args=[Server.objects.get(slug="clock-2").pk]) + "#group_grants-group"
    assert (
        "First sync of clock-2 succeeded: 2 tools added. Its tools are visible to nobody until you give discover "
        f'in <a id="access-note" href="{page}">its access sections</a>.' in _messages(response)
    )
    assert "discover below" not in response.content.decode()


@pytest.mark.django_db(transaction=True)
def test_a_first_sync_that_failed_says_why_what_to_do_and_links_its_run(client, operator):
    """The message the operator reads on saving says the error and the next step for it, not only a link to them."""
    client.force_login(operator)
    missing = "/nonexistent/mcp-server-weather"
    response = client.post(
        reverse("admin:catalog_server_add"), _form(slug="broken", command=missing, args="[]"), follow=True
    )
    run = SyncRun.objects.get(server__slug="broken")
    assert run.status == "failed"
    [message] = [message for message in response.context["messages"] if "First sync" in str(message)]
    link = reverse("admin:catalog_syncrun_change", args=[run.pk])
    assert str(message).startswith(f"First sync of broken failed: command not found or not executable: {missing}")
    assert "install it on every machine that runs Scout" in str(message)
    assert f'(Details: <a href="{link}">its run</a>.)' in str(message)
    assert "queued" not in str(message) and message.level_tag == "error"
    assert "install it on every machine that runs Scout" in client.get(link).content.decode()  # so does the run


@pytest.mark.django_db(transaction=True)
def test_a_first_sync_left_to_a_worker_says_queued(client, operator):
    from scoutsite import celery_app

    celery_app.conf.task_always_eager = False  # a worker runs tasks (the celery_eager fixture restores it)
    client.force_login(operator)
    response = client.post(reverse("admin:catalog_server_add"), _form(slug="clock"), follow=True)
    [run] = SyncRun.objects.filter(server__slug="clock")  # nothing ran in this process: its run is queued (mend3)
    assert run.status == "queued"
    link = reverse("admin:catalog_syncrun_change", args=[run.pk])
    assert any(
        message.startswith(f'First sync of clock queued: follow it on <a id="queued-sync-run" href="{link}">')
        for message in _messages(response)
    )


def test_a_new_server_says_never_synced(client, operator):
    Server.objects.create(slug="fresh", name="Fresh", transport="stdio", command=TIME_SERVER)
    client.force_login(operator)
    html = client.get(reverse("admin:catalog_server_changelist")).content.decode()
    row = html[html.index('<td class="field-status_badge">') :]
    row = row[: row.index("</td>")]
    assert "Never synced" in row and "Active" not in row


def test_a_server_whose_first_sync_failed_says_unavailable(client, operator, django_capture_on_commit_callbacks):
    client.force_login(operator)
    with django_capture_on_commit_callbacks(execute=True):  # the first sync runs on create, and fails
        client.post(reverse("admin:catalog_server_add"), _form(slug="broken", command="/bin/false", args="[]"))
    server = Server.objects.get(slug="broken")
    assert server.last_synced_at is None and server.status == "unavailable"
    for page in (reverse("admin:catalog_server_changelist"), reverse("admin:index")):
        html = client.get(page).content.decode()
        assert "Unavailable" in html and "Never synced" not in html, page  # it was tried: not "never"


def test_test_connection_lists_tools_and_saves_nothing(client, operator):
    client.force_login(operator)
    response = client.post(reverse("admin:catalog_server_test_connection"), _form())
    html = response.content.decode()
    assert response.status_code == 200 and "time::get_current_time" in html and "time::convert_time" in html
    assert not Server.objects.exists() and not SyncRun.objects.exists()


def test_test_connection_of_a_saved_server_names_tools_with_its_slug(client, operator):
    """A saved server's slug is read-only (not posted): the tools are still named slug::tool."""
    server = Server.objects.create(slug="clock", name="Clock", transport="stdio", command=TIME_SERVER)
    client.force_login(operator)
    form = {key: value for key, value in _form().items() if key != "slug"}
    url = reverse("admin:catalog_server_test_connection") + f"?server={server.pk}"
    html = client.post(url, form).content.decode()
    assert "clock::get_current_time" in html and "<code>::" not in html
    assert not SyncRun.objects.exists()


def test_test_connection_is_refused_without_server_permissions(client, django_user_model):
    user = django_user_model.objects.create_user(username="cur", is_staff=True)
    client.force_login(user)
    assert client.post(reverse("admin:catalog_server_test_connection"), _form()).status_code == 403


def test_archive_hides_every_tool_and_keeps_history_delete_only_without_history(
    client, operator, grant, server, tool, member
):
    from governance.principals import principal_for_user
    from governance.selectors import tools_visible_to
    from governance.services.policy import tool_policy_ensure

    policy = tool_policy_ensure(tool=tool)
    policy.accepted_hash, policy.held = tool.definition_hash, False
    policy.save()
    grant(member, server, "discover", "execute")
    assert list(tools_visible_to(principal=principal_for_user(member))) == [tool]
    client.force_login(operator)
    changelist = reverse("admin:catalog_server_changelist")
    response = client.post(changelist, {"action": "archive", "_selected_action": [server.pk]})
    assert response.status_code == 302
    server.refresh_from_db()
    assert server.status == "archived"
    assert list(tools_visible_to(principal=principal_for_user(member))) == []  # hidden from every client
    assert server.tools.filter(pk=tool.pk).exists()  # history kept
    assert client.get(reverse("admin:catalog_server_delete", args=[server.pk])).status_code == 403

    empty = Server.objects.create(slug="empty", name="Empty", transport="stdio", command=TIME_SERVER)
    response = client.post(reverse("admin:catalog_server_delete", args=[empty.pk]), {"post": "yes"})
    assert response.status_code == 302 and not Server.objects.filter(slug="empty").exists()


@pytest.mark.parametrize("target", ["server", "tool"])
def test_an_operator_reads_an_existing_grant_as_its_action(client, operator, target, superuser):
    from governance.services.permissions import permission_grant
    from tests.governance.factories import ServerFactory, ToolFactory

    server = ServerFactory(slug="clock")
    obj = server if target == "server" else ToolFactory(server=server, name="now")
    permission_grant(actor=superuser, target=obj, action="execute", holder=Group.objects.get(name=APPROVERS))
    client.force_login(operator)  # may add and remove grants, not change one: the rows are read-only
    html = client.get(reverse(f"admin:catalog_{target}_change", args=[obj.pk])).content.decode()
    assert '<p class="grant-action">execute</p>' in html
    assert "Can execute" not in html and "| execute_" not in html  # the permission's and the grant's raw names
