"""Whether background tasks run: the broker answers, a Celery worker is alive, how many tasks wait.

With REDIS_URL, syncs (Sync now, the debounced re-sync, the reconcile), approver notifications, reindexes and the
purges run on a Celery worker. With the worker stopped they waited in Redis while the admin said "Sync queued" and
"Notifications that failed: 0", /metrics and /readyz all fine (opsux3): nothing an operator read said that nothing
ran. Each worker now writes a heartbeat into the broker's Redis every HEARTBEAT_SECONDS (a thread of its main
process, started when it is ready), and the operator's home page and /metrics read it with the queue's length and
the tasks kept in the database while the broker was down (catalog/outbox.py).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

import redis
from django.conf import settings

logger = logging.getLogger(__name__)
WORKER_SEEN_KEY = "scout:worker:seen"  # unix time of the latest heartbeat of any worker
HEARTBEAT_SECONDS = 10.0
WORKER_SILENT_AFTER = 60.0  # seconds without a heartbeat before the worker counts as gone
_heartbeat: threading.Thread | None = None


def _broker() -> redis.Redis:
    timeout = settings.CELERY_BROKER_CONNECTION_TIMEOUT
    return redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=timeout, socket_timeout=timeout)


def worker_heartbeat_start() -> None:
    """Start this worker's heartbeat thread (once per process; a Celery worker's ``worker_ready``)."""
    global _heartbeat
    if _heartbeat is None and settings.REDIS_URL:
        _heartbeat = threading.Thread(target=_beat, name="scout-worker-heartbeat", daemon=True)
        _heartbeat.start()


def _beat() -> None:
    client = _broker()
    while True:
        try:
            client.set(WORKER_SEEN_KEY, repr(time.time()), ex=7 * 24 * 3600)
        except redis.RedisError:  # the broker is down: the worker reconnects on its own, the next beat tells
            pass
        time.sleep(HEARTBEAT_SECONDS)


@dataclass(frozen=True)
class BackgroundStatus:
    broker_up: bool
    worker_seen: float | None  # unix time of the latest heartbeat, None when none was ever written (or unknown)
    queued: int | None  # tasks waiting in the broker's queue (None: the broker did not answer)
    kept: int  # tasks the broker refused, kept in the database until it is back

    @property
    def worker_silent_for(self) -> float | None:
        """Seconds since the latest heartbeat (None: never seen, or the broker did not answer)."""
        return None if self.worker_seen is None else max(0.0, time.time() - self.worker_seen)

    @property
    def worker_seen_at(self) -> datetime | None:
        return None if self.worker_seen is None else datetime.fromtimestamp(self.worker_seen, tz=UTC)

    @property
    def worker_up(self) -> bool:
        silent = self.worker_silent_for
        return silent is not None and silent < WORKER_SILENT_AFTER


def background_status() -> BackgroundStatus | None:
    """The broker, the worker and the waiting tasks now; None when tasks run in-process (no REDIS_URL)."""
    if not settings.REDIS_URL or settings.CELERY_TASK_ALWAYS_EAGER:
        return None
    from catalog.models import QueuedTask
    from scoutsite.celery import app

    kept = QueuedTask.objects.count()
    client = _broker()
    try:
        seen, queued = client.pipeline().get(WORKER_SEEN_KEY).llen(app.conf.task_default_queue).execute()
    except redis.RedisError:
        return BackgroundStatus(broker_up=False, worker_seen=None, queued=None, kept=kept)
    finally:
        client.close()
    return BackgroundStatus(broker_up=True, worker_seen=float(seen) if seen else None, queued=queued, kept=kept)
