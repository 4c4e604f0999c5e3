"""Database connections kept by a long-lived thread between pieces of work (the gateway's ORM threads, the
write-behind thread).

Django closes a connection at the end of each request (CONN_MAX_AGE, default 0 here), but these threads serve
no request: opening a new connection for every piece of work cost ~2 ms of CPU on SQLite and ~18 ms of wall
time on Postgres (issue 9), and on Postgres a new server process each time. A kept connection is closed at
once when the work left it in a transaction or broken, after SCOUT_MCP_DB_CONN_MAX_AGE seconds, and when the
thread stops (``connections_close``). One connection per thread and alias: the threads are few.
"""

from __future__ import annotations

import threading
import time

from django.conf import settings
from django.db import connections

IDLE_CHECK_SECONDS = 5.0  # a connection idle longer is pinged before reuse (the database may have restarted)

_local = threading.local()


def connections_ready() -> None:
    """Before a piece of work: close a kept connection that went bad while idle, so the work reconnects."""
    now = time.monotonic()
    if now - getattr(_local, "last_used", now) < IDLE_CHECK_SECONDS:
        return
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.is_usable():
            connection.close()


def connections_checked() -> None:
    """After a piece of work: close this thread's connections that must not serve the next one: left in a
    transaction, broken, or opened more than SCOUT_MCP_DB_CONN_MAX_AGE seconds ago."""
    now = _local.last_used = time.monotonic()
    opened: dict[str, float] = _local.__dict__.setdefault("opened", {})
    for connection in connections.all(initialized_only=True):
        if connection.connection is None:
            opened.pop(connection.alias, None)
            continue
        if (
            connection.in_atomic_block
            or connection.get_autocommit() != connection.settings_dict["AUTOCOMMIT"]
            or (connection.errors_occurred and not connection.is_usable())
            or now - opened.setdefault(connection.alias, now) >= settings.SCOUT_MCP_DB_CONN_MAX_AGE
        ):
            connection.close()
            opened.pop(connection.alias, None)
        else:
            connection.errors_occurred = False


def connections_close() -> None:
    """Close every connection this thread holds (it stops, or will be idle for long)."""
    for connection in connections.all(initialized_only=True):
        connection.close()
    _local.__dict__.pop("opened", None)


def connections_kept_for() -> float | None:
    """Seconds until this thread's oldest kept connection is SCOUT_MCP_DB_CONN_MAX_AGE old (None: it holds none)."""
    opened: dict[str, float] = _local.__dict__.get("opened", {})
    now = time.monotonic()
    held = [opened.get(c.alias, now) for c in connections.all(initialized_only=True) if c.connection is not None]
    return min(held) + settings.SCOUT_MCP_DB_CONN_MAX_AGE - now if held else None


def connections_held() -> bool:
    """Whether this thread holds an open database connection."""
    return any(connection.connection is not None for connection in connections.all(initialized_only=True))
