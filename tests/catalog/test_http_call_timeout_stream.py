"""A call to a Streamable HTTP upstream that timed out leaves no event stream behind. The SDK resumes a call's
event stream (a GET with Last-Event-ID, one a second with the spacing of ``GET_INTERVAL_SECONDS``) until the answer
comes: an upstream that never answers, but ends every stream after one event, had the gateway resume it for as long
as the session stayed warm, long after the call had timed out. The pool now closes the session of a timed-out call."""

from collections.abc import Iterator

import anyio
import pytest

from catalog import upstream
from catalog.models import Server
from mcpgateway.upstreams import UpstreamCallError, UpstreamPool
from tests.catalog.servers.http_mcp import SessionFront, serve_front, serve_http

HOLD_SECONDS = 4 * upstream.GET_INTERVAL_SECONDS


@pytest.fixture
def never_answering_upstream(loopback_upstreams) -> Iterator[tuple[str, list[str]]]:
    """A real MCP server behind a front that speaks 2025-11-25 and never answers a tools/call: its POST and every
    resumption of its stream (a GET with Last-Event-ID, recorded) send one event with an id and end."""
    resumed: list[str] = []
    with serve_http() as real:

        class NeverAnswering(SessionFront):
            real_url = real.url

            def answered(self, message: dict) -> bool:
                if message.get("method") != "tools/call":
                    return False
                self.answer("text/event-stream", "id: call-1\ndata: \n\n")
                return True

            def do_GET(self):  # noqa: N802 - http.server's name
                if self.headers.get("Last-Event-ID"):
                    resumed.append(self.headers["Last-Event-ID"])
                    self.answer("text/event-stream", f"id: call-{len(resumed) + 1}\ndata: \n\n")
                else:
                    self.answer("text/event-stream", "retry: 60000\n\n")

        with serve_front(NeverAnswering) as url:
            yield url, resumed


@pytest.mark.django_db(transaction=True)
def test_a_timed_out_calls_event_stream_is_not_resumed_after_the_timeout(never_answering_upstream):
    url, resumed = never_answering_upstream
    server = Server.objects.create(slug="silent", name="Silent", transport="http", url=url)

    async def main() -> tuple[str, int, int]:
        pool = UpstreamPool()
        async with pool.running():
            with pytest.raises(UpstreamCallError) as failed:
                await pool.call(server=server, tool_name="greet", arguments={"name": "Ann"}, timeout=1.5)
            at_timeout = len(resumed)
            await anyio.sleep(HOLD_SECONDS)  # the pool stays up, as the gateway's does
            return failed.value.kind, at_timeout, len(resumed)

    kind, at_timeout, after = anyio.run(main)
    assert kind == "timeout"
    assert at_timeout >= 1, "the control: the SDK resumed the call's stream while the call waited"
    # At most a resumption already under way when the call timed out; before, one more every GET_INTERVAL_SECONDS.
    assert after <= at_timeout + 1, (at_timeout, after)
