"""Faults of a Streamable HTTP upstream through the gateway's pool. F2: it crashes mid-call, after its answer's
headers went out (the TCP connection reset): the call fails as one that may have run, is never sent again, and the
server's next call is answered on a new session. F3: it answers 503: no call is sent twice, and the breaker stops
sending once it opens."""

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
    stream and then a reset, as a process dying mid-answer, and one for "unavailable" with a 503; ``calls`` records
    every tools/call it gets."""
    calls: list[str] = []
    with serve_http() as real:

        class Resetting(SessionFront):
            real_url = real.url

            def answered(self, message: dict) -> bool:
                if message.get("method") != "tools/call":
                    return False
                calls.append(json.dumps(message["params"]["arguments"], sort_keys=True))
                if message["params"]["arguments"].get("name") == "unavailable":
                    self.empty(503)
                    return True
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
                self.empty(405)

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


@pytest.mark.django_db(transaction=True)
def test_5xx_answers_are_never_retried_and_once_the_breaker_opens_nothing_is_sent(resetting_upstream, settings):
    """No call is sent twice (no extra load at all, where the catalog allows 20 % for retries of idempotent calls):
    each 503 is one request, and after SCOUT_UPSTREAM_BREAKER_FAILURES of them the calls fail fast, unsent."""
    url, calls = resetting_upstream
    settings.SCOUT_UPSTREAM_BREAKER_FAILURES = 3
    settings.SCOUT_UPSTREAM_BREAKER_COOLDOWN = 600  # no probe during the test
    server = Server.objects.create(slug="failing", name="Failing", transport="http", url=url)

    async def main() -> list[tuple[str, str]]:
        failures = []
        pool = UpstreamPool()
        async with pool.running():
            for _ in range(8):
                with pytest.raises(UpstreamCallError) as failed:
                    await pool.call(server=server, tool_name="greet", arguments={"name": "unavailable"}, timeout=20)
                failures.append((failed.value.kind, failed.value.outcome))
        return failures

    failures = anyio.run(main)
    assert calls == ['{"name": "unavailable"}'] * 3  # one request per call, none after the breaker opened
    assert failures[3:] == [("circuit_open", "error")] * 5, failures
    assert all(kind != "circuit_open" for kind, _ in failures[:3]), failures
