"""/mcp while Postgres gives the gateway no connection (out of slots): a 503 with Retry-After and a JSON-RPC error
saying nothing was carried out, not a bare 500 (mcpgateway.guards.DatabaseBusyGuard); answered normally again
once connections are to be had. Inside a session already open, each request says the same: the meta-tools as a
``service_busy`` tool result, ``tools/list`` as that JSON-RPC error.

Real parts: the live gateway over HTTP, and a real refusal (tests/db_refusal.py: its connections log in as a role
allowed none)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from django.db import connection

from mcpgateway.db import orm_threads_stop
from tests.db_refusal import connections_refused

from .conftest import gateway_db, make_token, make_user, rpc_result
from .test_stateful_sessions import HELLO, LIST

pytestmark = [
    gateway_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="Postgres connection slots (run with DATABASE_URL)"),
]
HEADERS = {"Accept": "application/json, text/event-stream"}
SEARCH_PARAMS = {"name": "tool_search", "arguments": {"query": "x"}}
SEARCH = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": SEARCH_PARAMS}


def _post(url: str, token: str, body: dict, session: str | None = None) -> httpx.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {token}", **({"Mcp-Session-Id": session} if session else {})}
    return httpx.post(f"{url}/mcp", json=body, headers=headers, timeout=60)


@contextmanager
def _gateway_refused() -> Iterator[None]:
    """The gateway's open connections closed (its ORM threads stopped) and its next ones refused, until the end."""
    with connections_refused():
        orm_threads_stop()
        try:
            yield
        finally:
            orm_threads_stop()


def test_no_connection_to_be_had_is_a_503_to_retry(gateway):
    token = make_token(make_user("gw_member"))  # never used: the gateway must look it up in the database
    with _gateway_refused():
        refused = _post(gateway.url, token, HELLO)
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "5"
    assert "busy right now" in refused.json()["error"]["message"]
    assert "no tool was called" in refused.json()["error"]["message"]
    assert _post(gateway.url, token, HELLO).status_code == 200


def _busy(response: httpx.Response) -> bool:
    """Whether ``response`` says the database is busy and to try again: a 503 (the token could not be confirmed) or
    the request's own answer (a JSON-RPC error, or a meta-tool's ``service_busy`` result), never a bare 500."""
    assert response.status_code in (200, 503), (response.status_code, response.text)
    answer = rpc_result(response)
    if "error" in answer:
        return answer["error"]["data"] == {"service_busy": True} and "busy right now" in answer["error"]["message"]
    return answer["result"]["structuredContent"].get("service_busy") is True


def test_inside_an_open_session_tools_list_and_the_meta_tools_say_busy(gateway):
    """A session opened before the outage: its ``tools/list`` and ``tool_search`` were a bare 500 (the token's
    confirmation, refused a connection, raised in the session's task, where no guard caught it), and ``tools/list``
    answered "Internal server error" when only its listing met the outage."""
    token = make_token(make_user("gw_member"))
    opened = _post(gateway.url, token, HELLO)
    assert opened.status_code == 200, opened.text
    session = opened.headers.get("mcp-session-id")
    assert _post(gateway.url, token, LIST, session).status_code == 200  # the token is now in the gateway's cache
    with _gateway_refused():
        listed = _post(gateway.url, token, LIST, session)
        searched = _post(gateway.url, token, SEARCH, session)
    assert _busy(listed) and _busy(searched)
    assert "tools" in rpc_result(_post(gateway.url, token, LIST, session))["result"]
