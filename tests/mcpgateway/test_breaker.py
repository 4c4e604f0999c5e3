"""F3: the circuit breaker per upstream server, over HTTP against a real stdio server that crashes on demand."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from governance.models import ApprovalRequest, AuditEvent
from governance.services.approvals import approval_decide, approval_request_create
from governance.services.tokens import api_token_verify
from tests.catalog.servers.http_mcp import SessionFront, serve_front, serve_http

from .conftest import faulty_calls, gateway_db, grant, make_token, make_user, mcp_client, run, sync_server

pytestmark = [gateway_db, pytest.mark.slow]

THRESHOLD = 3
EXIT_ON = "exit-on-this"  # the value of echo_json's that makes the faulty server exit (servers/faulty_server.py)
COOLDOWN = 1.0


@pytest.fixture
def token(gateway, member_on, faulty_server, settings) -> str:
    settings.SCOUT_UPSTREAM_BREAKER_FAILURES = THRESHOLD
    settings.SCOUT_UPSTREAM_BREAKER_COOLDOWN = COOLDOWN
    settings.SCOUT_MCP_RESTART_BACKOFF_MAX = 0.5  # the crashed process restarts quickly for the probe
    return member_on(faulty_server).token


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def _call(client: Any, tool: str, **arguments: Any) -> Any:
    return await client.call_tool("execute_tool", {"tool_id": f"faulty::{tool}", "arguments": arguments})


def _breaker_metric(client: Any, name: str) -> float:
    text = client.get("/metrics").content.decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("server") == "faulty":
                return sample.value
    return 0.0


def _admin_badge(client: Any, admin_user: Any) -> str:
    client.force_login(admin_user)
    page = client.get("/admin/catalog/server/").content.decode()
    for label in ("breaker open", "probing", "flowing"):
        if label in page:
            return label
    return ""


def test_failures_open_the_breaker_which_fails_fast_then_probes_and_closes(
    gateway, token, faulty_server, faulty_call_log, client, admin_user, settings
):
    """A server failing for everyone: once two people's calls have failed THRESHOLD times each (each person's own
    breaker opens first, ``catalog.breaker``), the server's opens, and a third person's call fails fast too."""
    from governance.models import AuditEvent

    second, third = make_user("gw_second"), make_user("gw_third")
    for person in (second, third):
        grant(admin_user, faulty_server, person, "discover", "execute")
    others = {person.username: make_token(person) for person in (second, third)}

    settings.SCOUT_UPSTREAM_BREAKER_COOLDOWN = cooldown = 5.0  # the third person's call comes within it when loaded

    async def crash_until_open():
        async with (
            mcp_client(gateway, token) as first,
            mcp_client(gateway, others["gw_second"]) as second,
            mcp_client(gateway, others["gw_third"]) as third,
        ):
            crashes = [await _call(c, "crash") for c in (first, second) for _ in range(THRESHOLD)]
            return crashes, await _call(third, "ping", text="blocked")

    crashes, blocked = run(crash_until_open)
    assert all(r.is_error and r.structured_content["upstream_failure"] == "closed" for r in crashes)
    # Open: the next call fails fast with a clear error and never reaches the server.
    assert blocked.is_error and blocked.structured_content["upstream_failure"] == "circuit_open"
    assert "the tool's server is failing; scout stopped calling it for" in _text(blocked).lower()
    assert faulty_calls(faulty_call_log, "crash") == 2 * THRESHOLD
    assert faulty_calls(faulty_call_log, "ping") == 0
    # Nothing ran, so its audit row says error (not unknown).
    assert AuditEvent.objects.filter(tool_ref="faulty::ping", outcome="error").count() == 1
    # Visible to operators: the admin's badge and the metrics (2 = open).
    assert _admin_badge(client, admin_user) == "breaker open"
    assert _breaker_metric(client, "scout_upstream_breaker_state") == 2
    assert _breaker_metric(client, "scout_upstream_breaker_opened_total") >= 1
    assert _breaker_metric(client, "scout_upstream_breaker_rejected_total") >= 1

    time.sleep(cooldown + 0.2)  # the cool-down passes (a wait, not a timed assertion)

    async def probe_and_after():
        async with mcp_client(gateway, others["gw_third"]) as c:
            return await _call(c, "ping", text="probe"), await _call(c, "ping", text="after")

    probe, after = run(probe_and_after)
    # Half-open: one probe went through; its success closed the breaker, so the next call flows too.
    assert not probe.is_error and _text(probe) == "probe"
    assert not after.is_error and _text(after) == "after"
    assert faulty_calls(faulty_call_log, "ping") == 2
    assert _admin_badge(client, admin_user) == "flowing"
    assert _breaker_metric(client, "scout_upstream_breaker_state") == 0


def test_a_failed_probe_opens_it_again(gateway, token, faulty_call_log):
    async def main():
        async with mcp_client(gateway, token) as c:
            for _ in range(THRESHOLD):
                await _call(c, "crash")
            await _async_sleep(COOLDOWN + 0.2)
            probe = await _call(c, "crash")  # the probe fails ...
            blocked = await _call(c, "ping")  # ... so the breaker is open again at once
            return probe, blocked

    probe, blocked = run(main)
    assert probe.structured_content["upstream_failure"] == "closed"
    assert blocked.structured_content["upstream_failure"] == "circuit_open"
    assert faulty_calls(faulty_call_log, "crash") == THRESHOLD + 1
    assert faulty_calls(faulty_call_log, "ping") == 0


def test_tool_errors_do_not_count_and_a_success_resets_the_count(gateway, token, faulty_call_log):
    async def main():
        async with mcp_client(gateway, token) as c:
            # A tool's own isError result means the server works: never a breaker failure.
            tool_errors = [await _call(c, "hostile_error") for _ in range(THRESHOLD + 1)]
            # Failures that are not consecutive (a success in between) do not open it either.
            for _ in range(THRESHOLD - 1):
                await _call(c, "crash")
            await _call(c, "ping")
            for _ in range(THRESHOLD - 1):
                await _call(c, "crash")
            return tool_errors, await _call(c, "ping", text="still flowing")

    tool_errors, last = run(main)
    assert all(r.is_error and "upstream_failure" not in (r.structured_content or {}) for r in tool_errors)
    assert faulty_calls(faulty_call_log, "hostile_error") == THRESHOLD + 1
    assert not last.is_error and _text(last) == "still flowing"


async def _async_sleep(seconds: float) -> None:
    import anyio

    await anyio.sleep(seconds)


def test_an_approval_used_by_a_call_the_open_breaker_refused_is_given_back(
    gateway, token, faulty_server, admin_user, faulty_call_log
):
    """opsux12: a call refused before anything was sent for its server's reason (here the open breaker; a full
    bulkhead, a backoff, a refused configuration alike) left its approval used up: the agent had to ask an approver
    again for a call that never ran. Given back, on the record, and the agent told so; the same approval_id runs it
    once the server is called again."""
    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, faulty_server, approver, "discover", "approve")
    tool, note = faulty_server.tools.get(name="record_note"), {"note": "ship the release"}
    request = approval_request_create(principal=api_token_verify(token), tool=tool, arguments=note)
    approval_decide(request=request, approver=approver, approve=True, reason="go")
    approved = {"tool_id": "faulty::record_note", "arguments": note, "approval_id": request.approval_id}

    async def blocked_while_open():
        async with mcp_client(gateway, token) as c:
            for _ in range(THRESHOLD):
                await _call(c, "crash")
            return await c.call_tool("execute_tool", approved)

    blocked = run(blocked_while_open)
    assert blocked.is_error and blocked.structured_content == {
        "upstream_failure": "circuit_open", "approval_given_back": True, "approval_id": request.approval_id
    }  # fmt: skip
    assert f'with approval_id "{request.approval_id}" runs it' in _text(blocked)
    assert faulty_calls(faulty_call_log, "record_note") == 0
    (event,) = AuditEvent.objects.filter(event_type="execution", tool_ref="faulty::record_note")
    assert (event.outcome, event.payload["failure"], event.payload["approval_given_back"]) == (
        "error", "circuit_open", True
    )  # fmt: skip
    assert ApprovalRequest.objects.get(pk=request.pk).status == "approved"

    time.sleep(COOLDOWN + 0.2)  # the cool-down passes (a wait, not a timed assertion)

    async def the_probe_runs_it():
        async with mcp_client(gateway, token) as c:
            return await c.call_tool("execute_tool", approved)

    ran = run(the_probe_runs_it)
    assert not ran.is_error, _text(ran)
    assert faulty_calls(faulty_call_log, "record_note") == 1
    assert ApprovalRequest.objects.get(pk=request.pk).status == "consumed"


def test_one_persons_calls_that_time_out_never_cut_the_server_off_for_another(
    gateway, admin_user, faulty_server, faulty_call_log, settings
):
    """redteam53 (T13/Z4): a call's timeout counted as a failure of the server, so one person calling a slow tool
    (``hang``, hidden from the other person) until their calls timed out opened the breaker for everyone: another
    person's ``ping``, on a tool of their own, was refused ``circuit_open`` for the cool-down, again after each
    failed probe, without the server failing at all. A timeout is the caller's own (their arguments, their tool):
    it opens only that person's breaker on the server; what fails for every caller (a crash, a refused connection)
    still opens the server's."""
    from catalog.models import Tool

    settings.SCOUT_UPSTREAM_BREAKER_FAILURES = THRESHOLD
    settings.SCOUT_UPSTREAM_BREAKER_COOLDOWN = 30.0  # open for the whole test once open
    settings.SCOUT_MCP_CALL_TIMEOUT = 0.5
    slow, other = make_user("gw_slow"), make_user("gw_other")
    grant(admin_user, faulty_server, slow, "discover", "execute")
    grant(admin_user, Tool.objects.get(tool_id="faulty::ping"), other, "discover", "execute")
    tokens = {person.username: make_token(person) for person in (slow, other)}

    async def hang_then_ping():
        async with mcp_client(gateway, tokens["gw_slow"]) as c:
            hung = [await _call(c, "hang") for _ in range(THRESHOLD)]
            own = await _call(c, "ping", text="mine")
        async with mcp_client(gateway, tokens["gw_other"]) as c:
            return hung, own, await _call(c, "ping", text="still flowing")

    hung, own, others = run(hang_then_ping)
    assert [r.structured_content["upstream_failure"] for r in hung] == ["timeout"] * THRESHOLD
    assert own.structured_content["upstream_failure"] == "circuit_open"  # the slow person's own calls stop
    assert not others.is_error and _text(others) == "still flowing"
    assert faulty_calls(faulty_call_log, "ping") == 1


