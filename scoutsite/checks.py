"""Django system checks on the configuration (``manage.py check``, ``migrate``, every command, and the gateway's
start and the Celery worker's: scout_check_errors)."""

import os
from typing import Any

from django.conf import settings
from django.core.checks import Error, register


def celery_env_overrides() -> dict[str, str]:
    """The Celery variables set in the environment: Celery reads them ahead of its configuration
    (celery.app.utils.Settings), so one set there silently wins over REDIS_URL, which the gateway's cache, locks and
    visibility invalidations use (the test suite drops them: tests/conftest.py)."""
    found = {
        "CELERY_BROKER_URL": os.environ.get("CELERY_BROKER_URL", ""),
        "CELERY_BROKER_READ_URL": os.environ.get("CELERY_BROKER_READ_URL", ""),
        "CELERY_BROKER_WRITE_URL": os.environ.get("CELERY_BROKER_WRITE_URL", ""),
        "CELERY_RESULT_BACKEND": os.environ.get("CELERY_RESULT_BACKEND", ""),
    }
    return {name: value for name, value in found.items() if value}


def _same_redis(one: str, other: str) -> bool:
    """Whether two Redis URLs name one server and database (``redis://h:6379`` is ``redis://h:6379/0``)."""
    if one == other:
        return True
    from redis.connection import parse_url

    try:
        return {"db": 0, "port": 6379, **parse_url(one)} == {"db": 0, "port": 6379, **parse_url(other)}
    except ValueError:
        return False


@register("scout")
def celery_broker_is_redis_url(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """An error for each Celery variable set in the environment that does not name REDIS_URL's Redis: the gateway
    (REDIS_URL) and the workers (that variable) would talk to different servers, syncs queued where no worker
    listens and visibility invalidations lost. Values are never shown: a Redis URL may hold a password."""
    redis_url = settings.REDIS_URL
    errors = []
    for name, value in celery_env_overrides().items():
        if redis_url and _same_redis(value, redis_url):
            continue
        differs = "differs from REDIS_URL" if redis_url else "is set while REDIS_URL is not"
        errors.append(
            Error(
                f"{name} {differs}: Celery reads {name} from the environment ahead of REDIS_URL, so the workers "
                "and the gateway would use different Redis servers (syncs queued where no worker listens, "
                "visibility changes not passed on).",
                hint=f"Unset {name} (Scout's broker and results are REDIS_URL's), or set it to REDIS_URL's URL.",
                id="scout.E001",
            )
        )
    return errors


def scout_check_errors() -> list[str]:
    """Scout's own checks that failed, as lines to show: uvicorn and the Celery worker run no system checks, so the
    gateway's start (scoutsite/asgi.py) and the worker's (scoutsite/celery.py) ask for these themselves."""
    from django.core.checks import run_checks

    return [f"{m.id}: {m.msg} HINT: {m.hint}" for m in run_checks(tags=["scout"]) if m.is_serious()]
