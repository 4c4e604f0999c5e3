"""Catalog Celery tasks: reconcile, debounced re-sync, and a real worker on Redis."""

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings as django_settings

from catalog.cachesafe import shared_cache
from catalog.choices import ServerStatus, SyncStatus, Transport
from catalog.models import SyncRun, Tool
from catalog.tasks import beat_marker, close_dead_sync_runs, request_resync, sync_all_servers, sync_server
from scoutsite import celery_app
from search.selectors import tool_docs_load
from tests.catalog.servers.fixtures import BIN_DIR, good_tool
from tests.celery_results import task_result
from tests.celery_worker import WORKER_TESTS, celery_worker


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_sync_server_task_syncs_and_returns_the_run(make_server):
    server = make_server("time", command=str(BIN_DIR / "mcp-server-time"))

    run_pk = task_result(sync_server.delay(server.pk, "test"))

    run = SyncRun.objects.get(pk=run_pk)
    assert run.status == SyncStatus.SUCCESS and run.added == 2 and run.source == "test"


def test_sync_server_task_ignores_a_deleted_server(db):
    assert task_result(sync_server.delay(987654, "test")) is None
    assert not SyncRun.objects.exists()


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.django_db(transaction=True)  # autocommit, as in a worker: each write stands or fails on its own
@pytest.mark.parametrize("when", ["listing", "failed listing", "applying"])
def test_a_server_deleted_while_its_first_sync_runs_ends_the_sync_quietly(scripted, monkeypatch, caplog, when):
    """The run goes with its server: closing it (or writing the tools) then failed with an IntegrityError, a
    traceback in the worker's log for a sync of nothing. The task now ends as for a server deleted before it ran."""
    from catalog import upstream
    from catalog.models import Server
    from catalog.services import sync

    server, write = scripted({"pages": [[good_tool("alpha")]]})
    if when == "failed listing":
        write({"pages": [[good_tool("alpha")]], "fail_on_page": {"1": "error"}})

    def deleting(real):
        def call(*args, **kwargs):
            Server.objects.filter(pk=server.pk).delete()
            return real(*args, **kwargs)

        return call

    if when == "applying":
        monkeypatch.setattr(sync, "catalog_apply_listing", deleting(sync.catalog_apply_listing))
    else:
        monkeypatch.setattr(upstream, "list_tools", deleting(upstream.list_tools))

    with caplog.at_level("INFO", logger="catalog"):
        assert task_result(sync_server.delay(server.pk, "test")) is None

    assert not Server.objects.exists() and not SyncRun.objects.exists() and not Tool.objects.exists()
    assert [r.getMessage() for r in caplog.records if r.name.startswith("catalog")] == [
        f"sync of server {server.pk} skipped: it no longer exists"
    ]


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_sync_all_servers_queues_one_sync_per_live_enabled_server(
    scripted, make_server, django_capture_on_commit_callbacks
):
    live, _ = scripted({"pages": [[good_tool("alpha")]]}, slug="live")
    other, _ = scripted({"pages": [[good_tool("beta")]]}, slug="other")
    make_server("off", command="unused", status=ServerStatus.DISABLED)
    make_server("dump", transport=Transport.IMPORTED)
    _forget_beat_markers(live, other)

    with django_capture_on_commit_callbacks(execute=True):
        queued = task_result(sync_all_servers.delay())

    assert queued == 2
    runs = SyncRun.objects.all()
    assert sorted(r.server.slug for r in runs) == ["live", "other"]
    assert {r.source for r in runs} == {"beat"}
    assert set(Tool.objects.values_list("tool_id", flat=True)) == {"live::alpha", "other::beta"}


