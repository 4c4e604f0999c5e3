"""Upstream faults (SECURITY-TESTS F1, F2, C1 27): a hang, a crash mid-call, an oversized result."""

from __future__ import annotations

import ctypes
import gc
import io
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import (
    MODERN,
    PROTOCOL_MODES,
    classify_low_risk,
    faulty_calls,
    gateway_db,
    grant,
    make_user,
    mcp_client,
    run,
)

pytestmark = [gateway_db, pytest.mark.slow]


@pytest.fixture
def token(gateway, member_on, faulty_server, time_server) -> str:
    return member_on(faulty_server, time_server).token


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def test_hanging_upstream_times_out_frees_its_slot_and_leaves_others_alone(gateway, token, settings, faulty_call_log):
    # Long enough for the other server's call to finish inside it on a loaded machine (it was 2 s).
    settings.SCOUT_MCP_CALL_TIMEOUT = 10.0
    settings.SCOUT_MCP_MAX_CALLS_PER_SERVER = 1  # one slot: the ping after the hang proves it was freed

    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            # Warm both sessions: starting a process is bounded by the connect timeout, not the call timeout.
            await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {}})
            await client.call_tool(
                "execute_tool", {"tool_id": "time::get_current_time", "arguments": {"timezone": "UTC"}}
            )
            results: dict[str, Any] = {}
            finished: list[str] = []
            results["finished"] = finished

            async def hang():
                results["hang"] = await client.call_tool("execute_tool", {"tool_id": "faulty::hang", "arguments": {}})
                finished.append("hang")

            async def other_server():
                with anyio.fail_after(60):  # started once the hang is out upstream, not after a guessed pause
                    while not faulty_calls(faulty_call_log, "hang"):
                        await anyio.sleep(0.05)
                results["time"] = await client.call_tool(
                    "execute_tool", {"tool_id": "time::get_current_time", "arguments": {"timezone": "UTC"}}
                )
                finished.append("time")

            async with anyio.create_task_group() as group:
                group.start_soon(hang)
                group.start_soon(other_server)
            results["ping"] = await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {}})
            return results

    results = run(main)
    assert results["hang"].is_error and results["hang"].structured_content["upstream_failure"] == "timeout"
    assert "did not answer within 10 s" in _text(results["hang"])
    # The upstream hangs forever, so returning at all (with the timeout's message above) proves the
    # timeout fired; no wall-clock assertion.
    # Another server was not held up: its call, started after the hang, finished before the hang's timeout.
    assert not results["time"].is_error and results["finished"] == ["time", "hang"]
    # The slot is free again: the same server answers the next call.
    assert not results["ping"].is_error and _text(results["ping"]) == "pong"
    assert faulty_calls(faulty_call_log, "hang") == 1


