"""A real Celery worker process for tests (SCOUT_CELERY_WORKER_TESTS=1; CI sets it)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

WORKER_TESTS = os.environ.get("SCOUT_CELERY_WORKER_TESTS") == "1"
WORKER_TESTS_REASON = "starts a real Celery worker on Redis: set SCOUT_CELERY_WORKER_TESTS=1 (CI sets it)"
ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def celery_worker(env: dict[str, str], queue: str = "celery", name: str = "scout-test") -> Iterator[subprocess.Popen]:
    """``celery -A scoutsite worker`` (solo pool) on ``queue`` with ``env``, stopped (and reaped) on exit.
    Its output is in ``worker.stdout`` (read it after the worker exits)."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "scoutsite", "worker", "--pool=solo", "--loglevel=WARNING"]
        + ["-Q", queue, "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=5)


def own_redis_worker_marks() -> list[pytest.MarkDecorator]:
    """The marks of a test that runs a real worker on a redis-server of its own (tests.mcpgateway.conftest's
    ThrowawayRedis), on the committed test database."""
    from tests.mcpgateway.conftest import REDIS_SERVER

    return [
        pytest.mark.celery_worker,
        pytest.mark.slow,
        pytest.mark.timeout(300),
        pytest.mark.skipif(REDIS_SERVER is None, reason="needs a redis-server binary to stop and restart"),
        pytest.mark.skipif(not WORKER_TESTS, reason=WORKER_TESTS_REASON),
        pytest.mark.django_db(transaction=True),
    ]
