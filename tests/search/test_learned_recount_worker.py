"""The recount of learned requests' teachers runs on a real Celery worker, not in the request that revokes: the
revocation only queues it, and the revoked teacher's weight stops counting once the worker has run it and the
reindex it queues."""

import os
import time
import uuid

import pytest
from django.conf import settings as django_settings

from governance.services.permissions import permission_revoke
from scoutsite import celery_app
from search import usage
from search.models import IndexGeneration, LearnedConfirmation, LearnedRequest
from tests.catalog.test_tasks import _worker_database_env
from tests.celery_worker import WORKER_TESTS, WORKER_TESTS_REASON, celery_worker
from tests.search.test_learned_teachers_recount import two_teachers

pytestmark = [
    pytest.mark.celery_worker,
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(not WORKER_TESTS, reason=WORKER_TESTS_REASON),
    pytest.mark.django_db(transaction=True),
]


def test_a_revocation_queues_the_recount_and_the_worker_withdraws_the_teachers_weight(member, superuser, settings):
    if not django_settings.REDIS_URL:
        pytest.fail("SCOUT_CELERY_WORKER_TESTS=1 but REDIS_URL is not set: the worker test needs Redis")
    settings.SCOUT_LEARNED_INDEX_INTERVAL = 0
    queue = f"scout-test-{uuid.uuid4().hex[:12]}"  # a private queue: no other worker on this Redis takes it
    celery_app.conf.task_always_eager = True  # set up in this process (the setting is off with Redis)
    try:
        taught = two_teachers(member, superuser)  # eager so far: learned and indexed in this process
        server, tool = taught["server"], taught["send"]
        generations = IndexGeneration.objects.count()
        usage.cache_call("delete", usage.RECOUNT_PENDING_KEY)  # an earlier run's marker in the shared cache
        celery_app.conf.task_always_eager = False  # from here, tasks go through Redis
        celery_app.conf.update(task_routes={"*": {"queue": queue}})
        permission_revoke(actor=superuser, target=server, action="execute", holder=member)  # commits: queues it
        permission_revoke(actor=superuser, target=server, action="discover", holder=member)  # rides on it
        # The request did no recount: the member still counts until the worker runs it.
        assert LearnedRequest.objects.get().principal_count == 2
        env = {**os.environ, **_worker_database_env(), "SECRET_KEY": "celery-worker-test"}
        with celery_worker(env, queue=queue, name=queue) as worker:
            deadline = time.monotonic() + 150
            while IndexGeneration.objects.count() == generations:  # the recount, then the reindex it queued
                assert worker.poll() is None, f"the worker exited early:\n{worker.stdout.read()}"
                assert time.monotonic() < deadline, "the worker never withdrew the revoked teacher's weight"
                time.sleep(0.2)
        assert LearnedRequest.objects.get().principal_count == 1
        assert not LearnedConfirmation.objects.get(principal_key=f"u{member.pk}").counts
        assert tool.pk in IndexGeneration.objects.order_by("-id").first().tool_pks
    finally:
        celery_app.conf.update(task_routes=None)
        celery_app.conf.task_always_eager = django_settings.CELERY_TASK_ALWAYS_EAGER
        usage.cache_call("delete", usage.RECOUNT_PENDING_KEY)
