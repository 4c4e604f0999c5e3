"""catalog.upstream against real servers: the parts the gateway uses (sessions, calls, change notices)."""

import json
import logging
import os
import sys
import tempfile
from types import SimpleNamespace

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from catalog import upstream
from catalog.choices import Transport
from tests.catalog.servers.fixtures import BIN_DIR, SCRIPTED
from tests.catalog.servers.http_mcp import add, refused_url, serve_http

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60), pytest.mark.usefixtures("loopback_upstreams")]


def connection(**fields: object) -> SimpleNamespace:
    """A server's connection fields only: upstream needs no database."""
    base = {
        "slug": "up",
        "transport": Transport.STDIO,
        "command": "",
        "args": [],
        "env_vars": [],
        "url": "",
        "header_env": {},
        "openapi_credentials": [],
    }
    return SimpleNamespace(**{**base, **fields})


def test_call_tool_runs_a_real_tool_over_stdio():
    server = connection(command=str(BIN_DIR / "mcp-server-time"))

    result = upstream.run_async(
        lambda: upstream.call_tool(server, "get_current_time", {"timezone": "Etc/UTC"}, timeout=10)
    )

    assert not result.is_error
    assert result.structured_content["timezone"] == "Etc/UTC"


def test_tool_failure_is_a_result_not_an_exception():
    server = connection(command=str(BIN_DIR / "mcp-server-time"))

    result = upstream.run_async(
        lambda: upstream.call_tool(server, "get_current_time", {"timezone": "Not/AZone"}, timeout=10)
    )

    assert result.is_error


def test_warm_session_serves_many_calls_and_listings(http_upstream):
    server = connection(transport=Transport.HTTP, url=http_upstream.url)

    async def work() -> tuple[list[str], list[int]]:
        async with upstream.open_session(server) as session:
            names = [tool["name"] for tool in await session.list_tools()]
            sums = [
                (await session.call_tool("add", {"a": i, "b": 1}, timeout=5)).structured_content["result"]
                for i in range(3)
            ]
            return names, sums

    names, sums = upstream.run_async(work)

    assert names == ["greet", "add", "bump"]
    assert sums == [1, 2, 3]


def test_protocol_error_is_reported_with_the_servers_message(tmp_path):
    script = tmp_path / "script.json"
    script.write_text('{"pages": [[]]}')
    server = connection(command=sys.executable, args=[str(SCRIPTED), str(script)])

    with pytest.raises(upstream.UpstreamError) as caught:
        upstream.run_async(lambda: upstream.call_tool(server, "anything", {}, timeout=5))

    assert caught.value.kind == "protocol" and "method not found: tools/call" in str(caught.value)


def test_call_that_hangs_times_out_with_a_clear_error(tmp_path):
    script = tmp_path / "script.json"
    script.write_text('{"pages": [[]], "hang_methods": ["tools/call"]}')
    server = connection(command=sys.executable, args=[str(SCRIPTED), str(script)])

    with pytest.raises(upstream.UpstreamError) as caught:
        upstream.run_async(lambda: upstream.call_tool(server, "anything", {}, timeout=1))

    assert caught.value.kind == "timeout"
    assert "timed out after 1s while calling tool 'anything'" in str(caught.value)


def test_listener_hears_tools_list_changed_from_a_2026_server(http_upstream):
    server = connection(transport=Transport.HTTP, url=http_upstream.url)
    heard, listening = anyio.Event(), anyio.Event()
    messages: list[object] = []

    async def on_message(message: object) -> None:
        messages.append(message)
        if upstream.is_tools_list_changed(message):
            heard.set()

    async def work() -> bool:
        async with anyio.create_task_group() as tg:

            async def listen() -> None:
                async with upstream.open_session(server, message_handler=on_message) as session:
                    assert session.is_modern
                    await session.listen_for_changes(listening=listening.set)

            tg.start_soon(listen)
            with anyio.fail_after(60):  # a change announced before the subscription is acknowledged is not heard
                await listening.wait()
            await upstream.call_tool(server, "bump", {}, timeout=30)  # adds a tool and announces it
            with anyio.fail_after(60):
                await heard.wait()
            tg.cancel_scope.cancel()
        return heard.is_set()

    assert upstream.run_async(work)
    assert any(upstream.is_tools_list_changed(m) for m in messages)