def _call_log(path: Any) -> list[tuple[str, str]]:
    """The faulty server's call log as (pid, what) pairs, in order."""
    return [tuple(line.split()) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_a_timed_out_call_is_cancelled_upstream_and_the_process_kept(gateway, token, settings, faulty_call_log, mode):
    """F1: when a call times out the gateway tells the upstream (notifications/cancelled), which stops the tool's
    work there; the same process, still running, answers the next call."""
    settings.SCOUT_MCP_CALL_TIMEOUT = 1.0

    async def main() -> Any:
        async with mcp_client(gateway, token, mode=mode) as client:
            await client.call_tool("execute_tool", {"tool_id": "faulty::ping"})  # the process started
            hang = await client.call_tool("execute_tool", {"tool_id": "faulty::hang"})
            for _ in range(300):  # the notice travels on its own after the timeout's answer: wait for it, bounded
                if "hang_cancelled" in {what for _, what in _call_log(faulty_call_log)}:
                    break
                await anyio.sleep(0.1)
            ping = await client.call_tool("execute_tool", {"tool_id": "faulty::ping"})
            return hang, ping

    hang, ping = run(main)
    assert hang.is_error and hang.structured_content["upstream_failure"] == "timeout"
    assert not ping.is_error
    log = _call_log(faulty_call_log)
    assert [what for _, what in log] == ["ping", "hang", "hang_cancelled", "ping"], log
    assert len({pid for pid, _ in log}) == 1, log  # cancelled by the notice, not by a restart


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_a_timed_out_read_may_be_called_again_a_write_is_checked_first(gateway, admin_user, token, settings, mode):
    """A call that timed out may have run upstream. For a tool Scout classifies as a read that changed nothing, so
    the model is told it may call again (or tell the user), not to "check whether it took effect", which it cannot
    do for a read; once an admin classifies the same tool as a write, the answer says it may have taken effect."""
    from catalog.models import Tool

    settings.SCOUT_MCP_CALL_TIMEOUT = 1.0

    async def call_hang() -> Any:
        async with mcp_client(gateway, token, mode=mode) as client:
            await client.call_tool("execute_tool", {"tool_id": "faulty::ping"})  # the process started
            return await client.call_tool("execute_tool", {"tool_id": "faulty::hang"})

    read = run(call_hang)
    classify_low_risk(
        Tool.objects.get(tool_id="faulty::hang"), actor=admin_user, operation_class="write", reversibility="reversible"
    )
    write = run(call_hang)
    for result in (read, write):
        assert result.is_error and result.structured_content == {"upstream_failure": "timeout"}, _text(result)
        assert _text(result).startswith("The tool did not answer within 1 s and the call was cancelled. ")
    assert "the call changed nothing: you may call it again" in _text(read)
    assert "may or may not have taken effect" not in _text(read)
    assert _text(write).endswith(" The call may or may not have taken effect; check before trying again.")


def _upstream_failures(gateway, kind: str) -> float:
    import httpx

    from tests.scoutsite.test_metrics import value

    text = httpx.get(f"{gateway.url}/metrics", timeout=30).text
    return value(text, "scout_upstream_call_failures_total", server="faulty", kind=kind)


def test_crash_mid_call_errors_is_not_retried_and_the_server_restarts(gateway, token, faulty_call_log):
    """A crash mid-call is an error, never retried, and a new process answers the next call; it is counted in /metrics
    by server and kind (opsux5: only scout_executions_total{outcome="error"} said a call failed, naming neither the
    server nor how, and the breaker moves only after 5 failures in a row)."""
    from governance.models import AuditEvent

    kinds = ("closed", "timeout", "protocol")
    before = {kind: _upstream_failures(gateway, kind) for kind in kinds}

    async def main():
        async with mcp_client(gateway, token) as client:
            await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {}})
            crashed = await client.call_tool("execute_tool", {"tool_id": "faulty::crash", "arguments": {}})
            after = await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {"text": "back"}})
            return crashed, after

    crashed, after = run(main)
    # "closed", not "timeout": the crash was noticed when the process died, not after the call timeout.
    assert crashed.is_error and crashed.structured_content["upstream_failure"] == "closed"
    assert not after.is_error and _text(after) == "back"
    assert faulty_calls(faulty_call_log, "crash") == 1  # never retried
    pids = {line.split()[0] for line in faulty_call_log.read_text().splitlines()}
    assert len(pids) == 2  # a new process answered after the crash
    event = AuditEvent.objects.get(event_type="execution", tool_ref="faulty::crash")
    assert event.outcome == "unknown"
    counted = {kind: _upstream_failures(gateway, kind) - before[kind] for kind in kinds}
    assert counted == {"closed": 1, "timeout": 0, "protocol": 0}  # the pings that answered count nothing


