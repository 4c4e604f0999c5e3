"""The catalog admin, driven through the Django test client as an operator would use it."""

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from catalog.choices import SYNC_FAILED_NEXT, ServerStatus, SyncKind, SyncStatus, Transport
from catalog.models import Server, SyncRun, Tool, ToolRevision
from catalog.services.imports import catalog_import_file
from catalog.signals import tools_changed
from tests.catalog.servers.fixtures import good_tool

pytestmark = pytest.mark.django_db

SCRIPT_TAG = "<script>alert('upstream')</script>"


def write_jsonl(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


def line(server: str, name: str, description: str, **extra) -> dict:
    return {"server": server, "name": name, "description": description, "inputSchema": {"type": "object"}, **extra}


@pytest.fixture
def imported(tmp_path) -> dict[str, Tool]:
    """Two imported servers; 'issues::search' later changes its description, 'issues::old' is removed."""
    first = [
        line("issues", "search", "Search issues by text.", server_title="Issue Tracker"),
        line("issues", "old", "A tool that will disappear."),
        line("wiki", "page_get", f"Read a wiki page. {SCRIPT_TAG}"),
    ]
    catalog_import_file(path=write_jsonl(tmp_path / "v1.jsonl", first))
    second = [
        line("issues", "search", "Search issues by text, label and assignee.", server_title="Issue Tracker"),
        line("wiki", "page_get", f"Read a wiki page. {SCRIPT_TAG}"),
    ]
    catalog_import_file(path=write_jsonl(tmp_path / "v2.jsonl", second))
    return {tool.tool_id: tool for tool in Tool.objects.all()}


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def test_non_staff_user_is_redirected_to_login(client, member, imported):
    client.force_login(member)
    for url in [
        reverse("admin:catalog_server_changelist"),
        reverse("admin:catalog_tool_change", args=[imported["issues::search"].pk]),
        reverse("admin:catalog_syncrun_changelist"),
    ]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("admin:login"))


def test_server_changelist_shows_status_counts_and_last_run(admin_client, imported):
    Server.objects.filter(slug="wiki").update(status=ServerStatus.DEGRADED)
    response = admin_client.get(reverse("admin:catalog_server_changelist"))
    assert response.status_code == 200
    rows = {server.slug: server for server in response.context["cl"].result_list}
    # 'old' is tombstoned and not counted; 'search' changed after acceptance, so it is held, not live
    assert (rows["issues"].live_tool_count, rows["issues"].held_tool_count) == (0, 1)
    assert rows["wiki"].live_tool_count == 1
    assert rows["issues"].last_run_status == SyncStatus.SUCCESS
    html = response.content.decode()
    assert "Issue Tracker" in html
    assert "Degraded" in html and "#ef6c00" in html  # coloured badge
    assert "?server=issues&amp;status=live" in html
    # The live count of a server whose tools no client gets says so (an archived server's row read "2 live").
    cells = [cell.split("</td>", 1)[0] for cell in html.split('<td class="field-tool_count">')[1:]]
    counts = {slug: next(cell for cell in cells if f"?server={slug}&" in cell) for slug in ("wiki", "issues")}
    assert "1 live</a> (served to no client while degraded)" in counts["wiki"], counts["wiki"]
    assert "served to no client" not in counts["issues"], counts["issues"]  # its one tool is held: 0 live


