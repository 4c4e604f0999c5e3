"""Postgres connections run without JIT compilation (SCOUT_DB_JIT to turn it back on): the admin's lists price
their per-row visibility subqueries high, and Postgres spent 4-6 s compiling the audit trail's search at a year's
volume (bench/admin_volume.py) for a query that ran in 0.2 s, past the web process's 2 s statement timeout. And
they start in Django's time zone, so Django sends no SET TIME ZONE when it opens one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
PRINT_OPTIONS = "import django; django.setup(); from django.conf import settings; print(json.dumps(settings.DATABASES['default'].get('OPTIONS', {})))"  # noqa: E501


def _options(**env: str) -> str:
    environment = {**os.environ, "DEBUG": "1", "SECRET_KEY": "x", "DJANGO_SETTINGS_MODULE": "scoutsite.settings"}
    environment.update(DATABASE_URL="postgres://scout@127.0.0.1:5432/scout", **env)
    answer = subprocess.run(
        [sys.executable, "-c", f"import json; {PRINT_OPTIONS}"],
        cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(answer.stdout.strip().splitlines()[-1]).get("options", "")


def test_postgres_connections_run_without_jit_unless_asked():
    assert _options(SCOUT_DB_SERVING="").split() == ["-c", "jit=off", "-c", "TimeZone=UTC"]  # workers and commands
    serving = _options(SCOUT_DB_SERVING="1")
    assert "-c jit=off" in serving and "-c statement_timeout=2000" in serving and "-c lock_timeout=2000" in serving
    assert "jit" not in _options(SCOUT_DB_SERVING="1", SCOUT_DB_JIT="1")


@pytest.mark.django_db
def test_the_suites_postgres_connection_has_jit_off():
    if connection.vendor != "postgresql":
        pytest.skip("Postgres only (DATABASE_URL)")
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"


@pytest.mark.django_db
def test_a_new_postgres_connection_starts_in_djangos_time_zone():
    """Issue 9 (speed11): on this Debian server (timezone Etc/UTC) Django ran SELECT set_config('TimeZone', 'UTC')
    on every connection it opened, a round trip before the first query; the connection options now name it."""
    if connection.vendor != "postgresql":
        pytest.skip("Postgres only (DATABASE_URL)")
    raw = connection.get_new_connection(connection.get_connection_params())  # before Django's own setup
    try:
        assert raw.info.parameter_status("TimeZone") == connection.timezone_name
    finally:
        raw.close()
