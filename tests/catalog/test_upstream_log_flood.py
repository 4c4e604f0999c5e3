"""T13: an upstream's malformed messages never decide how much Scout logs.

The MCP SDK logs, one record each and with a traceback, a stdio line that parses as JSON but is no JSON-RPC message
(``{}``: line_guard drops only lines that are not objects), a notification whose params do not validate. Before,
2,000 such lines before each answer of a stdio server had one listing log 6,000 tracebacks (15 MB) and take 10 s
instead of 0.5 s. Scout's log handler now writes at most ten records a
minute from each place in the SDK (``scoutsite.logfilters.SdkRecordsPerSite``)."""

import io
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from catalog import upstream
from scoutsite.logfilters import SITE_RECORDS_PER_WINDOW, SdkRecordsPerSite
from tests.catalog.servers.fixtures import SCRIPTED, good_tool
from tests.catalog.test_upstream import connection

MALFORMED = 1000

NOISE = {
    "lines": [
        "{}",
        json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "loud", "data": "x"}}),
    ],
    "times": MALFORMED,
}


@contextmanager
def scouts_log() -> Iterator[io.StringIO]:
    """The log as Scout writes it (settings.LOGGING's console handler), its per-place count started afresh (another
    test may have spent this minute's records)."""
    console = next(handler for handler in logging.getLogger().handlers if handler.get_name() == "console")
    configured = [each for each in console.filters if isinstance(each, SdkRecordsPerSite)]
    assert configured, "settings.LOGGING's console handler no longer bounds the SDK's records"
    for each in configured:
        console.removeFilter(each)
    fresh = SdkRecordsPerSite()
    console.filters.insert(0, fresh)
    written = io.StringIO()
    stream = console.setStream(written)
    try:
        yield written
    finally:
        console.setStream(stream)
        console.removeFilter(fresh)
        console.filters[0:0] = configured


def records(log: str, words: str) -> list[str]:
    return [line for line in log.splitlines() if words in line]


def test_a_stdio_servers_malformed_messages_are_logged_at_most_ten_a_minute_from_each_place(tmp_path):
    script = tmp_path / "noisy.json"
    script.write_text(json.dumps({"pages": [[good_tool("t")]], "noise": NOISE}))
    server = connection(slug="noisy", command=sys.executable, args=[str(SCRIPTED), str(script)])

    async def list_once() -> list:
        async with upstream.open_session(server) as session:
            return await session.list_tools()

    with scouts_log() as log:
        tools = anyio.run(list_once)
    assert [tool["name"] for tool in tools] == ["t"]  # the answers behind the noise still arrive
    for words in ("Failed to parse JSONRPC message", "Failed to validate notification"):
        written = records(log.getvalue(), words)
        assert 1 <= len(written) <= SITE_RECORDS_PER_WINDOW, (words, len(written))  # thousands before
        assert "more from here this minute are left out of the log" in written[-1]
    assert log.getvalue().count("Traceback") <= 2 * SITE_RECORDS_PER_WINDOW
