"""The run command's protocol ends a kept-alive connection once it reaches SCOUT_HTTP_CONNECTION_MAX_AGE: that
request's response says ``Connection: close`` and the client's next request comes on a new connection, which
any uvicorn worker may accept (issue 9: a c=16 client's connections all stayed on one of two workers). Younger
connections, and every connection with the setting at 0, are kept as before."""

from __future__ import annotations

import asyncio
import socket

import httpx
import uvicorn

from scoutsite.serving import PROTOCOL


async def _app(scope, receive, send) -> None:
    """Answers with the client's port: one port per connection."""
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": str(scope["client"][1]).encode()})


def _three_requests() -> list[tuple[str, str | None]]:
    """(client port, Connection header) of three requests sent one after another by one keep-alive client."""

    async def scenario() -> list[tuple[str, str | None]]:
        sock = socket.socket(family=socket.AF_INET)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(_app, http=PROTOCOL, lifespan="off", log_level="warning"))
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        answers = []
        async with httpx.AsyncClient() as client:
            for _ in range(3):
                response = await client.get(f"http://127.0.0.1:{port}/")
                answers.append((response.text, response.headers.get("connection")))
        server.should_exit = True
        await serving
        return answers

    return asyncio.run(scenario())


def test_a_connection_past_its_age_is_closed_after_its_response_and_the_next_request_reconnects(settings):
    settings.SCOUT_HTTP_CONNECTION_MAX_AGE = 1e-9  # every connection is past it by the time its request is read
    answers = _three_requests()
    assert [header for _, header in answers] == ["close"] * 3
    assert len({port for port, _ in answers}) == 3, answers  # each request on a connection of its own


def test_younger_connections_are_kept_alive(settings):
    settings.SCOUT_HTTP_CONNECTION_MAX_AGE = 3600.0
    answers = _three_requests()
    assert [header for _, header in answers] == [None] * 3
    assert len({port for port, _ in answers}) == 1, answers


def test_zero_keeps_every_connection_alive(settings):
    settings.SCOUT_HTTP_CONNECTION_MAX_AGE = 0
    answers = _three_requests()
    assert [header for _, header in answers] == [None] * 3
    assert len({port for port, _ in answers}) == 1, answers
