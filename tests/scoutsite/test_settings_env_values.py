"""A mistyped switch or network list stops Scout at start-up, naming the variable (opsux7): before, a switch not
spelt true was off without a word (SCOUT_SECURE_COOKIES=ture: staff cookies over plain http), and a bad network in
SCOUT_METRICS_ALLOWED_NETWORKS started fine, then answered every /metrics scrape with a 500. A malformed REDIS_URL
(``redis//nohost``) passed ``manage.py check`` and failed at the first cache call or task (opsux8)."""

import os
import subprocess
import sys

import pytest

from tests.mcpgateway.conftest import REPO


def _settings_loaded(**env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "SECRET_KEY": "x", **env}
    return subprocess.run(
        [sys.executable, "-c", "import scoutsite.settings as s; print(s.SESSION_COOKIE_SECURE, s.DEBUG)"],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("SCOUT_SECURE_COOKIES", "ture", "SCOUT_SECURE_COOKIES must be one of 1, true, yes, on or 0, false, no, off"),
        ("SCOUT_METRICS_ALLOWED_NETWORKS", "127.0.0.1/32,10.0.0.0/33", "'10.0.0.0/33' is not an IP network"),
        ("REDIS_URL", "redis//nohost", "REDIS_URL is not a Redis URL: Redis URL must specify one of the following"),
        ("REDIS_URL", "redis://:hunter2@127.0.0.1:6379/eleven", "REDIS_URL: the database after the host must be"),
    ],
)
def test_a_mistyped_value_stops_the_start_naming_the_variable(name, value, said):
    loaded = _settings_loaded(**{name: value})
    assert loaded.returncode != 0, loaded.stdout
    assert "ImproperlyConfigured" in loaded.stderr and said in loaded.stderr.splitlines()[-1]
    assert "hunter2" not in loaded.stderr  # a Redis URL's password is never echoed


def test_every_spelling_of_a_switch_is_read():
    networks = "::1, 10.0.0.0/8"
    redis = "redis://:pw@127.0.0.1:6379/11"
    loaded = _settings_loaded(
        SCOUT_SECURE_COOKIES=" Yes ", DEBUG="OFF", SCOUT_METRICS_ALLOWED_NETWORKS=networks, REDIS_URL=redis
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["True", "False"]