def test_missing_stdio_variable_is_a_config_error(monkeypatch):
    monkeypatch.delenv("SCOUT_TEST_MISSING", raising=False)
    server = connection(command=str(BIN_DIR / "mcp-server-time"), env_vars=["SCOUT_TEST_MISSING"])

    with pytest.raises(upstream.UpstreamError) as caught:
        upstream.list_tools(server)

    assert caught.value.kind == "config" and "SCOUT_TEST_MISSING" in str(caught.value)


def test_run_async_works_under_a_running_event_loop():
    server = connection(command=str(BIN_DIR / "mcp-server-time"))

    async def caller() -> list[dict]:
        return upstream.list_tools(server)  # sync code called from async code: runs on a fresh thread

    assert {t["name"] for t in anyio.run(caller)} == {"get_current_time", "convert_time"}


def test_errors_inside_a_session_block_are_the_callers_own(http_upstream):
    server = connection(transport=Transport.HTTP, url=http_upstream.url)

    async def work() -> None:
        async with upstream.open_session(server):
            raise KeyError("the caller's bug")

    with pytest.raises(KeyError, match="the caller's bug"):
        upstream.run_async(work)


def test_messages_never_carry_url_credentials_or_header_values(monkeypatch):
    monkeypatch.setenv("SCOUT_TEST_TOKEN", "s3cr3t-token-value")
    url = refused_url().replace("http://", "http://user:hunter22@") + "?api_key=abc123"
    server = connection(transport=Transport.HTTP, url=url, header_env={"Authorization": "SCOUT_TEST_TOKEN"})

    with pytest.raises(upstream.UpstreamError) as caught:
        upstream.list_tools(server)

    message = str(caught.value)
    assert caught.value.kind == "refused"
    assert "hunter22" not in message and "abc123" not in message and "s3cr3t" not in message
    assert upstream.safe_url(url) in message


def scripted_connection(tmp_path, script: str) -> SimpleNamespace:
    path = tmp_path / "script.json"
    path.write_text(script)
    return connection(command=sys.executable, args=[str(SCRIPTED), str(path)])


def test_listener_hears_list_changed_pushed_by_a_2025_server(tmp_path):
    server = scripted_connection(tmp_path, '{"pages": [[{"name": "a"}]], "notify_on_list": true}')
    heard = anyio.Event()

    async def on_message(message: object) -> None:
        if upstream.is_tools_list_changed(message):
            heard.set()

    async def work() -> str:
        async with upstream.open_session(server, message_handler=on_message) as session:
            assert not session.is_modern
            await session.list_tools()  # the scripted server announces a change after each listing
            with anyio.fail_after(5):
                await heard.wait()
            return session.protocol_version

    assert upstream.run_async(work) == "2025-11-25"


def test_listening_session_notices_a_dead_2025_server(tmp_path):
    """The heartbeat turns a silently dead process into an error, so catalog_watch reconnects."""
    server = scripted_connection(tmp_path, '{"pages": [[{"name": "a"}]], "exit_after_lists": 1}')

    async def work() -> None:
        async with upstream.open_session(server) as session:
            with anyio.fail_after(10):
                await session.listen_for_changes(heartbeat=0.2)

    with pytest.raises(upstream.UpstreamError) as caught:
        upstream.run_async(work)

    assert caught.value.kind == "closed"