def _forget_beat_markers(*servers) -> None:
    """Primary keys repeat across tests (and test databases) and the cache outlives them: clear this period's and
    the next one's beat markers of ``servers`` (whatever a test sets SCOUT_SYNC_INTERVAL to)."""
    interval = max(1, django_settings.SCOUT_SYNC_INTERVAL)
    period = int(time.time() // interval)
    shared_cache().delete_many([beat_marker(s.pk, p) for s in servers for p in (period, period + 1)])


def _clear_of_a_period_end(settings, seconds: int, margin: float = 10) -> None:
    """Set SCOUT_SYNC_INTERVAL to ``seconds`` and wait, if need be, until a period has over ``margin`` s left."""
    settings.SCOUT_SYNC_INTERVAL = seconds
    left = seconds - time.time() % seconds
    if left < margin:
        time.sleep(left + 0.1)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_two_beats_in_one_period_queue_one_sync_per_server(scripted, settings, django_capture_on_commit_callbacks):
    """F12: two beat processes each send the reconcile once a period; the second queues nothing, and the next
    period's queues again."""
    server, _ = scripted({"pages": [[good_tool("alpha")]]})
    other, _ = scripted({"pages": [[good_tool("beta")]]}, slug="other")
    # A short period, so that the next one comes soon: the two reconciles below run within milliseconds (the syncs
    # they queue run after both, at the block's end), well inside the 4 s left of it (a loaded machine stalls for
    # seconds).
    _clear_of_a_period_end(settings, 6, margin=4)
    _forget_beat_markers(server, other)

    with django_capture_on_commit_callbacks(execute=True):
        first, second = sync_all_servers(), sync_all_servers()
    assert (first, second) == (2, 0)
    assert SyncRun.objects.filter(source="beat").count() == 2

    time.sleep(6 - time.time() % 6 + 0.1)  # the next period (or a later one, if the syncs took longer)
    with django_capture_on_commit_callbacks(execute=True):
        assert sync_all_servers() == 2

    assert SyncRun.objects.filter(server=server, source="beat").count() == 2
    assert SyncRun.objects.filter(server=other, source="beat").count() == 2


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_burst_of_list_changed_requests_queues_one_sync(scripted, settings, django_capture_on_commit_callbacks):
    settings.SCOUT_SYNC_DEBOUNCE = 30
    server, _ = scripted({"pages": [[good_tool("alpha")]]})
    other, _ = scripted({"pages": [[good_tool("beta")]]}, slug="other")

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        queued = [request_resync(server.pk) for _ in range(25)] + [request_resync(other.pk)]

    assert queued == [True] + [False] * 24 + [True]
    assert len([cb for cb in callbacks if getattr(cb, "func", None) == sync_server.apply_async]) == 2
    assert all(
        cb.keywords["countdown"] == 30 for cb in callbacks if getattr(cb, "func", None) == sync_server.apply_async
    )
    runs = SyncRun.objects.filter(source="list_changed")
    assert sorted(r.server.slug for r in runs) == ["other", "scripted"]
    assert all(r.status == SyncStatus.SUCCESS for r in runs)


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_notice_after_the_window_queues_another_sync(scripted, settings, django_capture_on_commit_callbacks):
    settings.SCOUT_SYNC_DEBOUNCE = 1
    server, _ = scripted({"pages": [[good_tool("alpha")]]})

    with django_capture_on_commit_callbacks(execute=True):
        first = request_resync(server.pk)
        during = request_resync(server.pk)
        time.sleep(1.2)
        after = request_resync(server.pk)

    assert (first, during, after) == (True, False, True)
    assert SyncRun.objects.filter(server=server, source="list_changed").count() == 2


def test_debounce_countdown_stays_below_the_visibility_timeout(settings):
    from catalog.tasks import resync_debounce_seconds

    settings.SCOUT_SYNC_DEBOUNCE = 10_000
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}

    assert resync_debounce_seconds() < 3600


def test_every_task_limit_retry_and_countdown_stays_below_the_visibility_timeout():
    """F12: Redis hands an unacknowledged task to another worker once the visibility timeout passes, so each of
    Scout's tasks must time out (soft, then hard) and each retry backoff or queued countdown must end before it."""
    import governance.tasks  # noqa: F401  (each import registers its module's tasks with the app)
    import search.tasks  # noqa: F401

    visibility = django_settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
    conf = celery_app.conf
    ours = {
        name: task
        for name, task in celery_app.tasks.items()
        if name.split(".")[0] in ("catalog", "governance", "search")
    }
    assert {"catalog.tasks.sync_server", "search.tasks.reindex_tools", "governance.tasks.expire_approvals"} <= set(ours)
    for name, task in ours.items():
        soft = task.soft_time_limit or conf.task_soft_time_limit
        hard = task.time_limit or conf.task_time_limit
        assert soft and hard and soft < hard < visibility, (name, soft, hard, visibility)
        if getattr(task, "autoretry_for", ()) and getattr(task, "retry_backoff", False):
            assert getattr(task, "retry_backoff_max", 600) < visibility, name  # Celery's default cap: 600 s
    assert 0 < django_settings.SCOUT_LEARNED_INDEX_INTERVAL < visibility  # the usage flush's countdown


# --- a real worker ----------------------------------------------------------------------------------


