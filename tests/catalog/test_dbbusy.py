"""A database that gives no connection now is "busy, try again" (catalog/dbbusy.py), not a bug's 500: Postgres out of
connection slots for the role, the error read from a real refused connection."""

from __future__ import annotations

import uuid

import pytest
from django.db import OperationalError, connection
from django.db.utils import ConnectionHandler

from catalog.dbbusy import database_busy

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the role committed: another connection logs in with it
    pytest.mark.skipif(connection.vendor != "postgresql", reason="Postgres connection slots (run with DATABASE_URL)"),
]


def _refused(role: str) -> OperationalError:
    settings = {**connection.settings_dict, "USER": role, "PASSWORD": ""}
    other = ConnectionHandler({"default": settings})["default"]
    try:
        other.ensure_connection()
    except OperationalError as exc:
        return exc
    finally:
        other.close()
    pytest.fail(f"{role} was given a connection")


def test_no_connection_slot_left_is_busy_not_a_bug():
    role = f"scout_full_{uuid.uuid4().hex[:8]}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 0')
    try:
        exc = _refused(role)
        assert "too many connections" in str(exc)
        assert database_busy(exc)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP ROLE "{role}"')