def test_a_server_that_died_while_idle_is_started_again_and_the_next_call_answered(gateway, token, faulty_call_log):
    """agentux18: a stdio server whose process exited between two calls (killed, out of memory, its own crash) made
    the next call fail as a crash mid-call ("closed", outcome unknown: the agent was told it may have run) although
    nothing was sent; only the call after it started a new process. The gateway now finds the session ended before it
    sends, starts the server again and sends the call there: answered, no failure counted."""
    from scoutsite.asgi import mcp_server

    before = _upstream_failures(gateway, "closed")

    def ended() -> bool:  # the gateway has read the end of the killed process's output
        return all(c.session is None or c.session.ended for c in list(mcp_server.pool._connections.values()))

    async def main():
        async with mcp_client(gateway, token) as client:
            first = await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {}})
            os.kill(int(_call_log(faulty_call_log)[0][0]), signal.SIGKILL)
            with anyio.fail_after(60):
                while not ended():
                    await anyio.sleep(0.1)
            again = await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {"text": "back"}})
            return first, again

    first, again = run(main)
    assert not first.is_error and _text(first) == "pong"
    assert not again.is_error and _text(again) == "back", _text(again)
    log = _call_log(faulty_call_log)
    assert [name for _, name in log] == ["ping", "ping"] and log[0][0] != log[1][0]  # a new process answered
    assert _upstream_failures(gateway, "closed") == before


def test_a_stdio_line_that_never_ends_stops_the_server_and_the_next_call_starts_another(
    gateway, token, settings, faulty_call_log
):
    """C1-28: the SDK's stdio reader kept what a server wrote until a newline, with no limit: a server writing
    without one grew the gateway's memory (and its event loop's stalls, every caller's) until the call timed out,
    and on after it, since a timeout keeps the session. Each stdout line is bounded now (catalog/line_guard.py):
    past the bound the server is stopped, the call fails as after a crash and the next call starts it anew."""
    settings.SCOUT_MCP_CALL_TIMEOUT = 20.0
    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 64 * 1024  # the line bound is 1 MB

    async def main():
        async with mcp_client(gateway, token) as client:
            await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {}})
            flooded = await client.call_tool("execute_tool", {"tool_id": "faulty::endless_line", "arguments": {}})
            after = await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {"text": "back"}})
            return flooded, after

    flooded, after = run(main)
    # "closed", not "timeout": the server was stopped at the bound, not left writing until the call timed out.
    assert flooded.is_error and flooded.structured_content["upstream_failure"] == "closed", _text(flooded)
    assert not after.is_error and _text(after) == "back"
    assert faulty_calls(faulty_call_log, "endless_line") == 1  # never retried
    pids = [line.split()[0] for line in faulty_call_log.read_text().splitlines()]
    assert pids[0] == pids[1] != pids[2]  # the flooding process is gone; a new one answered


def _rss() -> int:
    """The process's resident memory, garbage collected and with the allocator's free memory handed back: glibc's
    malloc keeps free memory of up to twice its mmap threshold at its heap's top, and that threshold grows to the size
    of the largest block freed (the 2 MB lines), so from one round to the next the resident size swung by more than
    the 4 MB line bound with nothing kept (-9 to +1 MB here; a round on a loaded machine read over the bound)."""
    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


@pytest.mark.parametrize("output_cap", [64 * 1024, 1024 * 1024])
def test_memory_stays_flat_across_many_stdio_lines_over_a_megabyte(
    faulty_server, faulty_call_log, settings, output_cap
):
    """C1-28: many calls whose answers are 2 MB stdout lines, through the gateway's pool. With a 1 MB line bound each
    one stops its server (the next call starts another) and is answered as an output too large to show; with a 4 MB
    bound each is read and cut at the output cap.
    Either way the process's memory after each call stays within the line bound of where it was after two such calls,
    while more than five times that bound passes through."""
    from catalog.upstream import answer_cap
    from mcpgateway.upstreams import UpstreamCallError, UpstreamPool

    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = output_cap
    bound, rounds = answer_cap(), 12
    line = 2 * 1024 * 1024 + 100  # ``big``'s 1 MB of text, as a text block and as structured content: one line
    assert line > 1024 * 1024 and rounds * line > 5 * bound
    growth: list[int] = []

    async def main() -> list[str]:
        outcomes = []
        pool = UpstreamPool()
        async with pool.running():
            for done in range(rounds):
                if done == 2:
                    base = _rss()
                try:
                    result = await pool.call(
                        server=faulty_server, tool_name="big", arguments={"megabytes": 1}, timeout=30
                    )
                    outcomes.append("capped" if result.is_error else "whole")
                except UpstreamCallError as failed:
                    outcomes.append(failed.kind)
                answered = await pool.call(
                    server=faulty_server, tool_name="ping", arguments={"text": "back"}, timeout=30
                )
                assert answered.content[0].text == "back"
                if done >= 2:
                    growth.append(_rss() - base)
        return outcomes

    outcomes = run(main)
    print("GROWTH", output_cap, bound, growth)
    assert outcomes == ["capped"] * rounds, outcomes  # over the line bound too: the call ran (not a crash)
    assert faulty_calls(faulty_call_log, "big") == rounds  # each call ran once
    assert max(growth) < bound, f"memory grew by {max(growth)} bytes (line bound {bound})"


