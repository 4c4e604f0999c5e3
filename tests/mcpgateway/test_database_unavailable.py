"""/mcp while Postgres gives the gateway no connection (out of slots): a 503 with Retry-After and a JSON-RPC error
saying nothing was carried out, not a bare 500 (mcpgateway.guards.DatabaseBusyGuard); answered normally again
once connections are to be had.

Real parts: the live gateway over HTTP, and a real refusal: its connections log in as a role allowed none."""

from __future__ import annotations

import uuid

import httpx
import pytest
from django.db import connection, connections

from mcpgateway.db import orm_threads_stop

from .conftest import gateway_db, make_token, make_user
from .test_stateful_sessions import HELLO

pytestmark = [
    gateway_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="Postgres connection slots (run with DATABASE_URL)"),
]


def _hello(url: str, token: str) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    return httpx.post(f"{url}/mcp", json=HELLO, headers=headers, timeout=60)


def test_no_connection_to_be_had_is_a_503_to_retry(gateway):
    token = make_token(make_user("gw_member"))  # never used: the gateway must look it up in the database
    role = f"scout_full_{uuid.uuid4().hex[:8]}"
    shared = connections.settings["default"]  # every connection of this process logs in with this dict
    user = shared["USER"]
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 0')
    try:
        shared["USER"] = role
        orm_threads_stop()  # the gateway's open connections closed: its next ones are refused
        refused = _hello(gateway.url, token)
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "5"
        assert "busy right now" in refused.json()["error"]["message"]
        assert "no tool was called" in refused.json()["error"]["message"]
    finally:
        shared["USER"] = user
        orm_threads_stop()
        with connection.cursor() as cursor:
            cursor.execute(f'DROP ROLE "{role}"')
    assert _hello(gateway.url, token).status_code == 200
