"""A real database outage for one block: this process's new connections log in as a Postgres role allowed none; or
the database refusing one kind of write (a trigger), as a full disk or a revoked grant would."""

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


@contextmanager
def writes_refused(name: str, event: str, message: str) -> Iterator[None]:
    """Within the block the database refuses ``event`` (SQL, e.g. ``INSERT ON catalog_tool`` or ``UPDATE OF
    last_synced_at ON catalog_server``) with ``message``, through a trigger called ``name``, dropped on the way out (a
    committed test leaves the schema as it is). Postgres and SQLite."""
    table = event.rsplit(" ON ", 1)[1]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            raising = f"BEGIN RAISE EXCEPTION '{message}'; END"
            cursor.execute(f"CREATE FUNCTION {name}() RETURNS trigger AS $$ {raising} $$ LANGUAGE plpgsql")
            cursor.execute(f"CREATE TRIGGER {name} BEFORE {event} FOR EACH ROW EXECUTE FUNCTION {name}()")
        else:
            cursor.execute(f"CREATE TRIGGER {name} BEFORE {event} BEGIN SELECT RAISE(ABORT, '{message}'); END")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(f"DROP TRIGGER {name} ON {table}")
                cursor.execute(f"DROP FUNCTION {name}()")
            else:
                cursor.execute(f"DROP TRIGGER {name}")
