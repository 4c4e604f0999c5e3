"""The operator's home page and /metrics say whether background tasks run (scoutsite/background.py): tasks waiting
with no worker, a live worker's heartbeat, Redis not answering.

Real parts: a redis-server of this test's own on a free port (the broker), a real Celery worker on it, the admin
home rendered for an operator. Before, the page said nothing while the worker was stopped and syncs waited."""

from __future__ import annotations

import os
import time

import pytest
from celery import Celery
from django.contrib.auth.models import Group
from django.test import override_settings
from django.urls import reverse

from governance.roles import OPERATORS
from scoutsite import celery_app
from scoutsite.metrics import metrics_text
from tests.catalog.test_tasks import _worker_database_env
from tests.celery_worker import celery_worker, own_redis_worker_marks
from tests.mcpgateway.conftest import ThrowawayRedis

pytestmark = own_redis_worker_marks()
DEADLINE = 150.0


def _home(client) -> str:
    return client.get(reverse("admin:index")).content.decode()


def test_operator_home_says_whether_a_worker_runs_the_waiting_tasks(client, django_user_model):
    broker = ThrowawayRedis()
    broker.start()
    url = f"redis://127.0.0.1:{broker.port}/0"
    # Scout's own tasks run in this process (as in ordinary tests): only this test's go to its Redis, and no
    # connection to it is left in Scout's producer pool once it is stopped.
    eager, celery_app.conf.task_always_eager = celery_app.conf.task_always_eager, True
    try:
        with override_settings(REDIS_URL=url, CELERY_BROKER_URL=url, CELERY_TASK_ALWAYS_EAGER=False):
            _watch_the_worker(client, django_user_model, broker, url)
    finally:
        celery_app.conf.task_always_eager = eager


def _watch_the_worker(client, django_user_model, broker: ThrowawayRedis, url: str) -> None:
    operator = django_user_model.objects.create_user(username="ops", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(operator)
    sender = Celery("scout-test-sender", broker=url, set_as_current=False)  # Scout's tasks keep their app
    env = {**os.environ, **_worker_database_env(), "SECRET_KEY": "celery-worker-test", "REDIS_URL": url}
    try:
        for number in (1, 2):
            sender.send_task("celery.accumulate", args=(number,), queue="celery")
        waiting = broker.client().llen("celery")
        html = _home(client)
        assert "Background tasks: no worker is running" in html and f"{waiting} tasks wait in the queue" in html
        metrics = metrics_text().decode()
        assert f'scout_tasks_waiting{{place="broker"}} {waiting}.0' in metrics and "scout_broker_up 1.0" in metrics
        assert "scout_worker_heartbeat_age_seconds" not in metrics  # never seen

        with celery_worker(env, queue="celery", name="scout-background-test") as worker:
            deadline = time.monotonic() + DEADLINE
            while "Background tasks: worker seen" not in (html := _home(client)) or "0 tasks waiting" not in html:
                if worker.poll() is not None:
                    pytest.fail(f"the worker exited:\n{worker.stdout.read()}")
                assert time.monotonic() < deadline, f"the page never saw the worker:\n{html}"
                time.sleep(0.2)
            assert "scout_worker_heartbeat_age_seconds" in metrics_text().decode()

        broker.stop()
        html = _home(client)
        assert "Background tasks: Redis does not answer" in html
        assert "scout_broker_up 0.0" in metrics_text().decode()
    finally:
        sender.close()
        broker.stop()