def _tokens(admin_user: Any, target: Any, *usernames: str) -> dict[str, str]:
    """New people who may discover and execute ``target``, each with a token."""
    people = [make_user(username) for username in usernames]
    for person in people:
        grant(admin_user, target, person, "discover", "execute")
    return {person.username: make_token(person) for person in people}


def _failures(results: list[Any]) -> list[str]:
    return [(r.structured_content or {}).get("upstream_failure", "answered") for r in results]


def test_one_persons_arguments_that_crash_a_stdio_server_never_cut_it_off_for_another(
    gateway, admin_user, faulty_server, faulty_call_log, settings
):
    """redteam56 (T13/L3/Z4): a crash mid-call counted as the server's failure whoever's arguments caused it, so one
    person sending the one input that makes a shared stdio server exit (here echo_json's ``EXIT_ON``, a tool both
    people use) opened its breaker, and the other person's echo_json was refused ``circuit_open`` for the cool-down
    though the server answered it. A failure of a call that was sent is its caller's: it opens that person's own
    breaker; the server's opens when a second person's does (the test above)."""
    from catalog.models import Tool

    settings.SCOUT_UPSTREAM_BREAKER_FAILURES = THRESHOLD
    settings.SCOUT_UPSTREAM_BREAKER_COOLDOWN = 30.0  # open for the whole test once open
    settings.SCOUT_MCP_RESTART_BACKOFF_MAX = 0.5
    tokens = _tokens(admin_user, Tool.objects.get(tool_id="faulty::echo_json"), "gw_attacker", "gw_bystander")

    def echo(client: Any, value: Any) -> Any:
        return client.call_tool("execute_tool", {"tool_id": "faulty::echo_json", "arguments": {"value": value}})

    async def main():
        async with mcp_client(gateway, tokens["gw_attacker"]) as a, mcp_client(gateway, tokens["gw_bystander"]) as b:
            crashes = [await echo(a, EXIT_ON) for _ in range(THRESHOLD + 1)]
            answers = [await echo(b, n) for n in range(2)]
            for n in range(2, 4):  # the attacker goes on: still refused alone
                crashes.append(await echo(a, EXIT_ON))
                answers.append(await echo(b, n))
            return crashes, answers

    crashes, answers = run(main)
    assert _failures(crashes) == ["closed"] * THRESHOLD + ["circuit_open"] * 3
    assert _failures(answers) == ["answered"] * 4
    assert [_text(r) for r in answers] == ["0", "1", "2", "3"]
    assert faulty_calls(faulty_call_log, "echo_json") == THRESHOLD + 4  # the refused crashes reached nothing