def _worker_database_env() -> dict[str, str]:
    """Point the worker at the test database pytest-django created (and this test committed rows to)."""
    db = django_settings.DATABASES["default"]
    name = str(db["NAME"])
    if db["ENGINE"].endswith("sqlite3"):
        if name.startswith("file:memorydb") or name == ":memory:" or "mode=memory" in name:
            pytest.fail(
                "the Celery worker test needs a database another process can open; the SQLite test database "
                "is in memory. Run it with DATABASE_URL (Postgres), as CI does."
            )
        return {"SQLITE_PATH": name, "DATABASE_URL": ""}
    parts = urlsplit(os.environ["DATABASE_URL"])
    return {"DATABASE_URL": urlunsplit(parts._replace(path=f"/{name}"))}


needs_real_worker = pytest.mark.skipif(
    not WORKER_TESTS,
    reason="starts a real Celery worker on Redis: set SCOUT_CELERY_WORKER_TESTS=1 and REDIS_URL (CI sets both)",
)


def real_worker_test(test):
    """The marks of a test that starts a real Celery worker on Redis, on the committed test database."""
    marks = (pytest.mark.django_db(transaction=True), needs_real_worker, pytest.mark.slow, pytest.mark.celery_worker)
    for mark in marks:
        test = mark(test)
    return test


@contextmanager
def _routed_to(queue: str, *tasks: str) -> Iterator[None]:
    """Send ``tasks`` (queued by this process or a worker's) to ``queue``, not the default one, which may hold
    other tests' tasks. Celery builds its router once per app, so one for these routes stands in for it."""
    amqp = celery_app.amqp
    routes, router = celery_app.conf.task_routes, amqp.router
    celery_app.conf.task_routes = {task: {"queue": queue} for task in tasks}
    amqp.flush_routes()
    amqp.__dict__["router"] = amqp.Router()
    try:
        yield
    finally:
        celery_app.conf.task_routes = routes
        amqp.flush_routes()
        amqp.__dict__["router"] = router


def _worker_env(**extra: str) -> dict[str, str]:
    """A worker's environment: this one's, pointed at the test database, with ``extra`` settings."""
    base = {"SECRET_KEY": "celery-worker-test", "PYTHONPATH": str(django_settings.BASE_DIR)}
    return {**os.environ, **_worker_database_env(), **base, **extra}


def _worker_run_finished(worker, server, source: str = "worker") -> SyncRun:
    """The worker's sync run of ``server`` once it has ended (fails if the worker exits or takes over 90 s)."""
    deadline = time.monotonic() + 90
    run = None
    while run is None or run.status == SyncStatus.RUNNING:
        assert worker.poll() is None, f"the worker exited early:\n{worker.stdout.read()}"
        assert time.monotonic() < deadline, "the worker did not finish the sync in time"
        time.sleep(0.2)
        run = SyncRun.objects.filter(server=server, source=source).first()
    return run


@pytest.mark.celery_worker
@pytest.mark.slow
@pytest.mark.timeout(120)
@needs_real_worker
@pytest.mark.django_db(transaction=True)
def test_real_worker_runs_a_sync_task_end_to_end(make_server):
    if not django_settings.REDIS_URL:
        pytest.fail("SCOUT_CELERY_WORKER_TESTS=1 but REDIS_URL is not set: the worker test needs Redis")
    celery_app.conf.task_always_eager = False  # this test's tasks must go through the broker
    server = make_server("time", command=str(BIN_DIR / "mcp-server-time"))
    queue = f"scout-test-{uuid.uuid4().hex[:12]}"  # a private queue: no other worker on this Redis takes it
    env = _worker_env()
    # Queued before any worker runs: nothing happens until the worker takes it from Redis.
    result = sync_server.apply_async((server.pk, "worker"), queue=queue)
    assert not SyncRun.objects.filter(server=server).exists()
    try:
        with celery_worker(env, queue=queue, name=queue) as worker:
            run = _worker_run_finished(worker, server)
            assert run.status == SyncStatus.SUCCESS, run.error
            assert run.added == 2
            assert set(Tool.objects.filter(server=server).values_list("name", flat=True)) == {
                "get_current_time",
                "convert_time",
            }
            assert result.id
    finally:
        celery_app.conf.task_always_eager = django_settings.CELERY_TASK_ALWAYS_EAGER


