"""The admin's progress endpoint for sync runs: the stage and an estimate while running, the duration
or the error after, and who may read it."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from catalog.choices import SyncKind, SyncStatus
from catalog.locks import named_lock
from catalog.models import Server, SyncRun
from catalog.services.sync import server_sync_lock_name
from catalog.tasks import close_dead_sync_runs

pytestmark = pytest.mark.django_db


def _url(run: SyncRun) -> str:
    return reverse("admin:catalog_syncrun_progress", args=[run.pk])


def _run(server: Server, status: str, *, started_ago: float, took: float | None = None, **fields) -> SyncRun:
    started = timezone.now() - timedelta(seconds=started_ago)
    finished = started + timedelta(seconds=took) if took is not None else None
    return SyncRun.objects.create(
        server=server, kind=SyncKind.SYNC, status=status, started_at=started, finished_at=finished, **fields
    )


def _under_way(server: Server):
    """The server's sync lock held, as a live sync holds it (a running run whose lock is free died with its worker)."""
    return named_lock(server_sync_lock_name(server.pk), ttl=60)


def test_running_sync_shows_its_stage_and_an_estimate_from_the_last_good_run(admin_client):
    server = Server.objects.create(slug="slow", name="Slow")
    _run(server, SyncStatus.SUCCESS, started_ago=600, took=40, progress_done=5, progress_total=5)
    listing = _run(server, SyncStatus.RUNNING, started_ago=10)
    with _under_way(server):
        _running_sync_shows_its_stage_and_an_estimate(admin_client, listing)


def test_a_running_sync_whose_lock_is_free_shows_failed_once_the_beat_closes_it(admin_client):
    """opsux10: no live sync holds the server's lock, so the run died with its process (a killed worker). The beat
    closes it (mend3: its progress poll, a GET, no longer writes)."""
    dead = _run(Server.objects.create(slug="s", name="S"), SyncStatus.RUNNING, started_ago=10)
    assert admin_client.get(_url(dead)).json()["status"] == "running"
    assert close_dead_sync_runs() == 1
    snapshot = admin_client.get(_url(dead)).json()
    assert (snapshot["running"], snapshot["status"]) == (False, "failed"), snapshot
    assert snapshot["error"] == "interrupted: the process running this sync stopped"


def test_the_server_list_and_the_sync_run_list_show_a_running_sync_whose_lock_is_free_failed(admin_client):
    """adminux30: a killed worker's run is failed in the operator's lists once the beat has closed it through
    opsux10's rule (mend3: not the lists themselves); a run whose server's lock is held (a live sync) stays running."""
    dead = _run(Server.objects.create(slug="dead", name="Dead"), SyncStatus.RUNNING, started_ago=10)
    live = _run(Server.objects.create(slug="live", name="Live"), SyncStatus.RUNNING, started_ago=10)

    def server_list() -> dict[str, str]:
        page = admin_client.get(reverse("admin:catalog_server_changelist"))
        return {server.slug: server.last_run_status for server in page.context["cl"].result_list}

    def run_list() -> dict[str, str]:
        page = admin_client.get(reverse("admin:catalog_syncrun_changelist"))
        return {run.server.slug: run.status for run in page.context["cl"].result_list}

    with _under_way(live.server):
        assert close_dead_sync_runs() == 1
        assert server_list() == {"dead": SyncStatus.FAILED, "live": SyncStatus.RUNNING}
        assert run_list() == {"dead": SyncStatus.FAILED, "live": SyncStatus.RUNNING}
    dead.refresh_from_db()
    assert dead.error == "interrupted: the process running this sync stopped"


def test_a_server_whose_last_sync_died_with_its_worker_is_no_longer_never_synced(admin_client):
    """opsux12: closing a killed worker's run left its server's health alone: the operator saw a failed run in the
    lists and "Never synced" on the server. A server never synced reads as after a failed first sync (Unavailable,
    the interruption its last error); one that had synced keeps its status (the dying was Scout's, not the
    upstream's: its tools stay served) and its page says its last sync was interrupted."""
    first = Server.objects.create(slug="first", name="First", transport="stdio")
    worked = Server.objects.create(slug="worked", name="Worked", transport="stdio", last_synced_at=timezone.now())
    _run(worked, SyncStatus.SUCCESS, started_ago=600, took=5)
    for server in (first, worked):
        _run(server, SyncStatus.RUNNING, started_ago=10)

    assert close_dead_sync_runs() == 2
    page = admin_client.get(reverse("admin:catalog_server_changelist")).content.decode()
    assert "Never synced" not in page and 'white-space:nowrap">Unavailable</span>' in page
    first.refresh_from_db(), worked.refresh_from_db()
    assert (first.status, first.last_error) == ("unavailable", "interrupted: the process running this sync stopped")
    assert (worked.status, worked.last_error) == ("active", "interrupted: the process running this sync stopped")
    home = admin_client.get(reverse("admin:index")).content.decode()
    assert "Never synced" not in home
    worked_page = admin_client.get(reverse("admin:catalog_server_change", args=[worked.pk])).content.decode()
    assert "interrupted: the process running this sync stopped" in worked_page


