"""Tasks run in-process (no REDIS_URL, as in `make demo`) log no line per task that succeeded; a worker's do."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN_A_TASK = """
import django
django.setup()
from celery import shared_task

@shared_task
def add(a, b):
    return a + b

from django.conf import settings
print("eager", settings.CELERY_TASK_ALWAYS_EAGER)
print("sum", add.delay(1, 2).get())
"""


def _run(**env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_TASK_ALWAYS_EAGER")}
    environment |= {"DJANGO_SETTINGS_MODULE": "scoutsite.settings", "DEBUG": "1", "SECRET_KEY": "x", **env}
    return subprocess.run(
        [sys.executable, "-c", RUN_A_TASK], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def test_an_in_process_task_that_succeeds_logs_no_line():
    answer = _run()
    assert answer.returncode == 0, answer.stderr
    assert "eager True" in answer.stdout and "sum 3" in answer.stdout  # it ran, in this process
    assert "succeeded in" not in answer.stderr


def test_a_worker_still_logs_each_task():
    """With a broker the tasks are the worker's: its per-task lines are its log, kept at INFO. Only the level is
    read here (nothing is sent to the broker)."""
    code = "import django, logging; django.setup(); print(logging.getLogger('celery.app.trace').getEffectiveLevel())"
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "scoutsite.settings", "DEBUG": "1", "SECRET_KEY": "x"}
    environment |= {"REDIS_URL": "redis://127.0.0.1:6379/13", "LOG_LEVEL": "INFO"}
    environment.pop("CELERY_TASK_ALWAYS_EAGER", None)
    answer = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert answer.stdout.strip() == "20", answer.stderr