def test_server_change_page_shows_error_runs_and_sync_button(admin_client, make_server):
    server = make_server("flaky", transport=Transport.STDIO, command="does-not-exist-scout")
    server.status, server.last_error = ServerStatus.UNAVAILABLE, "FileNotFoundError: <does-not-exist-scout>"
    server.save()
    for minutes in range(12):
        SyncRun.objects.create(
            server=server,
            kind=SyncKind.SYNC,
            status=SyncStatus.FAILED,
            started_at=timezone.now() - timedelta(minutes=minutes),
            error="boom",
        )
    response = admin_client.get(reverse("admin:catalog_server_change", args=[server.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "FileNotFoundError: &lt;does-not-exist-scout&gt;" in html  # escaped, read-only
    assert 'name="last_error"' not in html
    assert "Last 10 sync runs" in html and "Failed" in html
    # A row is its cells (started, kind, status, ...), without the run's raw name printed over it again.
    assert f"sync {server.slug} " not in html and not re.search(r'<td class="original">\s*<p>', html)
    # Only the latest runs (the failure note above the form links the latest one again).
    assert len(set(re.findall(r'href="/admin/catalog/syncrun/\d+/change/"', html))) == 10
    assert reverse("admin:catalog_server_sync", args=[server.pk]) in html


def test_server_page_links_to_all_its_sync_runs(admin_client, client, django_user_model, make_server):
    """The page shows the last 10 runs; "All sync runs" opens the run list narrowed to this server (every run of
    it, no other server's), and is offered only to who may read runs (a curator gets no link to a 403)."""
    from django.contrib.auth.models import Group

    from governance.roles import CURATORS

    server, other = make_server("flaky"), make_server("steady")
    for minutes in range(12):
        SyncRun.objects.create(
            server=server, status=SyncStatus.FAILED, started_at=timezone.now() - timedelta(minutes=minutes)
        )
    SyncRun.objects.create(server=other, status=SyncStatus.SUCCESS, started_at=timezone.now())
    page = admin_client.get(reverse("admin:catalog_server_change", args=[server.pk])).content.decode()
    link = re.search(r'<a id="server-sync-runs" href="([^"]+)">All sync runs</a>', page)
    assert link is not None
    runs = admin_client.get(link.group(1).replace("&amp;", "&")).context["cl"].result_list
    assert len(runs) == 12 and {run.server_id for run in runs} == {server.pk}
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(curator)
    page = client.get(reverse("admin:catalog_server_change", args=[server.pk]))
    assert page.status_code == 200 and "server-sync-runs" not in page.content.decode()


def _messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_sync_now_action_syncs_a_real_stdio_server(admin_client, scripted):
    server, _ = scripted({"pages": [[good_tool("alpha"), good_tool("beta")]]}, slug="scripted")
    response = admin_client.post(
        reverse("admin:catalog_server_changelist"),
        {"action": "sync_now", "_selected_action": [server.pk]},
        follow=True,
    )
    assert response.status_code == 200
    run = SyncRun.objects.get(server=server)
    assert run.status == SyncStatus.SUCCESS and run.added == 2
    # Run in this request (tasks in-process, as in the demo): the message says how it ended, not "queued".
    live = f"{reverse('admin:catalog_tool_changelist')}?server=scripted&amp;status=live"
    assert _messages(response) == [f'Sync of scripted succeeded: 2 added; its tools now: <a href="{live}">2 live</a>.']
    assert set(server.tools.values_list("name", flat=True)) == {"alpha", "beta"}


def test_sync_now_that_removed_a_tool_says_removed_and_unchanged_never_added(admin_client, scripted):
    """Upstream dropped beta and kept alpha: the message said "0 added, 0 changed, 1 removed", which read as if
    something had been added and left alpha out. It now says the counts that are not zero, as the run list does."""
    server, rewrite = scripted({"pages": [[good_tool("alpha"), good_tool("beta")]]}, slug="scripted")
    sync = reverse("admin:catalog_server_sync", args=[server.pk])
    admin_client.post(sync, follow=True)
    rewrite({"pages": [[good_tool("alpha")]]})
    response = admin_client.post(sync, follow=True)
    live = f"{reverse('admin:catalog_tool_changelist')}?server=scripted&amp;status=live"
    assert _messages(response) == [
        f'Sync of scripted succeeded: 1 removed · 1 unchanged; its tools now: <a href="{live}">1 live</a>.'
    ]
    run = SyncRun.objects.filter(server=server).first()
    assert (run.added, run.changed, run.removed, run.unchanged) == (0, 0, 1, 1)


def test_sync_now_of_a_disabled_server_says_why_it_did_not_run_and_how_to_sync_it(admin_client, scripted):
    """A paused server is not synced: Sync now said "Skipped (another run holds the lock)", the status's label, which
    sent the operator looking for a stuck run. The status now says "Not run" (the run list's filter too), and the
    message, the run list and the server list say why."""
    server, _ = scripted({"pages": [[good_tool("alpha")]]}, slug="paused")
    Server.objects.filter(pk=server.pk).update(status=ServerStatus.DISABLED)
    response = admin_client.post(reverse("admin:catalog_server_sync", args=[server.pk]), follow=True)
    run = SyncRun.objects.get(server=server)
    assert run.status == SyncStatus.SKIPPED and not server.tools.exists()
    assert _messages(response) == [
        "Sync of paused did not run: server is disabled. To sync it again, set its status back to Active (Health, on "
        "its page) and save."
    ]
    for page in ("admin:catalog_syncrun_changelist", "admin:catalog_server_changelist"):
        html = admin_client.get(reverse(page)).content.decode()
        rows = html.split('id="result_list"', 1)[1].split("</table>", 1)[0]
        assert ">Not run</span>" in rows and "holds the lock" not in rows, page
    runs = admin_client.get(reverse("admin:catalog_syncrun_changelist")).content.decode()
    assert "server is disabled" in runs
    assert "?status__exact=skipped" in runs and "Not run</a>" in runs.split('id="changelist-filter"', 1)[1]


def test_the_calls_column_shows_no_breaker_for_a_server_whose_tools_are_hidden(admin_client, scripted):
    """No call reaches a server whose tools are hidden: its row said 'Unavailable' beside a green 'flowing'."""
    server, _ = scripted({"pages": [[good_tool("alpha")]]}, slug="down")
    for status, calls in ((ServerStatus.ACTIVE, "flowing"), (ServerStatus.UNAVAILABLE, "—")):
        Server.objects.filter(pk=server.pk).update(status=status)
        html = admin_client.get(reverse("admin:catalog_server_changelist")).content.decode()
        cell = html.split('<td class="field-breaker_badge">', 1)[1].split("</td>", 1)[0]
        assert (calls in cell) and (status == ServerStatus.ACTIVE or "flowing" not in cell), status
        # "flowing" says what it means for calls where the operator points at it (adminux32: read as jargon)
        assert (status != ServerStatus.ACTIVE) or 'title="Calls reach the server."' in cell


def test_sync_button_on_change_page_says_how_the_sync_ended_and_skips_imported(admin_client, scripted, imported):
    """Tasks run in-process here (CELERY_TASK_ALWAYS_EAGER, as in the demo): the sync has run when the page comes
    back, so the message says how it ended, not "queued"."""
    server, _ = scripted({"pages": [[good_tool("gamma")]]}, slug="scripted")
    response = admin_client.post(reverse("admin:catalog_server_sync", args=[server.pk]), follow=True)
    assert server.tools.get().name == "gamma"
    live = f"{reverse('admin:catalog_tool_changelist')}?server=scripted&amp;status=live"
    assert _messages(response) == [f'Sync of scripted succeeded: 1 added; its tools now: <a href="{live}">1 live</a>.']
    assert "queued" not in response.content.decode()

    broken, _ = scripted({"pages": [[good_tool("delta")]]}, slug="broken")
    Server.objects.filter(pk=broken.pk).update(command="/bin/false", args=[])
    response = admin_client.post(reverse("admin:catalog_server_sync", args=[broken.pk]), follow=True)
    run = SyncRun.objects.get(server=broken)
    assert run.status == SyncStatus.FAILED
    link = reverse("admin:catalog_syncrun_change", args=[run.pk])
    [message] = _messages(response)  # the error itself and what to do, here, with the way to the run
    assert message.startswith(f"Sync of broken failed: {escape(run.error.removeprefix('broken: '))}. Its tools are ")
    assert message.endswith(f'{escape(SYNC_FAILED_NEXT)} (Details: <a href="{link}">its run</a>.)')
    assert [message.level_tag for message in response.context["messages"]] == ["error"]

    issues = Server.objects.get(slug="issues")
    runs_before = SyncRun.objects.filter(server=issues).count()
    response = admin_client.post(reverse("admin:catalog_server_sync", args=[issues.pk]), follow=True)
    assert "Imported server issues has no live connection" in response.content.decode()
    assert SyncRun.objects.filter(server=issues).count() == runs_before
    assert admin_client.get(reverse("admin:catalog_server_sync", args=[issues.pk])).status_code == 405


def test_sync_button_left_to_a_worker_says_queued_and_where_to_follow_it(admin_client, scripted):
    from scoutsite import celery_app

    server, _ = scripted({"pages": [[good_tool("gamma")]]}, slug="scripted")
    celery_app.conf.task_always_eager = False  # a worker runs tasks (the celery_eager fixture restores it)
    response = admin_client.post(reverse("admin:catalog_server_sync", args=[server.pk]), follow=True)
    # Nothing ran in this process; its run is recorded queued at once (mend3), for the worker to carry on.
    [run] = SyncRun.objects.filter(server=server)
    assert (run.status, run.source) == (SyncStatus.QUEUED, "admin")
    [message] = _messages(response)
    assert message.startswith("Sync of scripted queued: follow it on")
    # The way to follow it: its run's page.
    link = re.search(r'<a id="queued-sync-run" href="([^"]+)">its run</a>', message)
    assert link.group(1) == reverse("admin:catalog_syncrun_change", args=[run.pk])
    chosen = {"action": "sync_now", "_selected_action": [server.pk]}  # the list's action, likewise
    response = admin_client.post(reverse("admin:catalog_server_changelist"), chosen, follow=True)
    assert _messages(response) == ["Sync queued for 1 server(s)."]
    assert list(SyncRun.objects.filter(server=server).values_list("status", flat=True)) == [SyncStatus.QUEUED] * 2


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, {"issues::search", "issues::old", "wiki::page_get"}),
        ({"server": "wiki"}, {"wiki::page_get"}),
        ({"status": "live"}, {"wiki::page_get"}),
        ({"status": "held"}, {"issues::search"}),  # changed after acceptance: no client gets it until reviewed
        ({"status": "removed"}, {"issues::old"}),
        ({"status": "disabled"}, set()),
        ({"transport": Transport.IMPORTED}, {"issues::search", "issues::old", "wiki::page_get"}),
        ({"transport": Transport.STDIO}, set()),
        ({"changed": "day"}, {"issues::search", "issues::old", "wiki::page_get"}),
        ({"q": "assignee"}, {"issues::search"}),
    ],
)
def test_tool_changelist_filters(admin_client, imported, query, expected):
    response = admin_client.get(reverse("admin:catalog_tool_changelist"), query)
    assert response.status_code == 200
    assert {tool.tool_id for tool in response.context["cl"].result_list} == expected


