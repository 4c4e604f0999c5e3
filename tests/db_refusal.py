"""A real database outage for one block: this process's new connections log in as a Postgres role allowed none."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, connections


@contextmanager
def connections_refused() -> Iterator[None]:
    """Within the block every new connection of this process is refused by Postgres ("too many connections for role");
    the current one is closed on the way in and out. Postgres only; needs a transactional test (it closes the
    connection a test transaction would hold)."""
    role = f"scout_none_{uuid.uuid4().hex[:8]}"
    shared = connections.settings["default"]  # every connection of this process logs in with this dict
    user = shared["USER"]
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 0')
    try:
        shared["USER"] = role
        connection.close()
        yield
    finally:
        shared["USER"] = user
        connection.close()
        with connection.cursor() as cursor:
            cursor.execute(f'DROP ROLE "{role}"')
