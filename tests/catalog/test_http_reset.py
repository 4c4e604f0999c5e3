"""F2 over HTTP: a Streamable HTTP upstream that crashes mid-call, after its answer's headers went out (the TCP
connection reset). The call fails as one that may have run, is never sent again, and the server's next call is
answered on a new session."""

import json
import socket
from collections.abc import Iterator

import anyio
import pytest

from catalog.models import Server
from mcpgateway.upstreams import UpstreamCallError, UpstreamPool
from tests.catalog.servers.http_mcp import SessionFront, serve_front, serve_http


@pytest.fixture
def resetting_upstream(loopback_upstreams) -> Iterator[tuple[str, list[str]]]:
    """A real MCP server behind a front that answers a call of ``greet`` for "crash" with the headers of an event
    stream and then a reset, as a process dying mid-answer; ``calls`` records every tools/call it gets."""
    calls: list[str] = []
    with serve_http() as real:

        class Resetting(SessionFront):
            real_url = real.url

            def answered(self, message: dict) -> bool:
                if message.get("method") != "tools/call":
                    return False
                calls.append(json.dumps(message["params"]["arguments"], sort_keys=True))
                if message["params"]["arguments"].get("name") != "crash":
                    return False
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.flush()
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                self.connection.close()  # a reset: no body, no end of the stream
                self.close_connection = True
                return True

            def do_GET(self):  # noqa: N802 - no standalone event stream
                self.send_response(405)
                self.send_header("Content-Length", "0")
                self.end_headers()

        with serve_front(Resetting) as url:
            yield url, calls


@pytest.mark.django_db(transaction=True)
def test_a_reset_after_the_headers_fails_the_call_as_unknown_unretried_and_the_next_call_is_answered(
    resetting_upstream,
):
    url, calls = resetting_upstream
    server = Server.objects.create(slug="resetting", name="Resetting", transport="http", url=url)

    async def main() -> tuple[UpstreamCallError, str]:
        pool = UpstreamPool()
        async with pool.running():
            with pytest.raises(UpstreamCallError) as failed:
                await pool.call(server=server, tool_name="greet", arguments={"name": "crash"}, timeout=20)
            after = await pool.call(server=server, tool_name="greet", arguments={"name": "Ann"}, timeout=20)
            return failed.value, after.content[0].text

    failed, after = anyio.run(main)
    assert failed.outcome == "unknown", failed  # it may have run: never reported as not sent
    assert failed.kind == "closed", failed  # the reset ended it, not the call's timeout
    assert after == "Hello, Ann!"
    assert calls == ['{"name": "crash"}', '{"name": "Ann"}']  # sent once, never retried