def test_changed_recently_filter_uses_the_latest_revision(admin_client, imported):
    week_ago = timezone.now() - timedelta(days=3)
    ToolRevision.objects.exclude(tool__tool_id="issues::search").update(created_at=week_ago)
    ToolRevision.objects.filter(tool__tool_id="issues::search").update(created_at=week_ago)
    latest = imported["issues::search"].revisions.order_by("-id").first()
    ToolRevision.objects.filter(pk=latest.pk).update(created_at=timezone.now())

    day = admin_client.get(reverse("admin:catalog_tool_changelist"), {"changed": "day"})
    assert {tool.tool_id for tool in day.context["cl"].result_list} == {"issues::search"}
    week = admin_client.get(reverse("admin:catalog_tool_changelist"), {"changed": "week"})
    assert len(week.context["cl"].result_list) == 3


def test_tool_search_finds_aliases(admin_client, imported):
    imported["wiki::page_get"].aliases.create(text="knowledge base reader")
    response = admin_client.get(reverse("admin:catalog_tool_changelist"), {"q": "knowledge base"})
    assert [tool.tool_id for tool in response.context["cl"].result_list] == ["wiki::page_get"]


def test_tool_change_page_shows_upstream_read_only_and_curation_inlines(admin_client, imported):
    tool = imported["wiki::page_get"]
    response = admin_client.get(reverse("admin:catalog_tool_change", args=[tool.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert SCRIPT_TAG not in html  # upstream text is escaped
    assert "&lt;script&gt;alert(&#x27;upstream&#x27;)&lt;/script&gt;" in html
    assert "&quot;type&quot;: &quot;object&quot;" in html  # pretty-printed schema
    for inline_prefix in ["aliases", "keywords", "examples", "negative_examples"]:
        assert f'name="{inline_prefix}-TOTAL_FORMS"' in html
    for editable in ["title", "purpose", "entity_types", "operation_verbs", "related_tools", "enabled"]:
        assert f'name="{editable}"' in html
    for upstream in ["description", "input_schema", "definition_hash", "tool_id", "name"]:
        assert f'name="{upstream}"' not in html


def test_tool_page_folds_the_long_upstream_definition_and_keeps_the_description_in_view(admin_client, imported):
    """A curator opens a tool to change its curation: the description stays at the top, the schemas, annotations,
    hash and revisions are one click away (folded), and Curation follows the description instead of two schemas."""
    tool = imported["wiki::page_get"]
    html = admin_client.get(reverse("admin:catalog_tool_change", args=[tool.pk])).content.decode()
    description, folded = html.index("Read a wiki page."), html.index("<details>")
    schema, curation = html.index("&quot;type&quot;: &quot;object&quot;"), html.index('name="purpose"')
    assert description < folded < schema < html.index("</details>") < curation
    assert "Upstream definition: schemas, annotations, hash, revisions" in html


def _inline_management(prefix: str, rows: list[str]) -> dict[str, str]:
    data = {
        f"{prefix}-TOTAL_FORMS": str(len(rows)),
        f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
    }
    for index, text in enumerate(rows):
        data[f"{prefix}-{index}-text"] = text
    return data


def test_curation_saved_through_the_admin_is_stored_and_upstream_is_not_writable(
    admin_client, imported, django_capture_on_commit_callbacks
):
    tool, related = imported["issues::search"], imported["wiki::page_get"]
    upstream_before = (tool.description, tool.input_schema, tool.definition_hash, tool.name)
    received: list[list[int]] = []

    def receiver(sender, tool_pks, **kwargs):
        received.append(tool_pks)

    data = {
        "title": "Find issues",
        "purpose": "Look up tickets by text, label or assignee.",
        "entity_types": "issue, ticket, issue",
        "operation_verbs": "search, list",
        "related_tools": [str(related.pk)],
        "enabled": "on",
        # Attempts to write upstream fields through the form must be ignored.
        "description": "HACKED",
        "input_schema": '{"type": "object", "properties": {"x": {}}}',
        "definition_hash": "0" * 64,
        "name": "renamed",
        **_inline_management("aliases", ["ticket finder"]),
        **_inline_management("keywords", ["jira", "bug"]),
        **_inline_management("examples", ["show my open bugs"]),
        **_inline_management("negative_examples", ["create a new issue"]),
        **_inline_management("group_grants", []),  # the access rows (governance) on the same form
        **_inline_management("user_grants", []),
    }
    tools_changed.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = admin_client.post(reverse("admin:catalog_tool_change", args=[tool.pk]), data)
    finally:
        tools_changed.disconnect(receiver)
    assert response.status_code == 302, response.content.decode()[:2000]

    tool.refresh_from_db()
    assert tool.title == "Find issues"
    assert tool.purpose.startswith("Look up tickets")
    assert tool.entity_types == ["issue", "ticket"]
    assert tool.operation_verbs == ["search", "list"]
    assert list(tool.related_tools.all()) == [related]
    assert [a.text for a in tool.aliases.all()] == ["ticket finder"]
    assert [k.text for k in tool.keywords.all()] == ["jira", "bug"]
    assert [e.text for e in tool.examples.all()] == ["show my open bugs"]
    assert [n.text for n in tool.negative_examples.all()] == ["create a new issue"]
    assert tool.curated_at is not None
    assert (tool.description, tool.input_schema, tool.definition_hash, tool.name) == upstream_before
    assert received == [[tool.pk]]


def test_saving_without_changes_does_not_mark_curated(admin_client, imported, django_capture_on_commit_callbacks):
    tool = imported["wiki::page_get"]
    data = {
        "title": "",
        "purpose": "",
        "entity_types": "",
        "operation_verbs": "",
        "enabled": "on",
        **{
            k: v
            for p in ["aliases", "keywords", "examples", "negative_examples", "group_grants", "user_grants"]
            for k, v in _inline_management(p, []).items()
        },
    }
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = admin_client.post(reverse("admin:catalog_tool_change", args=[tool.pk]), data)
    assert response.status_code == 302
    tool.refresh_from_db()
    assert tool.curated_at is None
    assert callbacks == []


def test_tools_cannot_be_added_or_deleted_in_the_admin(admin_client, imported):
    assert admin_client.get(reverse("admin:catalog_tool_add")).status_code == 403
    tool = imported["issues::old"]
    assert admin_client.post(reverse("admin:catalog_tool_delete", args=[tool.pk]), {"post": "yes"}).status_code == 403
    assert Tool.objects.filter(pk=tool.pk).exists()


def test_sync_run_list_is_read_only_with_counts_and_filters(admin_client, imported, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n" + json.dumps(line("wiki", "page_get", f"Read a wiki page. {SCRIPT_TAG}")) + "\n")
    catalog_import_file(path=bad)

    response = admin_client.get(reverse("admin:catalog_syncrun_changelist"))
    assert response.status_code == 200
    assert "Add sync run" not in response.content.decode()
    assert len(response.context["cl"].result_list) == SyncRun.objects.count() == 6

    partial = admin_client.get(reverse("admin:catalog_syncrun_changelist"), {"status__exact": SyncStatus.PARTIAL})
    assert [run.server for run in partial.context["cl"].result_list] == [None]
    by_server = admin_client.get(reverse("admin:catalog_syncrun_changelist"), {"server": "issues"})
    assert [(r.added, r.changed, r.removed) for r in by_server.context["cl"].result_list] == [(0, 1, 1), (2, 0, 0)]
    kind = admin_client.get(reverse("admin:catalog_syncrun_changelist"), {"kind__exact": SyncKind.SYNC})
    assert list(kind.context["cl"].result_list) == []

    file_run = SyncRun.objects.get(server__isnull=True)
    detail = admin_client.get(reverse("admin:catalog_syncrun_change", args=[file_run.pk])).content.decode()
    assert "invalid JSON" in detail and "Succeeded with rejected tools" in detail
    assert 'name="error"' not in detail and 'name="_save"' not in detail
    assert admin_client.get(reverse("admin:catalog_syncrun_add")).status_code == 403
    delete = admin_client.post(reverse("admin:catalog_syncrun_delete", args=[file_run.pk]), {"post": "yes"})
    assert delete.status_code == 403
    assert SyncRun.objects.filter(pk=file_run.pk).exists()


def test_revision_page_shows_an_escaped_diff_against_the_previous_revision(admin_client, imported, tmp_path):
    tool = imported["wiki::page_get"]
    catalog_import_file(
        path=write_jsonl(tmp_path / "v3.jsonl", [line("wiki", "page_get", f"Read or render a wiki page. {SCRIPT_TAG}")])
    )
    latest = tool.revisions.order_by("-created_at", "-id").first()
    response = admin_client.get(reverse("admin:catalog_toolrevision_change", args=[latest.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert SCRIPT_TAG not in html
    assert "-  &quot;description&quot;: &quot;Read a wiki page. &lt;script&gt;" in html
    assert "+  &quot;description&quot;: &quot;Read or render a wiki page. &lt;script&gt;" in html
    tool_page = admin_client.get(reverse("admin:catalog_tool_change", args=[tool.pk])).content.decode()
    assert f"{latest.definition_hash[:12]}</a> (current)" in tool_page
    first = tool.revisions.order_by("created_at", "id").first()
    first_html = admin_client.get(reverse("admin:catalog_toolrevision_change", args=[first.pk])).content.decode()
    assert "first sight" in first_html

    listing = admin_client.get(reverse("admin:catalog_toolrevision_changelist"), {"server": "wiki"})
    assert {r.tool.tool_id for r in listing.context["cl"].result_list} == {"wiki::page_get"}
    assert admin_client.get(reverse("admin:catalog_toolrevision_add")).status_code == 403


def test_a_held_tool_says_so_with_a_link_to_its_review_everywhere(admin_client, imported):
    from governance.models import ToolReview

    held = imported["issues::search"]  # its description changed after it was accepted
    review = ToolReview.objects.get(tool=held, status="pending")
    review_url = reverse("admin:governance_toolreview_change", args=[review.pk])
    page = admin_client.get(reverse("admin:catalog_tool_change", args=[held.pk])).content.decode()
    assert "held — hidden from clients" in page and review_url in page
    listing = admin_client.get(reverse("admin:catalog_tool_changelist")).content.decode()
    assert listing.count("held — hidden from clients") == 1 and review_url in listing
    servers = admin_client.get(reverse("admin:catalog_server_changelist")).content.decode()
    assert "0 live</a>" in servers and "<strong>1 held</strong>" in servers
    review_page = admin_client.get(review_url).content.decode()
    assert 'style="background:#e6ffec;color:#1a7f37">+' in review_page  # the diff is coloured
    assert 'name="review_reason"' in review_page


def test_curation_fields_explain_themselves_and_saving_says_searchable(admin_client, imported):
    tool = imported["wiki::page_get"]
    url = reverse("admin:catalog_tool_change", args=[tool.pk])
    page = admin_client.get(url).content.decode()
    assert "What agents read" in page and "pushed down the ranking" in page
    assert "Negative queries" in page and "Negative querys" not in page and "NEGATIVE QUERYS" not in page
    data = {"title": "", "purpose": "Read one page of the team wiki", "entity_types": "", "operation_verbs": ""}
    data["enabled"] = "on"
    for prefix in ("aliases", "keywords", "examples", "negative_examples"):
        data.update({f"{prefix}-TOTAL_FORMS": "1", f"{prefix}-INITIAL_FORMS": "0", f"{prefix}-0-text": ""})
    for prefix in ("group_grants", "user_grants"):  # the access rows (governance) on the same form
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    data["examples-0-text"] = "open the onboarding page"
    response = admin_client.post(url, data, follow=True)
    messages = [str(m) for m in response.context["messages"]]
    # ... and where to check it: the page that ranks the tool's example requests as an agent's search would.
    preview = reverse("search_preview_tool", args=[tool.pk])
    assert messages == [
        "Saved wiki::page_get: searchable with these changes now. "
        f'<a id="saved-preview" href="{preview}">See where its example requests rank now</a>.'
    ]
    assert tool.examples.filter(text="open the onboarding page").exists()


def test_a_phrase_listed_twice_is_refused_and_the_form_kept(admin_client, imported):
    tool = imported["wiki::page_get"]
    tool.examples.create(text="open the onboarding page")
    url = reverse("admin:catalog_tool_change", args=[tool.pk])
    page = admin_client.get(url).content.decode()
    assert page.count("open the onboarding page") == 1  # in its box only, not repeated as a label above it
    assert '<p class="help scout-inline-help">A request a user would make that this tool answers' in page
    data = {"title": "", "purpose": "Read one page of the team wiki", "entity_types": "", "operation_verbs": ""}
    data["enabled"] = "on"
    for prefix in ("aliases", "keywords", "negative_examples", "group_grants", "user_grants"):
        data.update(_inline_management(prefix, []))
    data.update(_inline_management("examples", ["open the onboarding page", "Open  the onboarding PAGE"]))
    data.update({"examples-INITIAL_FORMS": "1", "examples-0-id": str(tool.examples.get().pk)})
    data["examples-0-tool"] = data["examples-1-tool"] = str(tool.pk)
    response = admin_client.post(url, data)
    html = response.content.decode()
    assert response.status_code == 200 and "“Open  the onboarding PAGE” is already listed above." in html
    tool.refresh_from_db()
    assert tool.examples.count() == 1 and not tool.purpose  # nothing saved
    assert "Read one page of the team wiki" in html  # what was typed is still in the form


def test_a_tool_whose_definition_was_never_accepted_counts_as_held(admin_client, imported):
    from governance.models import ToolPolicy

    # Not flagged, but its current definition is not the accepted one: no client gets it (fail closed).
    ToolPolicy.objects.filter(tool=imported["wiki::page_get"]).update(held=False, accepted_hash="")
    response = admin_client.get(reverse("admin:catalog_tool_changelist"), {"status": "held"})
    assert {tool.tool_id for tool in response.context["cl"].result_list} == {"issues::search", "wiki::page_get"}