def test_one_person_crashing_a_server_through_two_agents_tokens_is_still_one_person(
    gateway, admin_user, faulty_server, faulty_call_log, settings
):
    """redteam60 (T13/L3/Z4): the server's breaker opens once two people's own have (redteam56). One person with two
    agents, each with its own token, opening both "own" breakers would count as two people and cut the shared server
    off alone: the caller is the person (``pool.call(caller=user.pk)``), so their second token is refused as the
    first is, and another person's calls are answered."""
    from catalog.models import Tool
    from governance.models import Agent

    settings.SCOUT_UPSTREAM_BREAKER_FAILURES = THRESHOLD
    settings.SCOUT_UPSTREAM_BREAKER_COOLDOWN = 30.0
    settings.SCOUT_MCP_RESTART_BACKOFF_MAX = 0.5
    tokens = _tokens(admin_user, Tool.objects.get(tool_id="faulty::echo_json"), "gw_attacker", "gw_bystander")
    attacker = api_token_verify(tokens["gw_attacker"]).user
    second = make_token(attacker, agent=Agent.objects.create(user=attacker, name="second", all_user_tools=True))

    def echo(client: Any, value: Any) -> Any:
        return client.call_tool("execute_tool", {"tool_id": "faulty::echo_json", "arguments": {"value": value}})

    async def main():
        async with (
            mcp_client(gateway, tokens["gw_attacker"]) as a,
            mcp_client(gateway, second) as a2,
            mcp_client(gateway, tokens["gw_bystander"]) as b,
        ):
            first = [await echo(a, EXIT_ON) for _ in range(THRESHOLD)]
            other = [await echo(a2, EXIT_ON) for _ in range(THRESHOLD)]
            return first, other, [await echo(b, n) for n in range(2)]

    first, other, answers = run(main)
    assert _failures(first) == ["closed"] * THRESHOLD
    assert _failures(other) == ["circuit_open"] * THRESHOLD  # the same person's breaker, whichever token
    assert [_text(r) for r in answers] == ["0", "1"]


