"""The REST bound (SCOUT_API_MAX_CONCURRENT) is per process: N uvicorn workers and replicas hold up to N times it on
Postgres. A serving process says at start, in its log, how many connections it may hold against the server's
``max_connections`` and how many such processes fit, warning when fewer than two do (opsux5)."""

import logging
from pathlib import Path

import pytest

from scoutsite.middleware import serving_connections_text
from tests.mcpgateway.conftest import POSTGRES
from tests.mcpgateway.test_database_lock import ORM_THREADS, _own_postgres_gateway, _wait_for

on_postgres = pytest.mark.skipif(
    not POSTGRES, reason="max_connections is Postgres's: runs when DATABASE_URL is Postgres"
)


def test_the_default_bound_fits_two_processes_in_postgres_default_connections():
    level, text = serving_connections_text(100, 32, 6)
    assert level == logging.INFO
    assert "up to 38 Postgres connections" in text and "allows 100 (max_connections)" in text
    assert "so 2 such process(es) fit, every uvicorn worker and replica counting" in text


@pytest.mark.parametrize(("api_limit", "expected"), [(60, "so 1 such process(es) fit"), (0, "not bounded")])
def test_a_bound_that_leaves_room_for_fewer_than_two_processes_is_a_warning(api_limit, expected):
    level, text = serving_connections_text(100, api_limit, 6)
    assert level == logging.WARNING and expected in text and "SCOUT_API_MAX_CONCURRENT" in text


@pytest.mark.slow
@on_postgres
def test_a_serving_process_on_postgres_logs_its_share_of_max_connections(tmp_path: Path):
    import psycopg

    with _own_postgres_gateway(tmp_path, SCOUT_API_MAX_CONCURRENT="500") as (gateway, url):
        with psycopg.connect(url) as conn:
            max_connections = int(conn.execute("SHOW max_connections").fetchone()[0])
        _, expected = serving_connections_text(max_connections, 500, ORM_THREADS)
        _wait_for(lambda: "Application startup complete" in gateway.stderr.read_text(), "the gateway started")
        log = gateway.stderr.read_text()
        assert f"WARNING scout.serving {expected}" in log, log[-3000:]