@pytest.mark.timeout(180)
@real_worker_test
def test_a_sync_whose_worker_is_killed_runs_again_once_and_its_dead_run_is_closed(scripted):
    """F12/F8: SIGKILL of the worker while a sync waits for the upstream's listing. The broker delivers the task
    again after the visibility timeout (3 s here), the next worker runs it once, and that run closes the dead one,
    which stayed "running" for ever before. The dead run's lock is deleted as its TTL (minutes) would expire it."""
    import redis

    from catalog.services.sync import server_sync_lock_name

    assert django_settings.REDIS_URL, "SCOUT_CELERY_WORKER_TESTS=1 needs REDIS_URL"
    celery_app.conf.task_always_eager = False
    slow = {"pages": [[good_tool("first"), good_tool("second")]], "delay": 60}
    server, write = scripted(slow)
    queue = f"scout-test-{uuid.uuid4().hex[:12]}"
    env = _worker_env(SCOUT_CELERY_VISIBILITY_TIMEOUT="3")
    runs = SyncRun.objects.filter(server=server).order_by("pk")
    try:
        sync_server.apply_async((server.pk, "worker"), queue=queue)
        with celery_worker(env, queue=queue, name=queue) as worker:
            for _ in range(600):
                if runs.exists() or worker.poll() is not None:
                    break
                time.sleep(0.1)
            assert runs.count() == 1 and runs[0].status == SyncStatus.RUNNING, worker.poll()
            worker.kill()  # SIGKILL: no shutdown, no acknowledgement
            worker.wait(10)
        write({**slow, "delay": 0})
        with redis.Redis.from_url(django_settings.REDIS_URL) as client:
            client.delete(f"scout:lock:{server_sync_lock_name(server.pk)}")
            # The sync queues its reindex on the default queue, which this worker takes too (F8). No worker of the
            # suite reads it, so it holds only tasks other tests left, of other test databases: dropped first.
            client.delete("celery")
        with celery_worker(env, queue=f"{queue},celery", name=f"{queue}-2") as worker:
            for _ in range(900):
                if runs.filter(status=SyncStatus.SUCCESS).exists() or worker.poll() is not None:
                    break
                time.sleep(0.1)
            for _ in range(50):  # three visibility timeouts more: a second delivery would start a run meanwhile
                time.sleep(0.2)
            index = _index_converged(server, worker)
        statuses = [(run.status, run.error) for run in runs]
        assert statuses == [
            (SyncStatus.FAILED, "interrupted: the process running this sync stopped"),
            (SyncStatus.SUCCESS, ""),
        ], statuses
        assert set(Tool.objects.filter(server=server).values_list("name", flat=True)) == {"first", "second"}
        # F8: the search index holds exactly the catalog's tools, each with the hash of its current texts.
        catalog = {
            doc.pk: doc.dense_hash()
            for doc in tool_docs_load(pks=Tool.objects.filter(server=server).values_list("pk", flat=True))
        }
        assert len(catalog) == 2 and index == catalog, (index, catalog)
    finally:
        celery_app.conf.task_always_eager = django_settings.CELERY_TASK_ALWAYS_EAGER


@pytest.mark.timeout(180)
@real_worker_test
def test_a_sync_whose_worker_is_killed_shows_failed_once_its_renewed_lock_runs_out(scripted, admin_client):
    """opsux10: SIGKILL of the worker mid-sync left its run "running" in the admin's progress and the API until a
    next sync took the lock, after the lock's TTL (connect + list timeouts + 5 minutes). The live sync now renews a
    short lock (SCOUT_SYNC_LOCK_SECONDS, 3 s here) and stays "running" past it; once its worker is dead the lock runs
    out and the beat closes it as failed (``close_dead_sync_runs``: mend3, not the progress poll, a GET)."""
    from django.urls import reverse

    from catalog.services.sync import DIED

    assert django_settings.REDIS_URL, "SCOUT_CELERY_WORKER_TESTS=1 needs REDIS_URL"
    celery_app.conf.task_always_eager = False
    server, _ = scripted({"pages": [[good_tool("first")]], "delay": 60})
    queue = f"scout-test-{uuid.uuid4().hex[:12]}"
    runs = SyncRun.objects.filter(server=server)

    def progress() -> dict:
        return admin_client.get(reverse("admin:catalog_syncrun_progress", args=[runs.get().pk])).json()

    try:
        sync_server.apply_async((server.pk, "worker"), queue=queue)
        with celery_worker(_worker_env(SCOUT_SYNC_LOCK_SECONDS="3"), queue=queue, name=queue) as worker:
            for _ in range(600):
                if runs.exists() or worker.poll() is not None:
                    break
                time.sleep(0.1)
            assert runs.count() == 1, worker.poll()
            for _ in range(40):  # over two of the lock's TTLs: the live sync keeps its lock and its run
                assert progress()["status"] == SyncStatus.RUNNING
                time.sleep(0.2)
            worker.kill()  # SIGKILL: no shutdown, nothing closes the run
            worker.wait(10)
        for _ in range(300):
            close_dead_sync_runs()  # the beat's, every SCOUT_SYNC_LOCK_SECONDS
            if (shown := progress())["status"] != SyncStatus.RUNNING:
                break
            time.sleep(0.2)
        assert (shown["status"], shown["error"], shown["running"]) == (SyncStatus.FAILED, DIED, False), shown
        assert runs.get().status == SyncStatus.FAILED
    finally:
        celery_app.conf.task_always_eager = django_settings.CELERY_TASK_ALWAYS_EAGER