def test_a_crashed_server_restarts_after_a_backoff_that_doubles_while_it_keeps_failing(
    faulty_server, faulty_call_log, settings, monkeypatch
):
    """F2's restart backoff, through the gateway's pool. After a crash the server is started again only once the
    backoff has passed: a call whose connect deadline ends sooner is refused ("backoff") without starting a process
    or sending anything, one with a later deadline waits and is answered by a new process. A second crash in a row
    doubles the wait: a deadline that outlasted the first wait no longer does. (The base is raised to 5 s so that
    each refusal has seconds of margin on a loaded machine; a call that waits gets a minute more than the wait for
    the new process's start and handshake, which a loaded machine took more than 5 s for.)"""
    from mcpgateway import upstreams
    from mcpgateway.upstreams import UpstreamCallError, UpstreamPool

    base = 5.0
    start = 60.0  # a process's start and handshake, on top of any wait
    monkeypatch.setattr(upstreams, "RESTART_BACKOFF_BASE", base)
    settings.SCOUT_MCP_RESTART_BACKOFF_MAX = 600

    async def main() -> list[str]:
        seen = []
        pool = UpstreamPool()

        async def call(tool: str, connect_within: float) -> None:
            settings.SCOUT_UPSTREAM_CONNECT_TIMEOUT = connect_within
            try:
                await pool.call(server=faulty_server, tool_name=tool, arguments={}, timeout=30)
                seen.append(f"{tool} answered")
            except UpstreamCallError as failed:
                seen.append(f"{tool} {failed.kind}")

        async with pool.running():
            await call("ping", start)
            await call("crash", start)  # first failure: the next start waits `base`
            await call("ping", base / 2)  # refused, unsent
            await call("crash", base + start)  # waits out the backoff, a new process crashes: the wait doubles
            await call("ping", base * 1.5)  # would have outlasted the first wait, not this one
            await call("ping", base * 2 + start)  # waits it out: a new process answers
        return seen

    seen = run(main)
    assert seen == [
        "ping answered",
        "crash closed",
        "ping backoff",
        "crash closed",
        "ping backoff",
        "ping answered",
    ], seen
    pids = [line.split() for line in faulty_call_log.read_text().splitlines()]
    assert [name for _, name in pids] == ["ping", "crash", "crash", "ping"]  # the refused calls reached nothing
    assert len({pid for pid, _ in pids}) == 3  # one process per start: two crashed, a third answered


def test_an_upstreams_stderr_never_forges_a_log_line_or_reaches_a_terminal_raw(gateway, token):
    """T15: a dying stdio server's stderr (its last 1500 characters) is part of the error Scout logs, and it was
    logged as written: a line break started a log line of the server's own making (a forged audit line), a carriage
    return and a terminal escape reached whoever read the log in a terminal. Every log line is now one line, control
    characters escaped; the text itself is kept."""

    async def main():
        async with mcp_client(gateway, token) as client:
            return await client.call_tool("execute_tool", {"tool_id": "faulty::crash_loud", "arguments": {}})

    console = next(handler for handler in logging.getLogger().handlers if handler.get_name() == "console")
    written = io.StringIO()
    stream = console.setStream(written)  # the log as the gateway writes it (settings.LOGGING's console handler)
    try:
        crashed = run(main)
    finally:
        console.setStream(stream)
    assert crashed.is_error and crashed.structured_content["upstream_failure"] == "closed"
    log = written.getvalue()
    [line] = [line for line in log.splitlines() if "faulty::crash_loud failed upstream" in line]
    assert "disk full\\n2026-01-01 00:00:00,000 INFO governance.audit FORGED approval granted" in line
    assert "FORGED" not in log.replace(line, "")  # no line of the upstream's own
    assert not [char for char in ("\r", "\x1b") if char in log]