def test_a_2026_server_without_subscriptions_is_held_open_by_heartbeats():
    quiet = MCPServer("no-subscriptions", subscriptions=False)
    quiet.add_tool(add, name="add")

    async def work(url: str) -> bool:
        async with upstream.open_session(connection(transport=Transport.HTTP, url=url)) as session:
            assert session.is_modern
            with anyio.move_on_after(1.0) as scope:
                await session.listen_for_changes(heartbeat=0.2)  # must not fail or return
            return scope.cancelled_caught

    with serve_http(quiet) as running:
        assert upstream.run_async(lambda: work(running.url))


def test_invalid_utf8_from_a_stdio_server_is_replaced_and_the_session_goes_on(tmp_path):
    """C1-27: bytes that are not UTF-8 in a stdio server's answer stalled the session (the SDK decoded strictly,
    its reader failed, the call waited for its timeout). They now read as U+FFFD, and the next call is answered."""
    import json

    answer = {"jsonrpc": "2.0", "id": 0, "result": {"content": [{"type": "text", "text": "caf\u00e9 \u00ff\u00fe ok"}]}}
    reply = json.dumps(answer, ensure_ascii=False).replace('"id": 0', '"id": ID')  # written as Latin-1 bytes
    server = scripted_connection(tmp_path, json.dumps({"pages": [[]], "call_reply": reply}))

    async def work():
        async with upstream.open_session(server) as session:
            return [(await session.call_tool("anything", {}, timeout=5)).content[0].text for _ in range(2)]

    texts = upstream.run_async(work)

    assert texts == ["caf\ufffd \ufffd\ufffd ok"] * 2  # é written as Latin-1 is one invalid byte too


def test_a_lone_surrogate_escape_from_a_stdio_server_is_replaced_and_the_call_answered(tmp_path):
    """C1-27: a JSON escape of a lone UTF-16 surrogate (``\\ud800``, a high one before a non-surrogate, a low one
    alone) made the SDK drop the whole answer as unparsable, and the call waited for its timeout. Such an escape now
    reads as U+FFFD, as invalid UTF-8 does; a pair (an emoji) and an escaped backslash before "ud800" stay as sent."""
    text = r"a\ud800b \uDC00\uD800\u0041 \ud83d\ude00 \\ud800"
    reply = '{"jsonrpc": "2.0", "id": ID, "result": {"content": [{"type": "text", "text": "' + text + '"}]}}'
    server = scripted_connection(tmp_path, json.dumps({"pages": [[]], "call_reply": reply}))

    async def work():
        async with upstream.open_session(server) as session:
            return [(await session.call_tool("anything", {}, timeout=5)).content[0].text for _ in range(2)]

    assert upstream.run_async(work) == ["a\ufffdb \ufffd\ufffdA \U0001f600 \\ud800"] * 2


def test_a_stdio_server_writing_its_stderr_while_idle_never_fills_the_disk(tmp_path):
    """T13: a stdio server's stderr went to a file the gateway trimmed only when it called the server, so a server
    writing to stderr between calls filled the disk (3.6 GB in 6 s here). line_guard now empties the file whenever it
    holds more than STDERR_MAX_BYTES, and keeps appending at its end: what the disk holds stays under the bound, and
    the tail still reads."""
    script = tmp_path / "noisy.py"
    script.write_text(
        "import sys\n"
        "for line in sys.stdin:\n"  # the handshake is never answered: the stderr flood is what is measured
        "    while True:\n"
        "        sys.stderr.write('noise ' * 1000 + '\\n')\n"
    )
    server = connection(slug="noisy", command=sys.executable, args=[str(script)])
    sizes: list[tuple[int, int]] = []

    async def watch() -> None:
        with pytest.raises(upstream.UpstreamError):
            async with upstream.open_session(server, connect_timeout=2):
                pass

    # The errlog is private to open_session: read it through the process's open files while the handshake waits.
    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            for _ in range(15):
                await anyio.sleep(0.1)
                sizes.extend(_errlog_sizes())

    anyio.run(main)
    assert sizes, "the server's stderr file was never seen"
    assert max(allocated for _, allocated in sizes) <= upstream.STDERR_MAX_BYTES + 2 * 65536, sizes[-3:]
    assert max(size for size, _ in sizes) <= upstream.STDERR_MAX_BYTES + 2 * 65536, sizes[-3:]