@contextmanager
def _greeter_failing_for(name: str, status: int) -> Iterator[tuple[str, list[str]]]:
    """A real Streamable HTTP MCP server behind a front that answers a call of ``greet`` for ``name`` with ``status``
    and no body (an upstream bug one input triggers) and hands every other request on; yields its URL and ``calls``,
    each tools/call's name."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    upstream = MCPServer("greeter")

    @upstream.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False))
    def greet(name: str) -> str:
        """Greet someone by name."""
        return f"Hello, {name}!"

    calls: list[str] = []
    with serve_http(upstream) as real:

        class FailingForOne(SessionFront):
            real_url = real.url

            def answered(self, message: dict) -> bool:
                if message.get("method") != "tools/call":
                    return False
                calls.append(message["params"]["arguments"].get("name"))
                if message["params"]["arguments"].get("name") != name:
                    return False
                self.empty(status)
                return True

            def do_GET(self):  # noqa: N802 - no standalone event stream
                self.empty(405)

        with serve_front(FailingForOne) as url:
            yield url, calls


@pytest.fixture
def failing_for_one(loopback_upstreams) -> Any:
    """The greeter behind a front answering ``greet`` for "unavailable" 503."""
    with _greeter_failing_for("unavailable", 503) as served:
        yield served


def test_one_persons_arguments_an_http_upstream_answers_5xx_never_cut_it_off_and_a_server_failing_all_still_opens(
    gateway, admin_user, failing_for_one, settings
):
    """redteam56 over a real HTTP upstream: one person's calls it answers 503 (their input) open that person's breaker
    alone, and another person's calls are answered; once a second person's calls fail too, the server's breaker opens
    and a third person's call fails fast, unsent."""
    from catalog.models import Tool

    url, calls = failing_for_one
    settings.SCOUT_UPSTREAM_BREAKER_FAILURES = THRESHOLD
    settings.SCOUT_UPSTREAM_BREAKER_COOLDOWN = 30.0
    sync_server(slug="greeter", transport="http", url=url)
    tokens = _tokens(admin_user, Tool.objects.get(tool_id="greeter::greet"), "gw_attacker", "gw_bystander", "gw_third")

    def greet(client: Any, name: str) -> Any:
        return client.call_tool("execute_tool", {"tool_id": "greeter::greet", "arguments": {"name": name}})

    async def main():
        async with (
            mcp_client(gateway, tokens["gw_attacker"]) as a,
            mcp_client(gateway, tokens["gw_bystander"]) as b,
            mcp_client(gateway, tokens["gw_third"]) as c,
        ):
            attacks = [await greet(a, "unavailable") for _ in range(THRESHOLD + 1)]
            answered = [await greet(b, "Ann"), await greet(c, "Bo")]
            failing = [await greet(b, "unavailable") for _ in range(THRESHOLD)]  # now failing for a second person
            return attacks, answered, failing, await greet(c, "Cy")

    attacks, answered, failing, blocked = run(main)
    assert _failures(attacks) == ["protocol"] * THRESHOLD + ["circuit_open"], [_text(r) for r in attacks]
    assert [_text(r) for r in answered] == ["Hello, Ann!", "Hello, Bo!"]
    assert _failures(failing) == ["protocol"] * THRESHOLD
    assert _failures([blocked]) == ["circuit_open"]
    assert calls == ["unavailable"] * THRESHOLD + ["Ann", "Bo"] + ["unavailable"] * THRESHOLD  # Cy never sent


