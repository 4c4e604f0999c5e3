"""The batched learned-request reindex with a broker: queued at once with the interval as its countdown, so it
runs on a real Celery worker even when the web process that armed it is gone before the interval ends."""

import os
import time
import uuid

import pytest
from django.conf import settings as django_settings

from governance.principals import principal_for_user
from governance.services.permissions import permission_grant
from scoutsite import celery_app
from search import usage
from search.models import IndexGeneration, LearnedRequest
from tests.catalog.test_tasks import _worker_database_env
from tests.celery_worker import WORKER_TESTS, WORKER_TESTS_REASON, celery_worker
from tests.governance.factories import ServerFactory, ToolFactory

pytestmark = [
    pytest.mark.celery_worker,
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not WORKER_TESTS, reason=WORKER_TESTS_REASON),
    pytest.mark.django_db(transaction=True),
]


class DeadTimer:
    """A timer whose process stops before it fires: it never runs its function."""

    armed: list[float] = []

    def __init__(self, interval, function):
        DeadTimer.armed.append(interval)
        self.daemon = True

    def start(self):
        pass


def test_the_flush_reaches_the_worker_though_the_web_process_is_gone(member, superuser, settings, monkeypatch):
    if not django_settings.REDIS_URL:
        pytest.fail("SCOUT_CELERY_WORKER_TESTS=1 but REDIS_URL is not set: the worker test needs Redis")
    settings.SCOUT_LEARNED_INDEX_INTERVAL = 2
    queue = f"scout-test-{uuid.uuid4().hex[:12]}"  # a private queue: no other worker on this Redis takes it
    celery_app.conf.task_always_eager = False  # this test's tasks go through Redis
    celery_app.conf.update(task_routes={"search.tasks.flush_learned_index": {"queue": queue}})
    monkeypatch.setattr(usage.threading, "Timer", DeadTimer)
    usage.cache_call("delete", usage.FLUSH_PENDING_KEY)  # an earlier run's marker in the shared cache
    server = ServerFactory(slug="mail")
    tool = ToolFactory(server=server, name="send_email", description="Send an e-mail message.")
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=server, action=action, holder=member)
    principal = principal_for_user(member)
    generations = IndexGeneration.objects.count()
    try:
        usage.query_log_record(
            principal=principal,
            query="mail the invoice to finance",
            results=[usage.LoggedResult(tool_id=tool.tool_id, score=0.9)],
            confidence="high",
            degraded=False,
            backend="embedded",
            latency_ms=1.0,
        )
        usage.search_outcome_record(principal=principal, tool=tool, outcome="success")  # commits: arms the flush
        assert DeadTimer.armed == []  # nothing left in this process that could die with it
        assert LearnedRequest.objects.filter(indexed=False).count() == 1
        env = {
            **os.environ,
            **_worker_database_env(),
            "SECRET_KEY": "celery-worker-test",
            "SCOUT_LEARNED_INDEX_INTERVAL": "2",
        }
        with celery_worker(env, queue=queue, name=queue) as worker:
            deadline = time.monotonic() + 150
            while LearnedRequest.objects.filter(indexed=False).exists():
                assert worker.poll() is None, f"the worker exited early:\n{worker.stdout.read()}"
                assert time.monotonic() < deadline, "the worker never ran the batched flush"
                time.sleep(0.2)
        assert IndexGeneration.objects.count() == generations + 1
    finally:
        celery_app.conf.update(task_routes=None)
        celery_app.conf.task_always_eager = django_settings.CELERY_TASK_ALWAYS_EAGER