def test_a_result_over_the_output_cap_is_capped(gateway, token, faulty_call_log):
    """A megabyte of text (some 2 MB of JSON: the result carries it as text and as structured content): over the
    1 MB output cap, within the 4 MB bound on what is read of an answer (a longer one is refused as it arrives:
    ``test_a_stdio_line_that_never_ends_stops_the_server_and_the_next_call_starts_another``)."""

    async def main():
        async with mcp_client(gateway, token) as client:
            big = await client.call_tool("execute_tool", {"tool_id": "faulty::big", "arguments": {"megabytes": 1}})
            after = await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {}})
            return big, after

    big, after = run(main)
    assert big.is_error and big.structured_content == {"output_too_large": True}
    text = _text(big)
    assert "was cut" in text and len(text) < 1000
    assert "Call it again asking for less" in text and "do not call it again" not in text  # a read: ask for less
    assert not after.is_error


@pytest.mark.parametrize("operation_class", ["read", "write"])
def test_an_answer_over_the_line_bound_is_an_output_too_large_not_a_crash(
    gateway, token, settings, faulty_call_log, admin_user, operation_class
):
    """A stdio answer longer than the line bound (4 x the output cap, at least 1 MB; catalog/line_guard.py) stops the
    server as it arrives. It was answered as a crash ("The tool's server stopped during the call"; for a write "may or
    may not have taken effect; check before trying again"), though the server had run the call and was answering: a
    file server reading a 2 MB file, its text twice in the answer. It is an output too large to show, as one under
    the bound: for a read, ask for less; for a write, it ran, do not call it again. The next call starts the server
    anew, without a restart backoff."""
    from catalog.models import Tool

    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 64 * 1024  # the line bound is 1 MB; ``big`` answers a 2 MB line
    if operation_class == "write":  # its calls then change things, as far as Scout knows (low risk: no approval)
        big = Tool.objects.get(tool_id="faulty::big")
        classify_low_risk(big, actor=admin_user, operation_class="write", reversibility="reversible")

    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            big = await client.call_tool("execute_tool", {"tool_id": "faulty::big", "arguments": {"megabytes": 1}})
            after = await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {"text": "back"}})
            return big, after

    big, after = run(main)
    assert big.is_error and big.structured_content == {"output_too_large": True}, _text(big)
    text = _text(big)
    assert text.startswith("The tool ran, but its output (over 1048576 bytes) was cut") and "stopped" not in text
    if operation_class == "read":
        assert "Call it again asking for less" in text and "do not call it again" not in text
    else:
        assert "most likely taken effect: do not call it again" in text and "asking for less" not in text
    assert not after.is_error and _text(after) == "back"
    assert faulty_calls(faulty_call_log, "big") == 1
    pids = [line.split()[0] for line in faulty_call_log.read_text().splitlines()]
    assert pids[0] != pids[1]  # the answering process was stopped; a new one answered the next call


def test_the_output_cap_counts_bytes_not_characters(gateway, token, settings, faulty_call_log):
    """``SCOUT_MCP_MAX_OUTPUT_BYTES`` bounds what a result weighs as it is sent and kept: 600 four-byte characters
    (an emoji) are 2,400 bytes of text, twice in the result (text and structured content), over a 4,000-byte cap,
    though under it in characters. Counted in characters, a result of such text passed at four times the cap."""
    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 4000

    async def main():
        async with mcp_client(gateway, token) as client:
            wide = await client.call_tool(
                "execute_tool", {"tool_id": "faulty::ping", "arguments": {"text": "😀" * 600}}
            )
            narrow = await client.call_tool(
                "execute_tool", {"tool_id": "faulty::ping", "arguments": {"text": "x" * 600}}
            )
            return wide, narrow

    wide, narrow = run(main)
    assert wide.is_error and wide.structured_content == {"output_too_large": True}
    assert not narrow.is_error and _text(narrow) == "x" * 600  # the same length in one-byte characters fits


