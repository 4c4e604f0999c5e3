"""T13: a Streamable HTTP upstream's answer is read only up to a bound. The SDK reads a JSON answer whole into memory
(``response.aread()``), so a server answering a tool call with an endless JSON body held the gateway's memory
without limit. The pinned transport now cuts a JSON body at ``answer_cap()`` (four times
SCOUT_MCP_MAX_OUTPUT_BYTES, at least 1 MB): the call fails with an error saying so and the connection is closed,
while the server is still sending. An event stream is capped per event (the SDK's ``max_sse_event_size``, given
the same bound)."""

import gzip
import json
import threading
from collections.abc import Iterator

import anyio
import pytest

from catalog import upstream
from catalog.models import Server
from tests.catalog.servers.http_mcp import Front, serve_front, serve_http

CHUNK = b"x" * 65536
FLOOD_BYTES = 64 * 1024 * 1024  # what the server would send; the bound is 1 MB here


@pytest.fixture
def flooding_upstream(loopback_upstreams) -> Iterator[tuple[str, dict]]:
    """A real MCP server behind a front that answers a call of ``flood`` itself with a JSON body of 64 MB written
    64 kB at a time (``flood_sse``: one server-sent event as big); ``sent`` records how much of it was written
    before the reader hung up. Everything else reaches the real server."""
    sent: dict = {}
    with serve_http(json_response=True) as real:

        class Flooding(Front):
            real_url = real.url

            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                message = json.loads(body)
                if message.get("method") == "tools/call" and message["params"]["name"].startswith("flood"):
                    self._flood(message)
                    return
                self.forward(body)

            def _flood(self, message):
                if message["params"]["name"] == "flood_gzip":
                    self._gzip_bomb(message)
                    return
                if message["params"]["name"] == "flood_events":
                    self._small_events(message)
                    return
                if message["params"]["name"].startswith("flood_surrogate"):
                    self._lone_surrogate(message, sse=message["params"]["name"].endswith("_sse"))
                    return
                sse = message["params"]["name"] == "flood_sse"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream" if sse else "application/json")
                self.send_header("Connection", "close")  # the body runs until the connection closes
                self.end_headers()
                head = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"content": []}})
                head = head[: -len("]}}")] + '{"type": "text", "text": "'  # the text is the flood
                written = 0
                try:
                    self.wfile.write((b"event: message\ndata: " if sse else b"") + head.encode())
                    while written < FLOOD_BYTES:
                        self.wfile.write(CHUNK)
                        written += len(CHUNK)
                    self.wfile.write(b'"}]}}' + (b"\n\n" if sse else b""))
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                sent[message["params"]["name"]] = written

            def _lone_surrogate(self, message, sse):
                """An answer whose text holds a lone surrogate escape: JSON no parser of the SDK accepts."""
                result = '{"resultType": "complete", "content": [{"type": "text", "text": "a\\ud800b"}]}'
                raw = f'{{"jsonrpc": "2.0", "id": {json.dumps(message["id"])}, "result": {result}}}'
                body = (f"event: message\ndata: {raw}\n\n" if sse else raw).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream" if sse else "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _small_events(self, message):
                """An event stream of small log notifications, each well under any bound, until ``megabytes`` were
                written (then the answer) or, without it, until the reader hangs up."""
                megabytes = (message["params"].get("arguments") or {}).get("megabytes")
                limit = megabytes * 1024 * 1024 if megabytes else None
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
                written = 0
                try:
                    while limit is None or written < limit:
                        batch = b"".join(
                            b"event: message\ndata: "
                            + json.dumps({**note, "params": {**note["params"], "data": f"tick {written + i}"}}).encode()
                            + b"\n\n"
                            for i in range(256)
                        )
                        self.wfile.write(batch)
                        written += len(batch)
                        sent["flood_events_so_far"] = written
                    done = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
                    answer = {"jsonrpc": "2.0", "id": message["id"], "result": done}
                    self.wfile.write(b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                sent["flood_events"] = written

            def _gzip_bomb(self, message):
                """A JSON answer of 16 MB sent gzip-compressed, some 16 kB on the wire, compressed though never
                asked to be (Content-Encoding is the server's to set)."""
                text = "x" * (16 * 1024 * 1024)
                answer = {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {"content": [{"type": "text", "text": text}]},
                }
                body = gzip.compress(json.dumps(answer).encode())
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                sent[message["params"]["name"]] = len(body)

            def do_GET(self):  # noqa: N802 - no standalone event stream
                self.send_response(405)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_DELETE = do_GET  # noqa: N815

        with serve_front(Flooding) as url:
            yield url, sent


def _call(url: str, tool: str, arguments: dict | None = None):
    server = Server(slug="flood", name="Flood", transport="http", url=url)
    return anyio.run(lambda: upstream.call_tool(server, tool, arguments, timeout=60))


def _wait_for(sent: dict, tool: str) -> int:
    for _ in range(600):
        if tool in sent:
            return sent[tool]
        threading.Event().wait(0.05)
    raise AssertionError(f"the server never finished writing {tool}")


def test_a_huge_json_answer_is_cut_at_the_bound_and_its_connection_closed(flooding_upstream, settings):
    url, sent = flooding_upstream
    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 64 * 1024
    assert upstream.answer_cap() == 1024 * 1024  # never under 1 MB
    with pytest.raises(upstream.UpstreamError) as refused:
        _call(url, "flood")
    assert "over the 1048576-byte limit" in str(refused.value), str(refused.value)
    assert refused.value.kind == "too_large"  # the call ran and answered: the gateway says so (not a protocol error)
    assert str(refused.value).startswith("flood: ")
    # The reader hung up: the server could not write the rest (socket buffers hold a few MB at most).
    assert _wait_for(sent, "flood") < FLOOD_BYTES // 4

    greeting = _call(url, "greet", {"name": "Ann"})  # an ordinary answer passes the bound untouched
    assert greeting.content[0].text == "Hello, Ann!"
    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 4 * 1024 * 1024
    assert upstream.answer_cap() == 16 * 1024 * 1024  # four times the output cap


def test_one_huge_server_sent_event_is_cut_at_the_bound(flooding_upstream, settings):
    url, sent = flooding_upstream
    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 64 * 1024
    with pytest.raises(upstream.UpstreamError):
        _call(url, "flood_sse")
    assert _wait_for(sent, "flood_sse") < FLOOD_BYTES // 4


def test_a_compressed_answer_is_bounded_by_what_it_decompresses_to(flooding_upstream, settings):
    """A 16 MB JSON answer gzip-compressed to some 16 kB passed the 1 MB bound, which counted the bytes on the wire,
    and was decompressed whole into memory (a 1 MB gzip body decompresses to about 1 GB). Scout asks for answers
    uncompressed and refuses one compressed anyway, before decompressing any of it."""
    url, sent = flooding_upstream
    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 64 * 1024
    with pytest.raises(upstream.UpstreamError) as refused:
        _call(url, "flood_gzip")
    assert "compressed" in str(refused.value), str(refused.value)
    assert _wait_for(sent, "flood_gzip") < 1024 * 1024  # it was under the bound on the wire
    assert _call(url, "greet", {"name": "Ann"}).content[0].text == "Hello, Ann!"


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


@pytest.mark.django_db(transaction=True)
def test_an_endless_stream_of_small_events_is_cut_at_the_timeout_in_bounded_memory(flooding_upstream, settings):
    """Each event is small (no per-event bound applies) and the stream never ends: the call fails at its timeout,
    the connection is closed (the server stops writing) and the process's memory stays within the answer bound while
    several times that bound streams in."""
    from mcpgateway.upstreams import UpstreamCallError, UpstreamPool

    url, sent = flooding_upstream
    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 64 * 1024
    cap = upstream.answer_cap()  # 1 MB
    flood = Server.objects.create(slug="flood", name="Flood", transport="http", url=url)
    other = Server.objects.create(slug="other", name="Other", transport="http", url=url)
    peak: list[int] = []

    async def main() -> str:
        pool = UpstreamPool()
        async with pool.running():
            await pool.call(server=other, tool_name="greet", arguments={"name": "Ann"}, timeout=30)  # warm
            base = _rss()
            outcome: dict = {}

            async def flooded() -> None:
                with pytest.raises(UpstreamCallError) as failed:
                    await pool.call(server=flood, tool_name="flood_events", arguments={}, timeout=8)
                outcome["kind"] = failed.value.kind

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(flooded)
                while "kind" not in outcome:
                    peak.append(_rss() - base)
                    await anyio.sleep(0.05)
            return outcome["kind"]

    assert anyio.run(main) == "timeout"
    written = _wait_for(sent, "flood_events")  # the reader hung up: the server stopped writing
    assert written >= 4 * cap, f"the control: only {written} bytes streamed"
    # Flat: some 1 MB from the flood's start to its end here (8 MB streamed); every event kept would be several times
    # what streamed in. The process's RSS counts every thread's allocations (a loaded shuffled run saw 2.6 MB while
    # 17.8 MB streamed), so the bound is half of what streamed in, and at least twice the answer bound.
    assert max(peak) < max(2 * cap, written // 2), f"memory grew by {max(peak)} bytes while {written} streamed in"


@pytest.mark.django_db(transaction=True)
def test_another_servers_call_is_answered_while_one_server_floods_the_pool(flooding_upstream, settings):
    """An endless stream of small events does not hold up the pool: another server's call, sent once the flood is
    under way, is answered while the flood still streams. The flood's own timeout is out of reach here (the test ends
    it), so the answer never races it on a loaded machine (an 8 s timeout did; the cut is the test above)."""
    from mcpgateway.upstreams import UpstreamPool

    url, sent = flooding_upstream
    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 64 * 1024
    cap = upstream.answer_cap()
    flood = Server.objects.create(slug="flood", name="Flood", transport="http", url=url)
    other = Server.objects.create(slug="other", name="Other", transport="http", url=url)  # a session of its own

    async def main() -> tuple[str, bool]:
        pool = UpstreamPool()
        async with pool.running():
            await pool.call(server=other, tool_name="greet", arguments={"name": "Ann"}, timeout=30)  # warm
            ended: list[str] = []

            async def flooded() -> None:
                try:
                    await pool.call(server=flood, tool_name="flood_events", arguments={}, timeout=600)
                finally:
                    ended.append("flood")

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(flooded)
                while sent.get("flood_events_so_far", 0) < cap:  # the flood is under way
                    assert not ended, "the flood ended before it was under way"
                    await anyio.sleep(0.05)
                greeting = await pool.call(server=other, tool_name="greet", arguments={"name": "Bo"}, timeout=60)
                served_during_flood = not ended and "flood_events" not in sent  # the server was still writing
                tasks.cancel_scope.cancel()
        return greeting.content[0].text, served_during_flood

    greeting, served_during_flood = anyio.run(main)
    assert greeting == "Hello, Bo!" and served_during_flood
    _wait_for(sent, "flood_events")  # the pool's end closed the flood's connection: the server stopped writing


@pytest.mark.parametrize("tool", ["flood_surrogate", "flood_surrogate_sse"])
def test_a_lone_surrogate_in_an_answer_fails_the_call_at_once_with_a_parse_error(flooding_upstream, tool):
    """C1-27: over stdio such an answer was dropped and the call waited for its timeout (line_guard now replaces the
    escape); over HTTP the answer of one request fails that request at once, in a JSON body or an event alike."""
    url, _ = flooding_upstream
    with pytest.raises(upstream.UpstreamError) as failed:
        _call(url, tool)  # a 60 s timeout: a wait for it would fail as "timeout"
    assert failed.value.kind == "protocol" and "Failed to parse" in str(failed.value), str(failed.value)
    assert _call(url, "greet", {"name": "Ann"}).content[0].text == "Hello, Ann!"
