"""Shared fixtures. Personas (owner, approver, member, outsider, superuser) are added by governance."""

import pytest


@pytest.fixture(autouse=True)
def celery_eager(request: pytest.FixtureRequest):
    """Run Celery tasks in-process for ordinary tests, even when REDIS_URL makes the app non-eager.

    Tests marked ``celery_worker`` start a real worker and keep the configured (non-eager) behaviour.
    """
    from scoutsite import celery_app

    if request.node.get_closest_marker("celery_worker"):
        yield
        return
    saved = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = saved
