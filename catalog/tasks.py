"""Catalog background jobs: sync one server, reconcile all, debounced re-sync on tools/list_changed."""

import functools
import logging
import time
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog.cachesafe import cache_call
from catalog.models import Server, SyncRun
from catalog.outbox import outbox_held_args, outbox_holds
from catalog.outbox import outbox_send as _outbox_send
from catalog.services.runs import sync_run_finish, sync_run_queue, sync_run_queued_note, sync_runs_unclaimed_close
from catalog.services.sync import server_list_syncable, server_sync, sync_runs_dead_close

logger = logging.getLogger(__name__)

RESYNC_MARKER_PREFIX = "catalog:resync-pending:"
BEAT_MARKER_PREFIX = "catalog:beat-sync:"
# A queued countdown must stay under the broker's visibility timeout or Redis redelivers the task.
VISIBILITY_MARGIN_SECONDS = 60
# On a run queued while the broker (Redis) is down: no worker has it yet; the outbox sends it once Redis is back.
BROKER_DOWN_NOTE = (
    "waiting for the broker: Redis did not take the task, so no worker has it yet; Scout keeps it and sends it once"
    " Redis answers again (checked every SCOUT_BROKER_RETRY_SECONDS and every minute by the beat)"
)


# Acknowledged once it ends: a worker killed mid-sync leaves it with the broker, which delivers it again after the
# visibility timeout (by then the dead run's lock has expired, its TTL being far shorter).
@shared_task(ignore_result=True, acks_late=True)
def sync_server(
    server_pk: int, trigger: str = "task", started_by_id: int | None = None, run_pk: int | None = None
) -> int | None:
    """Sync one server (for the user ``started_by_id`` who asked, if one did), as the run ``run_pk`` recorded queued
    when it was asked for (``sync_server_asked``); returns the SyncRun pk (None if the server was deleted meanwhile)."""
    try:
        run = server_sync(server_pk=server_pk, trigger=trigger, started_by_id=started_by_id, run_pk=run_pk)
    except Server.DoesNotExist:
        logger.info("sync of server %s skipped: it no longer exists", server_pk)
        return None
    return run.pk


def sync_server_asked(server: Server, trigger: str, started_by_id: int | None) -> SyncRun | None:
    """Queue a sync of ``server`` that a person asked for (admin, REST).

    With a worker (REDIS_URL) its run is recorded queued now and returned, and the task, sent once the caller's
    transaction commits, carries on with that run: the caller has a run to show and follow at once (mend3). A task the
    broker refuses is kept by the outbox (catalog/outbox.py) and its run says so while it waits; any other refusal
    fails the run with its reason and is raised.

    With tasks in-process (CELERY_TASK_ALWAYS_EAGER, the embedded default and the demo) it runs here, in their request,
    and None is returned (its run exists once this returns): Scout's own failure in it (an internal error, not the
    upstream's) is recorded on its run and the server (catalog.services.sync), and logged here with its traceback
    rather than raised, so the request answers as for any failed sync, not with an error (mend1, mend2)."""
    if not sync_server.app.conf.task_always_eager:
        run = sync_run_queue(server=server, source=trigger, started_by_id=started_by_id)
        transaction.on_commit(functools.partial(_queued_send, run))
        return run
    try:
        sync_server.delay(server.pk, trigger, started_by_id)
    except Exception:
        logger.exception("sync of %s failed inside Scout", server.slug)
    return None


def _queued_send(run: SyncRun) -> None:
    try:
        result = sync_server.delay(run.server_id, run.source, run.started_by_id, run.pk)
    except Exception as exc:
        sync_run_finish(run, error=f"not queued: the broker refused the task ({type(exc).__name__})")
        raise
    if outbox_holds(result.id):
        sync_run_queued_note(run, BROKER_DOWN_NOTE)


@shared_task(ignore_result=True)
def sync_all_servers() -> int:
    """Queue one sync per live, non-disabled server (the beat reconcile). Returns how many were queued.

    At most one per server per period of SCOUT_SYNC_INTERVAL seconds (F12): two beat processes each send this task
    once a period, and the second finds every server's marker for the period already set and queues nothing.
    """
    interval = max(1, settings.SCOUT_SYNC_INTERVAL)
    period = int(time.time() // interval)
    queued = 0
    for pk in server_list_syncable():
        # Cache down (F4): no marker, so queue it (a sync too many beats one lost).
        if cache_call("add", beat_marker(pk, period), 1, timeout=interval, default=True):
            sync_server.delay_on_commit(pk, "beat")
            queued += 1
    return queued


def beat_marker(server_pk: int, period: int) -> str:
    """The cache key set once the beat has queued ``server_pk``'s sync for ``period`` (time // SCOUT_SYNC_INTERVAL)."""
    return f"{BEAT_MARKER_PREFIX}{server_pk}:{period}"


def resync_debounce_seconds() -> int:
    visibility = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 3600)
    return max(0, min(settings.SCOUT_SYNC_DEBOUNCE, visibility - VISIBILITY_MARGIN_SECONDS))


def request_resync(server_pk: int) -> bool:
    """Ask for a sync of ``server_pk`` because it announced tools/list_changed. Returns whether one was queued.

    Notifications within SCOUT_SYNC_DEBOUNCE seconds coalesce: the first sets a marker and queues a sync
    that runs once the window ends; later ones see the marker and add nothing. The queued sync fetches
    after the window, so it sees every change announced within it. (With eager Celery and no worker,
    the sync runs at once instead, and the rest of the window is coalesced into it.)
    """
    debounce = resync_debounce_seconds()
    # Cache down (F4): no debounce marker, so queue it (a sync too many beats one lost).
    if not cache_call("add", f"{RESYNC_MARKER_PREFIX}{server_pk}", 1, timeout=max(debounce, 1), default=True):
        return False
    sync_server.apply_async_on_commit((server_pk, "list_changed"), countdown=debounce)
    return True


@shared_task(ignore_result=True)
def close_dead_sync_runs() -> int:
    """Close as failed the sync runs whose process died (a worker killed mid-sync), and the queued runs no worker took
    (their task lost by the broker: ``queued_runs_unclaimed_close``); returns how many."""
    return sync_runs_dead_close() + queued_runs_unclaimed_close()


def queued_unclaimed_seconds() -> int:
    """How long a queued run may wait for a worker before it is taken for lost: past the broker's visibility timeout
    and its restore interval (a task a worker received and died holding is delivered again by then), plus a margin."""
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    visibility = int(options.get("visibility_timeout", 3600))
    return visibility + int(options.get("unacked_restore_interval", 10)) + VISIBILITY_MARGIN_SECONDS


def queued_runs_unclaimed_close() -> int:
    """Close as failed the runs queued longer than ``queued_unclaimed_seconds`` that no worker took: the broker lost
    their task (Redis restarted without persistence, its queue flushed) or no worker has been running. Never one whose
    task the outbox still keeps (Redis down: sent once it is back). Its reason tells the operator to ask again."""
    bound = queued_unclaimed_seconds()
    held = {args[3] for args in outbox_held_args(sync_server.name) if len(args) > 3 and isinstance(args[3], int)}
    error = (
        f"not run: no worker took this sync within {bound // 60} min of its queueing (the broker lost the task, or no"
        " worker is running); ask for the sync again"
    )
    return sync_runs_unclaimed_close(queued_before=timezone.now() - timedelta(seconds=bound), held=held, error=error)


@shared_task(name="catalog.tasks.outbox_send", ignore_result=True)
def outbox_send() -> int:
    """Send the tasks kept while the broker was down (catalog/outbox.py); returns how many were sent."""
    return _outbox_send()
