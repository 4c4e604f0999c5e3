"""Sessions of a stateful gateway (``SCOUT_MCP_STATELESS=0``; 2025-11-25's ``Mcp-Session-Id``) are bound to the
token that opened them (T12: a session id is a handle)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import asynccontextmanager

import httpx
import pytest
from starlette.applications import Starlette

from .conftest import ThreadedUvicorn, gateway_db, make_token, make_user

pytestmark = [gateway_db, pytest.mark.slow]
LEGACY_VERSION = "2025-11-25"


@pytest.fixture
def stateful_gateway(transactional_db, settings, django_db_blocker) -> Iterator[ThreadedUvicorn]:
    from django.db import connections

    from mcpgateway.server import build_gateway_app, gateway_lifespan

    settings.SCOUT_MCP_STATELESS = False
    settings.SCOUT_MCP_WARM_UP = False
    mcp_server, routes = build_gateway_app()

    @asynccontextmanager
    async def lifespan(app: Starlette):
        async with gateway_lifespan(mcp_server):
            yield

    live = ThreadedUvicorn(Starlette(routes=routes, lifespan=lifespan)).start()
    settings.SCOUT_PUBLIC_URL = live.url
    yield live
    with django_db_blocker.unblock():
        live.run_sync_in_server(connections.close_all)
    live.stop()


def _post(gateway: ThreadedUvicorn, token: str, body: dict, session: str | None = None) -> httpx.Response:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": LEGACY_VERSION,
        "Authorization": f"Bearer {token}",
    }
    if session:
        headers["Mcp-Session-Id"] = session
    return httpx.post(f"{gateway.url}/mcp", json=body, headers=headers, timeout=30)


HELLO = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def _open_session(gateway: ThreadedUvicorn, token: str) -> str:
    opened = _post(gateway, token, HELLO)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    initialized = _post(gateway, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    assert initialized.status_code == 202, initialized.text
    return session


LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}


def test_a_session_answers_only_the_token_that_opened_it(stateful_gateway):
    alice = make_user("sess_alice")
    token_a, other_token_of_a, token_b = make_token(alice), make_token(alice), make_token(make_user("sess_bob"))
    session = _open_session(stateful_gateway, token_a)
    assert _post(stateful_gateway, token_a, LIST, session).status_code == 200
    unknown = _post(stateful_gateway, token_b, LIST, "0" * 32)
    for token in (token_b, other_token_of_a):
        refused = _post(stateful_gateway, token, LIST, session)
        assert (refused.status_code, refused.text) == (unknown.status_code, unknown.text) == (404, refused.text)
        ended = httpx.delete(
            f"{stateful_gateway.url}/mcp",
            headers={
                "Authorization": f"Bearer {token}",
                "Mcp-Session-Id": session,
                "MCP-Protocol-Version": LEGACY_VERSION,
            },
            timeout=30,
        )
        assert ended.status_code == 404
    assert _post(stateful_gateway, token_a, LIST, session).status_code == 200  # still A's, still open


def test_one_person_keeps_at_most_their_share_of_open_sessions_and_others_still_open_theirs(stateful_gateway, settings):
    """T13: the SDK keeps at most 10,000 sessions for everyone (idle ones closed after 30 minutes): one person's
    tokens opening sessions in a loop filled them, and every other person's new session was refused until theirs
    idled out."""
    settings.SCOUT_MCP_MAX_SESSIONS_PER_PERSON = 2
    alice = make_user("sess_alice")
    first, second = make_token(alice), make_token(alice)  # two tokens of one person: one share
    sessions = [_open_session(stateful_gateway, first), _open_session(stateful_gateway, second)]

    refused = _post(stateful_gateway, first, HELLO)
    assert refused.status_code == 429 and "mcp-session-id" not in refused.headers
    assert "2 open sessions" in refused.json()["error"]["message"]
    assert _post(stateful_gateway, second, LIST, sessions[1]).status_code == 200  # the open ones go on
    _open_session(stateful_gateway, make_token(make_user("sess_bob")))  # someone else is not counted with them

    ended = httpx.delete(
        f"{stateful_gateway.url}/mcp",
        headers={
            "Authorization": f"Bearer {first}",
            "Mcp-Session-Id": sessions[0],
            "MCP-Protocol-Version": LEGACY_VERSION,
        },
        timeout=30,
    )
    assert ended.status_code == 200
    _open_session(stateful_gateway, first)  # one ended: another may open
