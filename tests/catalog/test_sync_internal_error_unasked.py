"""mend3: Scout's own failure (not the upstream's) in a sync nobody asked for, the beat's reconcile or an upstream's
``tools/list_changed``, was only in the worker's log: failing while it recorded the outcome, the run said success (or
stayed "running" until closed as a dead worker's); failing before it had a run (its lock), there was no run at all, and
a run queued for it stayed queued. Each now leaves a failed run with the reason, one line without the database's
context or a value the server is given, and the server's last error says it, as other failures do.
Real Celery worker on Redis, real stdio server, the database refusing the write that marks the server synced."""

import time
import uuid
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from catalog.cachesafe import cache_call
from catalog.choices import ServerStatus, SyncStatus
from catalog.models import Server, SyncRun
from catalog.services.runs import sync_run_queue
from catalog.services.sync import server_sync
from catalog.tasks import RESYNC_MARKER_PREFIX, beat_marker, request_resync, sync_all_servers
from scoutsite import celery_app
from tests.catalog.servers.fixtures import BIN_DIR
from tests.catalog.test_tasks import _routed_to, _worker_env, real_worker_test
from tests.celery_worker import celery_worker
from tests.db_refusal import writes_refused

REFUSED = "the disk is full"
# A value the server is given from the environment, which the database's message here repeats: never on the run.
SECRET_NAME, SECRET = "MEND3_SYNC_TOKEN", "mend3-secret-0f9c2d7e41"


@pytest.fixture
def marking_synced_refused():
    """The database refuses to mark a server synced (its ``last_synced_at``): a failure of Scout's while it records a
    sync's outcome."""
    with writes_refused("mend3_refuse", "UPDATE OF last_synced_at ON catalog_server", f"{REFUSED} {SECRET}"):
        yield


def _assert_failed_with_the_reason(run: SyncRun, server: Server) -> None:
    assert run.status == SyncStatus.FAILED, (run.status, run.error)
    assert run.error.startswith("internal error while recording the outcome: ") and REFUSED in run.error, run.error
    assert "\n" not in run.error and "CONTEXT" not in run.error and "Traceback" not in run.error, run.error
    assert SECRET not in run.error, run.error
    server.refresh_from_db()
    # It had synced: its tools stay served (Scout's failure, not the upstream's), its page says why.
    assert (server.status, server.last_error) == (ServerStatus.ACTIVE, run.error)


def _ended(worker, server: Server, source: str) -> SyncRun:
    deadline = time.monotonic() + 90
    while True:
        assert worker.poll() is None, "the worker exited"
        assert time.monotonic() < deadline, list(SyncRun.objects.filter(server=server).values("source", "status"))
        run = SyncRun.objects.filter(server=server, source=source).first()
        if run is not None and run.status not in (SyncStatus.QUEUED, SyncStatus.RUNNING):
            return run
        time.sleep(0.2)


@pytest.mark.timeout(240)
@real_worker_test
def test_scouts_failure_in_a_beat_or_list_changed_sync_leaves_a_failed_run_with_the_reason(
    marking_synced_refused, settings
):
    assert django_settings.REDIS_URL, "SCOUT_CELERY_WORKER_TESTS=1 needs REDIS_URL"
    settings.SCOUT_SYNC_DEBOUNCE = 0  # the list_changed sync at once
    command = str(BIN_DIR / "mcp-server-time")
    synced = timezone.now() - timedelta(days=1)  # it had synced before (the trigger refuses an UPDATE of it)
    server = Server.objects.create(
        slug="clock", name="Clock", transport="stdio", command=command, env_vars=[SECRET_NAME], last_synced_at=synced
    )
    period = int(time.time() // max(1, django_settings.SCOUT_SYNC_INTERVAL))
    for key in (beat_marker(server.pk, period), f"{RESYNC_MARKER_PREFIX}{server.pk}"):  # another test's, same pk
        cache_call("delete", key)
    queue = f"scout-test-{uuid.uuid4().hex[:12]}"
    celery_app.conf.task_always_eager = False
    try:
        with (
            _routed_to(queue, "catalog.tasks.sync_server"),
            celery_worker(_worker_env(**{SECRET_NAME: SECRET}), queue=queue, name=queue) as w,
        ):
            assert sync_all_servers() == 1  # the beat's reconcile
            _assert_failed_with_the_reason(_ended(w, server, "beat"), server)
            assert request_resync(server.pk)  # the upstream said tools/list_changed
            _assert_failed_with_the_reason(_ended(w, server, "list_changed"), server)
    finally:
        celery_app.conf.task_always_eager = django_settings.CELERY_TASK_ALWAYS_EAGER
    assert SyncRun.objects.filter(server=server).count() == 2


@pytest.mark.django_db(transaction=True)
def test_scouts_failure_before_a_sync_has_its_run_fails_a_run_and_the_queued_one(settings):
    """Its lock's Redis refuses the connection: no run was recorded, and a run queued for a worker stayed queued."""
    settings.CACHES = {
        "default": {
            "BACKEND": "catalog.rediscache.ScoutRedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
    server = Server.objects.create(slug="clock", name="Clock", transport="stdio", command="/bin/true")
    with pytest.raises(Exception, match="127.0.0.1:1"):
        server_sync(server_pk=server.pk, trigger="beat")
    queued = sync_run_queue(server=server, source="admin")
    with pytest.raises(Exception, match="127.0.0.1:1"):
        server_sync(server_pk=server.pk, trigger="admin", run_pk=queued.pk)
    runs = list(SyncRun.objects.filter(server=server).order_by("pk").values_list("pk", "source", "status", "error"))
    assert [run[:3] for run in runs] == [(runs[0][0], "beat", "failed"), (queued.pk, "admin", "failed")], runs
    assert all(run[3].startswith("internal error while starting: ConnectionError: ") for run in runs), runs
    server.refresh_from_db()
    assert (server.status, server.last_error) == (ServerStatus.UNAVAILABLE, runs[1][3])  # never synced