@pytest.fixture
def missing_for_one(loopback_upstreams) -> Any:
    """The greeter behind a front answering ``greet`` for "missing" HTTP 404 under its session id, on every session (a
    front that routes by the resource asked for, or a server that answers a thing it cannot find 404)."""
    with _greeter_failing_for("missing", 404) as served:
        yield served


def test_one_persons_arguments_an_http_upstream_answers_404_on_a_new_session_too_never_cut_it_off(
    gateway, admin_user, missing_for_one, settings
):
    """redteam60 (T13/L3/Z4): a call answered 404 under its session is sent once more on a new session (upstream11); a
    404 there too was counted as the server's failure (``session_gone``, as if it could not be spoken to) and set its
    restart backoff for everyone. So one person sending the one input a front answers 404 opened the shared server's
    breaker alone, as the 503 of redteam56 did, and another person's call was refused ``circuit_open`` unsent. The
    new session answered its start: the 404 is this call's, counted toward its caller's own breaker and backoff."""
    from catalog.models import Tool

    url, calls = missing_for_one
    settings.SCOUT_UPSTREAM_BREAKER_FAILURES = THRESHOLD
    settings.SCOUT_UPSTREAM_BREAKER_COOLDOWN = 30.0
    sync_server(slug="greeter", transport="http", url=url)
    tokens = _tokens(admin_user, Tool.objects.get(tool_id="greeter::greet"), "gw_attacker", "gw_bystander")

    def greet(client: Any, name: str) -> Any:
        return client.call_tool("execute_tool", {"tool_id": "greeter::greet", "arguments": {"name": name}})

    async def main():
        async with mcp_client(gateway, tokens["gw_attacker"]) as a, mcp_client(gateway, tokens["gw_bystander"]) as b:
            attacks = [await greet(a, "missing") for _ in range(THRESHOLD + 1)]
            return attacks, await greet(b, "Ann")

    attacks, answered = run(main)
    assert _failures(attacks) == ["session_gone"] * THRESHOLD + ["circuit_open"], [_text(r) for r in attacks]
    assert _text(answered) == "Hello, Ann!", _text(answered)
    assert calls == ["missing"] * (2 * THRESHOLD) + ["Ann"]  # each sent on two sessions; the fourth never sent


def test_one_persons_crashes_hold_back_only_their_own_restart(
    gateway, admin_user, faulty_server, faulty_call_log, settings, monkeypatch
):
    """redteam56 (Low, T13/F2): the restart backoff after a crash mid-call was the server's, so the person whose input
    crashed it made everyone wait it out: past the connect timeout, another person's call was refused ``backoff``
    unsent (with the defaults after eight crashes in a row, which that person's own breaker now spaces out but does
    not stop). The backoff after a sent call failed is its caller's: their next call waits it out (F2), another
    person's call starts the server at once. The base is raised so the wait is far past the connect timeout."""
    from catalog.models import Tool
    from mcpgateway import upstreams

    monkeypatch.setattr(upstreams, "RESTART_BACKOFF_BASE", 600.0)
    settings.SCOUT_MCP_RESTART_BACKOFF_MAX = 600
    settings.SCOUT_UPSTREAM_CONNECT_TIMEOUT = 60.0  # a start on a loaded machine; far below the backoff
    tokens = _tokens(admin_user, Tool.objects.get(tool_id="faulty::echo_json"), "gw_attacker", "gw_bystander")

    def echo(client: Any, value: Any) -> Any:
        return client.call_tool("execute_tool", {"tool_id": "faulty::echo_json", "arguments": {"value": value}})

    async def main():
        async with mcp_client(gateway, tokens["gw_attacker"]) as a, mcp_client(gateway, tokens["gw_bystander"]) as b:
            crashed = await echo(a, EXIT_ON)
            answered = await echo(b, "after the crash")
            return crashed, answered, await echo(a, "again")

    crashed, answered, held = run(main)
    assert _failures([crashed, answered, held]) == ["closed", "answered", "backoff"]
    assert _text(answered) == '"after the crash"'
    assert faulty_calls(faulty_call_log, "echo_json") == 2  # the held call was never sent
