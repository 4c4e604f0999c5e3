"""mend3: a GET of the pages and API that show sync runs wrote: each closed the runs of dead syncs first
(``sync_runs_current``), an UPDATE of runs and servers on every read (replicas, row locks, audit noise). The beat closes
them now (``close_dead_sync_runs``); every read shows the runs as they are stored, and all of them agree."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from catalog.choices import SyncStatus
from catalog.models import Server, SyncRun
from catalog.services.sync import DIED
from catalog.tasks import close_dead_sync_runs
from tests.api.conftest import make_token

pytestmark = pytest.mark.django_db

WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)


def _reads(server: Server, run: SyncRun, token: str) -> dict[str, tuple[str, dict]]:
    api = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    return {
        "home": (reverse("admin:index"), {}),
        "dashboard": ("/admin/dashboard/?window=1h", {}),
        "run list": (reverse("admin:catalog_syncrun_changelist"), {}),
        "run page": (reverse("admin:catalog_syncrun_change", args=[run.pk]), {}),
        "run progress": (reverse("admin:catalog_syncrun_progress", args=[run.pk]), {}),
        "server list": (reverse("admin:catalog_server_changelist"), {}),
        "server page": (reverse("admin:catalog_server_change", args=[server.pk]), {}),
        "API runs": ("/api/v1/sync-runs/", api),
        "API run": (f"/api/v1/sync-runs/{run.pk}/", api),
    }


def test_reading_sync_runs_writes_nothing_and_the_beat_closes_a_dead_one(admin_client, superuser):
    server = Server.objects.create(slug="dead", name="Dead", transport="stdio", command="/bin/true")
    run = SyncRun.objects.create(server=server, status=SyncStatus.RUNNING, started_at=timezone.now())  # no lock held
    token = make_token(superuser, ["api"])
    reads = _reads(server, run, token)
    for name, (url, headers) in reads.items():
        admin_client.get(url, **headers)  # once first: a session or a token's first use may be recorded
        SyncRun.objects.filter(pk=run.pk).update(status=SyncStatus.RUNNING, error="", finished_at=None)
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get(url, **headers)
        assert response.status_code == 200, (name, response.status_code)
        writes = [query["sql"] for query in queries.captured_queries if WRITE.match(query["sql"])]
        assert writes == [], (name, writes)
    run.refresh_from_db()
    assert run.status == SyncStatus.RUNNING  # read, never closed by a read

    assert close_dead_sync_runs() == 1  # the beat's
    run.refresh_from_db()
    assert (run.status, run.error) == (SyncStatus.FAILED, DIED)
    assert admin_client.get(reads["API run"][0], **reads["API run"][1]).json()["status"] == "failed"
    assert admin_client.get(reads["run progress"][0]).json()["status"] == "failed"
