"""A real Celery worker outlives a Redis outage while it holds a countdown task (catalog/broker.py).

Its own redis-server on a free port (never the machine's), stopped and started again on that port; the worker a
subprocess on its own queue. Without catalog.broker's transport the worker exited at the loss ("Unrecoverable
error: AttributeError ... 'hostname'") and the task sent after Redis came back stayed queued."""

from __future__ import annotations

import os
import time
import uuid

import pytest
from celery import Celery

from tests.catalog.test_tasks import _worker_database_env
from tests.celery_worker import celery_worker, own_redis_worker_marks
from tests.mcpgateway.conftest import ThrowawayRedis

pytestmark = own_redis_worker_marks()
DEADLINE = 150.0  # the worker's reconnect backs off (2, 4, 6 ... s): a loaded machine takes a while


def _wait(condition, worker, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if worker.poll() is not None:
            pytest.fail(f"the worker exited while {what}:\n{worker.stdout.read()}")
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.1)


def test_worker_holding_a_countdown_task_survives_a_redis_restart():
    broker = ThrowawayRedis()
    broker.start()
    url = f"redis://127.0.0.1:{broker.port}/0"
    queue = f"scout-test-{uuid.uuid4().hex[:12]}"
    sender = Celery("scout-test-sender", broker=url, set_as_current=False)  # Scout's tasks keep their app
    env = {**os.environ, **_worker_database_env(), "SECRET_KEY": "celery-worker-test", "REDIS_URL": url}
    try:
        with celery_worker(env, queue=queue, name=queue) as worker:
            # The worker takes a task due in ten minutes and holds it unacknowledged until then.
            sender.send_task("celery.accumulate", args=(1,), countdown=600, queue=queue)
            _wait(lambda: broker.client().hlen("unacked") == 1, worker, "taking the countdown task")
            broker.stop()
            broker.start()  # the same port, empty (no persistence)
            sender.send_task("celery.accumulate", args=(2,), queue=queue)
            _wait(lambda: broker.client().llen(queue) == 0, worker, "taking the task sent after the restart")
            assert worker.poll() is None
        # Its log names the broker as operators expect, redis://, not the fix's class path (opsux4).
        log = worker.stdout.read()
        assert f"redis://:**@127.0.0.1:{broker.port}/0" in log and "catalog.broker" not in log, log
    finally:
        sender.close()
        broker.stop()