def _errlog_sizes() -> list[tuple[int, int]]:
    """(size, bytes allocated on disk) of each deleted temporary file this process holds open (the errlog)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(tempfile.gettempdir()) and target.endswith("(deleted)"):
                st = os.fstat(int(fd))
                found.append((st.st_size, st.st_blocks * 512))
        except OSError:
            continue
    return found


CHATTY_SERVER = """
import json, sys
def send(message):
    sys.stdout.write("Server ready!\\n" * 2000 + "  \\n" + json.dumps(message) + "\\n")
    sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if message["method"] == "initialize":
        info = {"name": "c", "version": "1"}
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": info}
        send({"jsonrpc": "2.0", "id": message["id"], "result": result})
    elif message["method"] == "tools/list":
        tools = [{"name": "t", "inputSchema": {"type": "object"}}]
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"tools": tools}})
    else:
        send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}})
"""


def test_lines_of_a_stdio_server_that_are_not_json_rpc_are_dropped_before_the_sdk_logs_each(tmp_path, caplog):
    """T13: the SDK logs every stdout line that is not a JSON-RPC message with a traceback, and reads the answers
    behind them only as fast as it logs: a server writing lines of text while idle had the gateway log some 1,400
    tracebacks a second (1.2 MB of log), and its calls timed out. line_guard drops such lines (and says how many)."""
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY_SERVER)
    server = connection(slug="chatty", command=sys.executable, args=[str(script)])

    async def list_once() -> tuple[list, str]:
        async with upstream.open_session(server) as session:
            return await session.list_tools(), session.stderr_tail()

    with caplog.at_level(logging.ERROR, logger="mcp.client.stdio"):
        tools, stderr = anyio.run(list_once)
    assert [tool["name"] for tool in tools] == ["t"]
    assert not [record for record in caplog.records if "Failed to parse" in record.getMessage()]
    assert "scout: dropped 1000 line(s) of stdout that were not JSON-RPC" in stderr


def test_an_http_tool_that_hangs_is_cancelled_upstream_while_the_session_stays_open():
    """F1 on Streamable HTTP, at the session the gateway calls (mcpgateway.upstreams): a call the upstream never
    answers ends at the call's timeout (``Session._guard``'s deadline, named in the error), and the upstream's
    handler is cancelled while the session is still open, so by the call's own cancellation, not by the gateway
    closing the session after a timeout; the same session then answers the next call."""
    events: list[str] = []

    async def hang() -> str:
        """Never answers."""
        events.append("hang")
        try:
            await anyio.sleep(3600)
        except anyio.get_cancelled_exc_class():
            events.append("hang_cancelled")
            raise
        return "never"

    mcp = MCPServer("scout-test-hang")
    mcp.add_tool(hang, name="hang")
    mcp.add_tool(add, name="add")

    async def work() -> tuple[str, list[str], bool]:
        async with upstream.open_session(connection(transport=Transport.HTTP, url=served.url)) as session:
            with anyio.fail_after(30):  # bounded here, so that a call never cut fails this test, not the run
                try:
                    await session.call_tool("hang", {}, 1)
                    raise AssertionError("the hanging call returned")
                except upstream.UpstreamError as exc:
                    error = str(exc)
                    kind = exc.kind
                for _ in range(100):  # the notice travels after the timeout: wait for it, bounded
                    if "hang_cancelled" in events:
                        break
                    await anyio.sleep(0.1)
                seen = list(events)
                after = await session.call_tool("add", {"a": 2, "b": 3}, 10)
        return f"{kind}: {error}", seen, not after.is_error

    with serve_http(mcp) as served:
        error, seen, answered = upstream.run_async(work)

    assert error.startswith("timeout: ") and "timed out after 1s while calling tool 'hang'" in error, error
    assert seen == ["hang", "hang_cancelled"], seen
    assert answered