def _index_converged(server, worker) -> dict[int, str]:
    """The search index's tool pks and vector-text hashes for ``server``'s tools, once a generation holding them
    is ready (fails if the worker exits or none is within 90 s)."""
    from search.choices import GenerationStatus
    from search.models import IndexGeneration, ToolEmbedding

    pks = set(Tool.objects.filter(server=server).values_list("pk", flat=True))
    deadline = time.monotonic() + 90
    while not any(
        pks <= set(tool_pks or ())
        for tool_pks in IndexGeneration.objects.filter(status=GenerationStatus.READY).values_list("tool_pks", flat=True)
    ):
        assert worker.poll() is None, f"the worker exited early:\n{worker.stdout.read()}"
        assert time.monotonic() < deadline, "no index generation holds the synced tools"
        time.sleep(0.2)
    rows = ToolEmbedding.objects.filter(tool__server=server)
    return dict(rows.values_list("tool_id", "dense_hash"))


@pytest.mark.timeout(180)
@real_worker_test
def test_two_beats_reconciling_at_once_run_one_sync_per_server_on_a_real_worker(scripted, settings):
    """F12, through the broker: the reconcile task of two beat processes run side by side (two threads, as two
    workers would) queue the server's sync on Redis once, and the real worker runs exactly one sync."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    assert django_settings.REDIS_URL, "SCOUT_CELERY_WORKER_TESTS=1 needs REDIS_URL"
    server, _ = scripted({"pages": [[good_tool("alpha")]]})
    _clear_of_a_period_end(settings, 600)
    _forget_beat_markers(server)
    queue = f"scout-test-{uuid.uuid4().hex[:12]}"
    celery_app.conf.task_always_eager = False
    runs = SyncRun.objects.filter(server=server)

    def beat(_: int) -> int:
        try:
            return sync_all_servers()
        finally:
            connection.close()  # this thread's own

    try:
        with _routed_to(queue, "catalog.tasks.sync_server"), ThreadPoolExecutor(2) as pool:
            queued = sorted(pool.map(beat, range(2)))
        assert queued == [0, 1]
        with celery_worker(_worker_env(), queue=queue, name=queue) as worker:
            run = _worker_run_finished(worker, server, source="beat")
            for _ in range(25):  # a second queued sync would start meanwhile
                time.sleep(0.2)
        assert run.status == SyncStatus.SUCCESS, run.error
        assert [(r.source, r.status) for r in runs] == [("beat", SyncStatus.SUCCESS)]
    finally:
        celery_app.conf.task_always_eager = django_settings.CELERY_TASK_ALWAYS_EAGER


# A stdio "server" that dies before it answers, writing a forged log line and a terminal escape to its stderr.
LOUD_EXIT = (
    "import sys; sys.stderr.write('disk full\\n2026-01-01 00:00:00,000 WARNING governance.audit FORGED approved\\n"
    "\\x1b[2J'); sys.exit(1)"
)


@pytest.mark.celery_worker
@pytest.mark.slow
@pytest.mark.timeout(120)
@needs_real_worker
@pytest.mark.django_db(transaction=True)
def test_a_workers_log_never_carries_a_line_of_an_upstreams_making(make_server):
    """T15: a sync's failure is logged with the dying server's stderr; the worker logs through Celery's handlers,
    not settings.LOGGING's, and wrote it as it came: a forged log line and a terminal escape."""
    import sys

    celery_app.conf.task_always_eager = False
    server = make_server("loud", command=sys.executable, args=["-c", LOUD_EXIT])
    queue = f"scout-test-{uuid.uuid4().hex[:12]}"
    env = {**os.environ, **_worker_database_env(), "SECRET_KEY": "celery-worker-test"}
    sync_server.apply_async((server.pk, "worker"), queue=queue)
    try:
        with celery_worker(env, queue=queue, name=queue) as worker:
            run = _worker_run_finished(worker, server)
        log = worker.stdout.read()
    finally:
        celery_app.conf.task_always_eager = django_settings.CELERY_TASK_ALWAYS_EAGER
    assert run.status == SyncStatus.FAILED and "FORGED" in run.error
    [line] = [line for line in log.splitlines() if "sync of loud failed" in line]
    assert "disk full\\n2026-01-01 00:00:00,000 WARNING governance.audit FORGED approved" in line, log
    assert "FORGED" not in log.replace(line, "") and "\x1b" not in log, log
