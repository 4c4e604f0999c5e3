"""T13: a Streamable HTTP upstream cannot make the gateway reopen its event stream in a loop. The SDK opens the
session's event stream again whenever the server closes it, after the delay the server's last SSE ``retry`` field
gave, which may be 0: a server answering every GET with ``retry: 0`` and an end had the gateway send hundreds of GETs
a second for as long as the session stayed warm (376 in 4 s here, with the machine busy). The pinned transport now
spaces a session's GETs by ``GET_INTERVAL_SECONDS``."""

from collections.abc import Iterator

import anyio
import pytest

from catalog import upstream
from catalog.models import Server
from tests.catalog.servers.http_mcp import SessionFront, serve_front, serve_http


@pytest.fixture
def reopening_upstream(loopback_upstreams) -> Iterator[tuple[str, list[str]]]:
    """A real MCP server behind a front that speaks 2025-11-25 (it answers ``server/discover`` as unknown) and answers
    every GET (the session's event stream) itself with ``retry: 0`` and an end, recording each; everything else
    reaches the real server."""
    gets: list[str] = []
    with serve_http() as real:

        class Reopening(SessionFront):
            real_url = real.url

            def do_GET(self):  # noqa: N802 - http.server's name
                gets.append(self.headers.get("Mcp-Session-Id", ""))
                self.answer("text/event-stream", "retry: 0\n\n")

        with serve_front(Reopening) as url:
            yield url, gets


HOLD_SECONDS = 2.0


def test_a_server_that_ends_its_event_stream_at_once_is_not_reopened_in_a_loop(reopening_upstream):
    url, gets = reopening_upstream
    server = Server(slug="reopen", name="Reopen", transport="http", url=url)

    async def hold() -> str:
        async with upstream.open_session(server) as session:
            answer = await session.call_tool("greet", {"name": "Ann"}, 30)
            await anyio.sleep(HOLD_SECONDS)  # the session stays warm, as the gateway keeps it
            return answer.content[0].text

    assert anyio.run(hold) == "Hello, Ann!"
    assert gets and len(set(gets)) == 1  # the session's own event stream, opened again and again
    # At most one GET per GET_INTERVAL_SECONDS: a slower machine only sends fewer. Without the spacing: hundreds.
    assert len(gets) <= HOLD_SECONDS / upstream.GET_INTERVAL_SECONDS + 2, len(gets)
