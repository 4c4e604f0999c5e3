"""Tasks queued while the broker is down are kept and sent again (SECURITY-TESTS F4).

With REDIS_URL, tasks go to Celery through Redis: a sync asked for in the admin or the API, the debounced
re-sync on tools/list_changed, the reindex after a catalog change, the batched learned-request reindex, the
approvers' notification of a new approval request. When Redis is down, Celery's ``apply_async`` raises after
its publish retries, and those callers (mostly ``transaction.on_commit`` callbacks of a request that already
committed) would fail the request or drop the task.

Instead every Scout task's ``apply_async`` (``OutboxTask``, the Celery app's task base class in
scoutsite/celery.py) records a task the broker refused in the database (``catalog.QueuedTask``: the task name,
its JSON arguments, its queue, its countdown as an ETA, and the task id the caller was handed) and returns
as if it had been queued. Then:

- for ``SCOUT_BROKER_RETRY_SECONDS`` after a refusal, further tasks go straight to the table (an outage
  costs one publish timeout per process, not one per request);
- a daemon thread of the process that recorded a task sends the table again every
  ``SCOUT_BROKER_RETRY_SECONDS`` until it is empty, so the tasks reach the worker within that long after
  Redis is back;
- the beat task ``catalog.tasks.outbox_send`` (every minute) and a worker starting up send whatever a
  stopped process left behind.

A sent row is deleted in the transaction that sent it (rows locked with SKIP LOCKED on Postgres; SQLite's
immediate transactions let one sender in at a time), so each row is sent once by one sender; a crash between
the send and the commit sends it again. Delivery is at least once, which every task allows: a sync, a
reindex and the learned-request flush converge on the same state; a notification may be repeated.

Tasks that were already in Redis when it stopped are Redis's to keep: with persistence (``appendonly yes``)
they survive a restart; without it they are lost, and the beat reconcile (SCOUT_SYNC_INTERVAL) re-syncs every
server anyway.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

import kombu.exceptions
import redis.exceptions
from celery import Task, current_app
from celery.contrib.django.task import DjangoTask
from celery.utils import uuid
from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import F
from django.utils import timezone

logger = logging.getLogger(__name__)

# What a broker outage looks like to a producer: kombu wraps connection errors after its retries; the redis
# client's own errors and socket errors can surface directly.
BROKER_ERRORS = (
    kombu.exceptions.OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    OSError,
)
SEND_BATCH = 200

_down_until = 0.0
_sender: threading.Thread | None = None
_sender_lock = threading.Lock()


class OutboxTask(DjangoTask):
    """Celery's Django task (``delay_on_commit``, ``apply_async_on_commit``) whose ``apply_async`` keeps the
    task in the outbox when the broker is unreachable."""

    def apply_async(self, args=None, kwargs=None, task_id=None, producer=None, link=None, link_error=None, **options):
        if self.app.conf.task_always_eager or producer is not None or link or link_error:
            # In-process tasks, or a caller managing its own producer or callbacks: Celery's behaviour as is.
            return super().apply_async(args, kwargs, task_id, producer, link, link_error, **options)
        task_id = task_id or uuid()
        if time.monotonic() >= _down_until:
            try:
                return super().apply_async(args, kwargs, task_id, **options)
            except BROKER_ERRORS as exc:
                _broker_down()
                error = f"{type(exc).__name__}: {exc}"
        else:
            error = "broker down moments ago"
        outbox_record(task=self, args=args, kwargs=kwargs, task_id=task_id, options=options, error=error)
        return self.AsyncResult(task_id)


def _broker_down() -> None:
    global _down_until
    _down_until = time.monotonic() + float(settings.SCOUT_BROKER_RETRY_SECONDS)


def outbox_record(
    *, task: Task, args: Any, kwargs: Any, task_id: str, options: dict[str, Any], error: str = ""
) -> None:
    """Keep ``task`` to send later; never raises (the request that queued it has already committed)."""
    from catalog.models import QueuedTask

    eta = options.get("eta")
    if eta is None and options.get("countdown"):
        eta = timezone.now() + timedelta(seconds=float(options["countdown"]))
    try:
        QueuedTask.objects.create(
            task_id=task_id,
            name=task.name,
            args=list(args or ()),
            kwargs=dict(kwargs or {}),
            queue=str(options.get("queue") or ""),
            eta=eta,
            last_error=error[:500],
        )
    except Exception:  # noqa: BLE001 - the broker and the database both refused: say what is lost, in full
        logger.exception("task %s %s lost: neither the broker nor the database took it", task.name, task_id)
        return
    logger.warning("task %s %s kept to send when the broker is back (%s)", task.name, task_id, error)
    outbox_sender_start()


def outbox_holds(task_id: str) -> bool:
    """Whether the task ``task_id`` is kept here, waiting for the broker (not yet sent)."""
    from catalog.models import QueuedTask

    return QueuedTask.objects.filter(task_id=task_id).exists()


def outbox_held_args(name: str) -> list[Any]:
    """The arguments of every task named ``name`` kept here, waiting for the broker."""
    from catalog.models import QueuedTask

    return list(QueuedTask.objects.filter(name=name).values_list("args", flat=True))


def outbox_send() -> int:
    """Send every kept task whose turn it is, oldest first, until the broker refuses one. Returns how many were
    sent; the rest stay for the next attempt."""
    from catalog.models import QueuedTask

    app = current_app
    sent = 0
    while True:
        with transaction.atomic():
            rows = QueuedTask.objects.order_by("pk")
            if connection.features.has_select_for_update_skip_locked:
                rows = rows.select_for_update(skip_locked=True)
            batch = list(rows[:SEND_BATCH])
            done: list[int] = []
            failure: BaseException | None = None
            for row in batch:
                try:
                    options: dict[str, Any] = {"task_id": row.task_id, "eta": row.eta, "ignore_result": True}
                    if row.queue:
                        options["queue"] = row.queue
                    app.send_task(row.name, args=row.args, kwargs=row.kwargs, **options)
                except BROKER_ERRORS as exc:
                    failure = exc
                    break
                done.append(row.pk)
            QueuedTask.objects.filter(pk__in=done).delete()
            if failure is not None:
                QueuedTask.objects.filter(pk__in=[row.pk for row in batch if row.pk not in done]).update(
                    attempts=F("attempts") + 1, last_error=f"{type(failure).__name__}: {failure}"[:500]
                )
        sent += len(done)
        if failure is not None:
            _broker_down()
            return sent
        if len(batch) < SEND_BATCH:
            if sent:
                logger.info("sent %d kept task(s) to the broker", sent)
            return sent


def outbox_sender_start() -> None:
    """Start this process's sender thread unless it runs already (it stops once the outbox is empty)."""
    global _sender
    with _sender_lock:
        if _sender is None:
            _sender = threading.Thread(target=_send_until_empty, name="scout-outbox-sender", daemon=True)
            _sender.start()


def _send_until_empty() -> None:
    global _sender
    from catalog.models import QueuedTask

    try:
        while True:
            time.sleep(float(settings.SCOUT_BROKER_RETRY_SECONDS))
            try:
                outbox_send()
                with _sender_lock:  # a row recorded after this check starts a new sender
                    if not QueuedTask.objects.exists():
                        _sender = None
                        return
            except Exception:  # noqa: BLE001 - e.g. the database is busy: try again next round
                logger.exception("sending kept tasks failed; trying again")
            finally:
                connections.close_all()  # this thread's connections only, not held while it sleeps
    finally:
        connections.close_all()
