"""Waiting for a task's result in a test."""

from typing import Any

from celery.result import AsyncResult, EagerResult


def task_result(result: AsyncResult | EagerResult) -> Any:
    """``result.get()``, which a test may always wait for: the test is never inside a task, but Celery's per-process
    flag saying so can be set for a moment by an eager task on another thread (a test gateway's), and ``get()`` would
    then raise instead of answering (tests/conftest.py ``celery_eager``)."""
    return result.get(disable_sync_subtasks=False)