def test_a_runs_page_says_who_started_it(admin_client, django_user_model):
    """opsux12: ``started_by`` (opsux11) was stored and listed in the person's own recent actions, but the run's page
    did not say who asked for the sync; a run nobody asked for (the schedule, a command) says no one."""
    person = django_user_model.objects.create_user(username="ops-ann", first_name="Ann", last_name="Lee")
    server = Server.objects.create(slug="s", name="S")
    asked = _run(server, SyncStatus.SUCCESS, started_ago=60, took=1, started_by=person, source="admin")
    scheduled = _run(server, SyncStatus.SUCCESS, started_ago=30, took=1, source="beat")

    def started_by(run: SyncRun) -> str:
        page = admin_client.get(reverse("admin:catalog_syncrun_change", args=[run.pk])).content.decode()
        return re.search(r"<label>Started by:</label>\s*<div class=\"readonly\">([^<]*)</div>", page).group(1)

    assert started_by(asked) == "Ann Lee"
    assert started_by(scheduled) == "—"


def _running_sync_shows_its_stage_and_an_estimate(admin_client, listing: SyncRun) -> None:
    snapshot = admin_client.get(_url(listing)).json()
    assert (snapshot["running"], snapshot["stage"], snapshot["total"]) == (True, "listing tools upstream", 0)
    assert 25 <= snapshot["eta_seconds"] <= 30  # the last run took 40 s, this one has run ~10 s

    SyncRun.objects.filter(pk=listing.pk).update(progress_total=5)
    snapshot = admin_client.get(_url(listing)).json()
    assert (snapshot["stage"], snapshot["done"], snapshot["total"]) == ("applying tools", 0, 5)

    page = admin_client.get(reverse("admin:catalog_syncrun_change", args=[listing.pk])).content.decode()
    assert f'data-scout-progress="{_url(listing)}"' in page and "applying tools: 0 of 5 tools" in page


def test_finished_run_shows_its_duration_and_a_failed_one_its_error(admin_client):
    server = Server.objects.create(slug="s", name="S")
    done = _run(server, SyncStatus.SUCCESS, started_ago=60, took=2.5, progress_done=4, progress_total=4)
    snapshot = admin_client.get(_url(done)).json()
    assert (snapshot["running"], snapshot["duration_seconds"], snapshot["eta_seconds"]) == (False, 2.5, None)
    # Its page says how long it took once, in the duration row: the progress line ("success in 2 s") is for a run
    # under way, and repeated the duration rounded otherwise (adminux33).
    page = admin_client.get(reverse("admin:catalog_syncrun_change", args=[done.pk])).content.decode()
    assert "2.50s" in page and "scout-progress" not in page and "success in" not in page

    failed = _run(server, SyncStatus.FAILED, started_ago=60, took=3, error="connection refused")
    snapshot = admin_client.get(_url(failed)).json()
    assert (snapshot["status"], snapshot["error"]) == ("failed", "connection refused")


def test_needs_staff_login_and_view_permission(client, django_user_model):
    server = Server.objects.create(slug="secret-server", name="Secret")
    run = _run(server, SyncStatus.RUNNING, started_ago=1)
    url = _url(run)
    assert client.get(url).status_code == 302

    staff = django_user_model.objects.create_user(username="staff", is_staff=True)
    client.force_login(staff)
    assert client.get(url).status_code == 403

    staff.user_permissions.add(Permission.objects.get(codename="view_syncrun"))
    client.force_login(staff)
    with _under_way(server):
        response = client.get(url)
    assert response.status_code == 200 and response.json()["running"] is True
    assert "secret-server" not in response.content.decode()  # counts and times only


def test_the_home_the_dashboard_and_a_runs_page_agree_with_the_lists_on_a_killed_workers_run(admin_client):
    """opsux11: the operator's home counted a killed worker's run as no failure and the dashboard as running while the
    server and run lists showed it failed; the beat closes it (mend3: no page writes), and every page reads the same
    runs. A live sync (its lock held) is running everywhere."""
    dead = _run(Server.objects.create(slug="dead", name="Dead"), SyncStatus.RUNNING, started_ago=10)
    live = _run(Server.objects.create(slug="live", name="Live"), SyncStatus.RUNNING, started_ago=10)

    with _under_way(live.server):
        assert close_dead_sync_runs() == 1
        home = admin_client.get(reverse("admin:index"))
        assert home.context["operator_panel"]["failure_count"] == 1
        assert [run.server.slug for run in home.context["operator_panel"]["failures"]] == ["dead"]
        figures = admin_client.get("/admin/dashboard/?window=1h").context["figures"]
        assert figures["syncs"] == {SyncStatus.FAILED: 1, SyncStatus.RUNNING: 1}
        page = admin_client.get(reverse("admin:catalog_syncrun_change", args=[dead.pk]))
        assert page.context["original"].status == SyncStatus.FAILED
        server_page = admin_client.get(reverse("admin:catalog_server_change", args=[dead.server.pk]))
        (runs,) = [f for f in server_page.context["inline_admin_formsets"] if f.formset.model is SyncRun]
        assert [form.original.status for form in runs] == [SyncStatus.FAILED]
        live_page = admin_client.get(reverse("admin:catalog_syncrun_change", args=[live.pk]))
        assert live_page.context["original"].status == SyncStatus.RUNNING