def test_a_writes_output_too_large_to_show_says_it_took_effect_and_not_to_call_it_again(
    gateway, token, settings, faulty_call_log, admin_user, faulty_server
):
    """A write whose output is cut has run: "ask for less" would have the model do it a second time."""
    from governance.models import ApprovalRequest
    from governance.services.approvals import approval_decide

    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 40  # "stored 12 characters" as a result's JSON is longer
    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, faulty_server, approver, "approve")

    async def ask(approval_id: str | None = None) -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            payload: dict[str, Any] = {"tool_id": "faulty::record_note", "arguments": {"note": "release v2.0"}}
            if approval_id:
                payload["approval_id"] = approval_id
            return await client.call_tool("execute_tool", payload)

    approval_id = run(ask).structured_content["approval_id"]
    approval_decide(request=ApprovalRequest.objects.get(), approver=approver, approve=True, reason="")
    written = run(lambda: ask(approval_id))
    assert written.is_error and written.structured_content == {"output_too_large": True}
    text = _text(written)
    assert "The tool ran" in text and "most likely taken effect: do not call it again" in text
    assert "asking for less" not in text
    assert faulty_calls(faulty_call_log, "record_note") == 1


def test_oversized_arguments_are_rejected_before_the_upstream(gateway, token, faulty_call_log, settings):
    async def main():
        async with mcp_client(gateway, token) as client:
            large = await client.call_tool(
                "execute_tool", {"tool_id": "faulty::ping", "arguments": {"text": "x" * (300 * 1024)}}
            )
            wrong = await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {"text": 5}})
            return large, wrong

    large, wrong = run(main)
    assert large.is_error and "larger than" in _text(large)
    assert wrong.is_error and "arguments.text: must be of type string" in _text(wrong)
    assert faulty_calls(faulty_call_log, "ping") == 0


def test_a_million_item_array_is_rejected_before_the_upstream(gateway, token, faulty_call_log):
    from .conftest import modern_request, raw_post

    body = modern_request(
        "tools/call",
        {"name": "execute_tool", "arguments": {"tool_id": "faulty::ping", "arguments": {"text": [0] * 1_000_000}}},
    )
    response = raw_post(gateway, body, token=token)
    assert response.status_code == 413
    assert faulty_calls(faulty_call_log, "ping") == 0
    assert json.loads(response.text)["error"]["code"] == -32600


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"  # a zombie has exited


def test_an_archived_servers_process_is_stopped_by_the_next_sweep(faulty_server, faulty_call_log, settings):
    """opsux5: archiving a server hid its tools, but each gateway process kept its stdio process running, with the
    credentials its variables gave it, until the gateway stopped. Every SCOUT_MCP_SESSION_SWEEP_SECONDS the pool
    closes the sessions of servers no longer Active: the real process exits; an Active server's stays."""
    from catalog.models import Server
    from catalog.services.servers import server_archive
    from mcpgateway.db import run_orm
    from mcpgateway.upstreams import UpstreamPool

    settings.SCOUT_MCP_SESSION_SWEEP_SECONDS = 1

    async def main() -> tuple[int, list[str], bool]:
        pool = UpstreamPool()
        async with pool.running():
            await pool.call(server=faulty_server, tool_name="ping", arguments={}, timeout=30)
            pid = int(faulty_call_log.read_text().split()[0])
            kept = await pool.close_retired()  # Active: nothing closed
            await run_orm(lambda: server_archive(server=Server.objects.get(pk=faulty_server.pk)))
            with anyio.fail_after(60):  # the sweep, every second, closes it; the process exits
                while _alive(pid) or pool.stats():
                    await anyio.sleep(0.2)
            return pid, kept, pool.stats() == {}

    pid, kept, forgotten = run(main)
    assert kept == [] and forgotten and not _alive(pid)
