"""mend3: ``POST /api/v1/servers/<slug>/sync/`` with a worker serving (REDIS_URL) answered 202 with ``sync_run: null``:
the caller had nothing to follow. Its run is now recorded queued at once (its id and url in the answer, on the server's
admin page and in the run list), and the worker carries on that same run to its end: no second run.
Real HTTP with an API token, a real Celery worker on Redis, a real stdio server."""

import sys
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.urls import reverse

from catalog.choices import SyncStatus
from catalog.models import Server, SyncRun
from scoutsite import celery_app
from tests.api.conftest import give_perms, make_token
from tests.catalog.test_tasks import _routed_to, _worker_env, real_worker_test
from tests.celery_worker import celery_worker


@pytest.mark.timeout(180)
@real_worker_test
def test_a_sync_asked_over_rest_is_queued_at_once_and_the_worker_carries_that_run_on(api, owner, admin_client):
    assert django_settings.REDIS_URL, "SCOUT_CELERY_WORKER_TESTS=1 needs REDIS_URL"
    give_perms(owner, "catalog.view_server", "catalog.change_server", "catalog.view_syncrun")
    token = make_token(owner, ["api"])
    command = str(Path(sys.executable).parent / "mcp-server-time")
    server = Server.objects.create(
        slug="clock", name="Clock", transport="stdio", command=command, args=["--local-timezone", "UTC"]
    )
    queue = f"scout-test-{uuid.uuid4().hex[:12]}"  # a private queue: no other worker on this Redis takes it
    celery_app.conf.task_always_eager = False
    try:
        with _routed_to(queue, "catalog.tasks.sync_server"):
            response = api.post("servers/clock/sync/", token=token)  # no worker yet: it stays queued
            assert response.status_code == 202, response.text
            run = response.json()["sync_run"]
            assert run is not None and run["status"] == "queued" and run["server"] == "clock", run
            assert run["url"].endswith(f"/api/v1/sync-runs/{run['id']}/") and run["finished_at"] is None
            assert api.get(run["url"].split("/api/v1/", 1)[1], token=token).json()["status"] == "queued"
            page = admin_client.get(reverse("admin:catalog_server_change", args=[server.pk]))
            (inline,) = [f for f in page.context["inline_admin_formsets"] if f.formset.model is SyncRun]
            assert [(form.original.pk, form.original.status) for form in inline] == [(run["id"], "queued")]
            runs = admin_client.get(reverse("admin:catalog_syncrun_changelist"))
            assert [(row.pk, row.status) for row in runs.context["cl"].result_list] == [(run["id"], "queued")]
            assert ">Queued</span>" in runs.content.decode()
            run_page = admin_client.get(reverse("admin:catalog_syncrun_change", args=[run["id"]])).content.decode()
            assert "queued: waiting for a worker" in run_page and "data-scout-progress" in run_page

            with celery_worker(_worker_env(), queue=queue, name=queue) as worker:
                deadline = time.monotonic() + 90
                while (shown := api.get(f"sync-runs/{run['id']}/", token=token).json())["status"] in (
                    "queued",
                    "running",
                ):
                    assert worker.poll() is None, "the worker exited"
                    assert time.monotonic() < deadline, shown
                    time.sleep(0.3)
    finally:
        celery_app.conf.task_always_eager = django_settings.CELERY_TASK_ALWAYS_EAGER
    assert (shown["status"], shown["added"], shown["error"]) == ("success", 2, ""), shown
    assert list(SyncRun.objects.filter(server=server).values_list("pk", "source", "started_by")) == [
        (run["id"], response.json()["trigger"], owner.pk)
    ]  # the same run, theirs; no second one
    assert SyncRun.objects.get(pk=run["id"]).status == SyncStatus.SUCCESS
