"""The admin's progress endpoint for index generations: a build's progress while it runs (paused by a
test hook in another thread, polled meanwhile), its final state after, and who may read it."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from search import encoder as encoder_module
from search.choices import GenerationKind, GenerationStatus
from search.models import IndexGeneration
from search.services import index_rebuild

SNAPSHOT_KEYS = {
    "running",
    "status",
    "stage",
    "unit",
    "done",
    "total",
    "percent",
    "elapsed_seconds",
    "eta_seconds",
    "duration_seconds",
    "error",
}


def _url(generation: IndexGeneration) -> str:
    return reverse("admin:search_indexgeneration_progress", args=[generation.pk])


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.django_db(transaction=True)
def test_reports_a_running_build_then_its_end(small_catalog, admin_client, encoder, monkeypatch):
    monkeypatch.setattr(encoder_module, "PROGRESS_CHUNK", 8)  # several reports for a small catalog
    paused, resume, seen = threading.Event(), threading.Event(), []

    def hold_mid_build(done: int, total: int) -> None:
        if 0 < done < total and not paused.is_set():
            seen.append((done, total))
            paused.set()
            resume.wait(120)

    def build() -> None:
        try:
            index_rebuild(progress=hold_mid_build)
        finally:
            resume.set()
            paused.set()
            connection.close()

    thread = threading.Thread(target=build)
    thread.start()
    try:
        assert paused.wait(120) and seen, "the build never reported progress"
        generation = IndexGeneration.objects.get()
        running = admin_client.get(_url(generation)).json()
        page = admin_client.get(reverse("admin:search_indexgeneration_change", args=[generation.pk])).content.decode()
    finally:
        resume.set()
        thread.join(120)

    done, total = seen[0]
    assert running["running"] is True and running["status"] == GenerationStatus.BUILDING
    assert (running["stage"], running["unit"], running["done"], running["total"]) == ("encoding", "texts", done, total)
    assert running["percent"] == round(100 * done / total, 1)
    assert running["eta_seconds"] is not None and running["duration_seconds"] is None
    assert f'data-scout-progress="{_url(generation)}"' in page and "scout/progress.js" in page

    finished = admin_client.get(_url(generation)).json()
    assert finished["running"] is False and finished["status"] == GenerationStatus.READY
    assert finished["done"] == finished["total"] == total
    assert finished["duration_seconds"] is not None and finished["eta_seconds"] is None
    assert set(finished) == SNAPSHOT_KEYS


@pytest.mark.django_db
def test_failed_generation_shows_its_error(admin_client):
    started = timezone.now() - timedelta(seconds=30)
    generation = IndexGeneration.objects.create(kind=GenerationKind.FULL, status=GenerationStatus.FAILED)
    IndexGeneration.objects.filter(pk=generation.pk).update(
        started_at=started, finished_at=started + timedelta(seconds=12), error="disk full"
    )
    snapshot = admin_client.get(_url(generation)).json()
    assert (snapshot["status"], snapshot["error"], snapshot["running"]) == ("failed", "disk full", False)
    assert snapshot["elapsed_seconds"] == 12.0
    page = admin_client.get(reverse("admin:search_indexgeneration_change", args=[generation.pk]))
    assert "failed after 12.0 s: disk full" in page.content.decode()


@pytest.mark.django_db
def test_needs_staff_login_and_view_permission(client, django_user_model, small_catalog):
    generation = IndexGeneration.objects.create(kind=GenerationKind.FULL, progress_done=3, progress_total=9)
    url = _url(generation)

    anonymous = client.get(url)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("admin:login"))

    staff = django_user_model.objects.create_user(username="staff", is_staff=True)
    client.force_login(staff)
    assert client.get(url).status_code == 403

    member = django_user_model.objects.create_user(username="member-user", is_staff=False)
    member.user_permissions.add(Permission.objects.get(codename="view_indexgeneration"))
    client.force_login(member)
    assert client.get(url).status_code == 302  # not staff: the admin login, whatever the permission

    staff.user_permissions.add(Permission.objects.get(codename="view_indexgeneration"))
    client.force_login(staff)
    response = client.get(url)
    assert response.status_code == 200
    assert set(response.json()) == SNAPSHOT_KEYS
    assert (response.json()["done"], response.json()["total"]) == (3, 9)
    body = response.content.decode()
    assert not any(name in body for name in small_catalog)  # counts only: no tool is named
    assert client.get(reverse("admin:search_indexgeneration_progress", args=[generation.pk + 99])).status_code == 404


@pytest.mark.django_db
def test_install_wide_pages_are_closed_to_one_tenants_curator(client, django_user_model, small_catalog):
    """Z12: an index generation counts and names tools of every tenant, and so may its events. Once the install
    has tenants, a tenant's curator (who holds the view permissions) reads none of them: not the lists, not a
    generation's page, not its progress, not the admin index's entry. A superuser still does."""
    from django.contrib.auth.models import Group

    from governance.roles import CURATORS
    from search.models import SearchEvent
    from tests.governance.factories import tenant_with

    generation = IndexGeneration.objects.create(kind=GenerationKind.FULL, tool_count=4321, progress_total=9)
    SearchEvent.objects.create(kind="reindex_failed", detail="an install-wide event")
    curator = django_user_model.objects.create_user(username="cat-a", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    pages = [
        reverse("admin:search_indexgeneration_changelist"),
        reverse("admin:search_indexgeneration_change", args=[generation.pk]),
        _url(generation),
        reverse("admin:search_searchevent_changelist"),
    ]
    client.force_login(curator)
    assert [client.get(page).status_code for page in pages] == [200, 200, 200, 200]  # no tenants: one install

    tenant_with("tenant-a", curator)
    assert [client.get(page).status_code for page in pages] == [403, 403, 403, 403]
    index = client.get(reverse("admin:index")).content.decode()
    assert "indexgeneration" not in index and "searchevent" not in index
    assert "querylogentry" in index  # the curator's own pages stay

    superuser = django_user_model.objects.create_superuser(username="root", email="root@example.com", password="x")
    client.force_login(superuser)
    assert [client.get(page).status_code for page in pages] == [200, 200, 200, 200]
