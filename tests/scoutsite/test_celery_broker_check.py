"""A Celery broker or result store set in the environment other than REDIS_URL's stops Scout at start (scout.E001):
Celery reads CELERY_BROKER_URL and its kin ahead of the settings, so the gateway (REDIS_URL: cache, locks,
visibility invalidations) and the workers talked to different Redis servers, syncs queued where no worker listened.
``manage.py check`` (and migrate, every command) says so, and the gateway and the worker refuse to start."""

import os
import subprocess
import sys

import pytest

from tests.mcpgateway.conftest import REPO

REDIS = "redis://:hunter2@127.0.0.1:1/3"  # never connected to: only the configuration is read


def _run(command: list[str], **env: str) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "TESTING")}
    environment |= {"DEBUG": "1", "SECRET_KEY": "x", "REDIS_URL": REDIS, **env}
    return subprocess.run(command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=120)


def _check(**env: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, "manage.py", "check"], **env)


@pytest.mark.parametrize("name", ["CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"])
def test_a_celery_url_other_than_redis_url_fails_the_check_naming_both(name):
    checked = _check(**{name: "redis://:hunter2@127.0.0.1:1/4"})
    assert checked.returncode != 0, checked.stdout
    assert f"(scout.E001) {name} differs from REDIS_URL" in checked.stderr, checked.stderr
    assert f"HINT: Unset {name}" in checked.stderr and "set it to REDIS_URL's URL" in checked.stderr
    assert "hunter2" not in checked.stderr + checked.stdout  # a Redis URL's password is never echoed


def test_a_celery_broker_without_redis_url_fails_the_check():
    checked = _check(REDIS_URL="", CELERY_BROKER_URL="redis://127.0.0.1:1/4")
    assert "(scout.E001) CELERY_BROKER_URL is set while REDIS_URL is not" in checked.stderr, checked.stderr


def test_a_celery_url_naming_redis_urls_redis_passes():
    # The same server and database, spelt otherwise (db 0 and port 6379 are Redis's defaults).
    checked = _check(
        REDIS_URL="redis://127.0.0.1",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/0",
        CELERY_RESULT_BACKEND="redis://127.0.0.1",
    )
    assert checked.returncode == 0 and "no issues" in checked.stdout, checked.stderr


def test_the_gateway_and_the_worker_refuse_to_start():
    other = {"CELERY_BROKER_URL": "redis://127.0.0.1:1/4"}
    bin_dir = os.path.dirname(sys.executable)
    gateway = _run([f"{bin_dir}/uvicorn", "scoutsite.asgi:application", "--port", "0"], **other)
    worker = _run([f"{bin_dir}/celery", "-A", "scoutsite", "worker", "--pool", "solo"], **other)
    for started in (gateway, worker):
        assert started.returncode != 0 and "scout.E001: CELERY_BROKER_URL differs from REDIS_URL" in started.stderr
