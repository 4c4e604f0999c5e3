"""For race tests on Postgres: wait until sessions are blocked on a lock the test holds (both racers inside)."""

import time

from django.db import connection


def sessions_waiting_on_locks() -> int:
    """How many sessions of the test database wait on a lock now."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # inside a transaction the view is read once otherwise
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0]


def until_sessions_wait_on_locks(count: int, what: str, limit: float = 30.0) -> None:
    """Poll until ``count`` sessions wait on a lock (a bound on waiting, not a speed assertion)."""
    deadline = time.monotonic() + limit
    while sessions_waiting_on_locks() < count:
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.05)
