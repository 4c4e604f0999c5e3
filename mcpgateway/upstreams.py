"""Live sessions to upstream servers for ``execute_tool``.

One ``UpstreamPool`` per gateway process, running inside the ASGI lifespan. Each server gets a warm session
(a stdio process kept running, or a Streamable HTTP client) opened on first use through
``catalog.upstream.open_session`` and owned by a supervisor task, because an SDK session must be entered and
left in the same task. Calls are bounded three ways: a per-server bulkhead (calls in flight in this process: the
slots and each person's share of them are not shared between gateway processes), a per-call timeout (default
30 s, capped at 120 s) and an output cap. A session that dies (process crash, connection
closed) is torn down and reopened on the next call; the caller whose call it died in waits a backoff that doubles per
consecutive such failure of theirs, and a server that fails to start holds every call back the same way; one found
ended before a call is sent (a process that exited while idle, an HTTP server that no longer accepts connections after
SCOUT_UPSTREAM_IDLE_PROBE_SECONDS idle) is reopened at once and the call sent to the new one, as is one an HTTP server
no longer knows (it answered the call 404 under the session's id: it restarted, and did not take the call).
A circuit breaker per server (``catalog.breaker``) sits in front of all of it: after N consecutive failures of
the server calls fail fast for a cool-down, then one probe decides whether it closes again; a caller's calls that fail
once sent (timed out, crashed, reset, 5xx) count against that caller's own breaker on the server, and the server's opens
only when several callers' have (``catalog.breaker``).
Nothing else is retried here: a call that failed mid-way may have had effects upstream, so the caller decides.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from asgiref.sync import sync_to_async
from django.conf import settings

from catalog.breaker import (
    LEVELS,
    CircuitBreaker,
    breaker_for,
    breaker_forget,
    caller_breaker_failed,
    caller_breaker_for,
    caller_breaker_succeeded,
)
from catalog.choices import Transport
from catalog.egress import EgressTarget
from catalog.openapi import openapi_call, openapi_target
from catalog.upstream import UpstreamError, UpstreamSession, answer_cap, open_session

from .db import run_orm
from .metrics import UPSTREAM_BREAKER_OPENED, UPSTREAM_BREAKER_REJECTED, UPSTREAM_BREAKER_STATE

if TYPE_CHECKING:
    from catalog.models import Server, Tool

logger = logging.getLogger(__name__)

RESTART_BACKOFF_BASE = 0.25  # seconds before the first restart; doubles per consecutive failure
# An OpenAPI call has no session to pin its address: the address checked for one call serves the server's next calls
# for this long (each would otherwise pay a DNS lookup), then is looked up again, as after a failure to connect.
PINNED_ADDRESS_REUSE_SECONDS = 60.0
# Failures of the server itself, which count towards opening its breaker. Not: "busy" (our own bulkhead),
# "backoff" (a restart already pending), "config" (the pool is not running), "circuit_open".
BREAKER_FAILURE_KINDS = frozenset(
    {"timeout", "closed", "refused", "protocol", "error", "not_found", "auth", "session_gone"}
)


class UpstreamCallError(Exception):
    """The upstream call did not produce a result. ``outcome`` is "error" when nothing can have run upstream
    (no connection, bulkhead full) and "unknown" when the call may have run (timeout, crash mid-call)."""

    def __init__(self, message: str, *, kind: str, outcome: str, retry_in: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.outcome = outcome
        self.retry_in = retry_in  # seconds, when the caller should wait before trying again


@dataclass
class CallProgress:
    """How far one call got: set by ``UpstreamPool.call`` as it goes."""

    sent: bool = False
    session_renewed: bool = False  # the server had forgotten the session (a restart): the call went to a new one

    def mark_sent(self) -> None:
        self.sent = True


def call_timeout(requested: float | None = None) -> float:
    """The timeout for one call: the setting (or ``requested``), never above the cap, never below 0.1 s."""
    value = settings.SCOUT_MCP_CALL_TIMEOUT if requested is None else requested
    return max(0.1, min(float(value), float(settings.SCOUT_MCP_CALL_TIMEOUT_CAP)))


def _server_fingerprint(server: Server) -> tuple[Any, ...]:
    """What a session depends on: a change of any of these (an admin edit, a rotated credential) reopens it.
    Environment values are only hashed here, never kept."""
    names = [*(server.env_vars or []), *(server.header_env or {}).values()]
    values = hashlib.sha256("\0".join(f"{n}={os.environ.get(n, '')}" for n in names).encode()).hexdigest()
    return (
        server.transport,
        server.command,
        tuple(server.args or ()),
        server.url,
        str(server.header_env),
        server.base_url,  # an OpenAPI service's calls go there (and its pinned address is that host's)
        str(server.openapi_credentials),
        values,
    )


def capped_result(result: types.CallToolResult, max_bytes: int) -> types.CallToolResult:
    """``result`` unchanged when its JSON fits in ``max_bytes``; otherwise an isError result saying it was cut
    (``output_too_large``: the call ran; the gateway says what to do next, as that depends on the tool's class)."""
    # Bytes as sent (UTF-8), not characters: four-byte characters passed a cap in characters at four times its size.
    size = len(result.model_dump_json(by_alias=True, exclude_none=True).encode("utf-8"))
    if size <= max_bytes:
        return result
    return output_too_large(f"{size} bytes", max_bytes)


class OutputTooLarge(types.CallToolResult):
    """The gateway's own result for an output over the cap, told apart by its class: a key of its structured content
    (``output_too_large``) is one any upstream writes too, and an upstream's forged one skipped the output policy
    (redteam41)."""


def output_too_large(size: str, max_bytes: int) -> OutputTooLarge:
    """The result of a call that ran but whose output (``size``, as said) is over ``max_bytes``: none of it shown."""
    return OutputTooLarge(
        content=[
            types.TextContent(
                type="text",
                text=f"The tool ran, but its output ({size}) was cut: it exceeds the gateway's limit of "
                f"{max_bytes} bytes, so none of it is shown.",
            )
        ],
        structured_content={"output_too_large": True},
        is_error=True,
    )


@dataclass
class _Connection:
    """The supervisor-owned session of one server and its restart state."""

    server: Server
    fingerprint: tuple[Any, ...]
    slots: anyio.Semaphore
    # Calls in flight or waiting for a slot, per caller (``UpstreamPool.call``'s ``caller``: a person).
    callers: dict[Any, int] = field(default_factory=dict)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    session: UpstreamSession | None = None
    closing: anyio.Event | None = None
    failures: int = 0  # failed starts in a row, and when the next start may go (``mark_dead``)
    retry_at: float = 0.0
    # Per caller, calls of theirs in a row that failed once sent and took the session with it, and when their next
    # call may go (``mark_crashed``).
    crashed_by: dict[Any, tuple[int, float]] = field(default_factory=dict)
    starts: int = 0
    used_at: float = 0.0  # when a call last finished on the session (or it opened): ``_still_there`` after a while
    # An OpenAPI service's checked address, reused by its calls for a while: (allow-list, address, until when).
    pinned: tuple[tuple[str, ...], EgressTarget, float] | None = None

    def pinned_target(self) -> EgressTarget | None:
        """The address kept by ``keep_target`` while it is fresh and the allow-list is the one it was checked under."""
        if self.pinned is None:
            return None
        allowed, target, until = self.pinned
        if time.monotonic() >= until or allowed != tuple(settings.SCOUT_UPSTREAM_ALLOWED_HOSTS):
            return None
        return target

    def keep_target(self, target: EgressTarget | None) -> None:
        until = time.monotonic() + PINNED_ADDRESS_REUSE_SECONDS
        self.pinned = None if target is None else (tuple(settings.SCOUT_UPSTREAM_ALLOWED_HOSTS), target, until)

    def close_session(self) -> None:
        """Close the session (its supervisor ends it); the next call opens another."""
        if self.closing is not None:
            self.closing.set()
        self.session = None

    def forget_call(self, caller: Any) -> None:
        """One call of ``caller`` ended (or never took a slot)."""
        left = self.callers.pop(caller, 1) - 1
        if left:
            self.callers[caller] = left

    def mark_dead(self) -> None:
        """The server failed to start or be spoken to: no new session for anyone before its backoff."""
        self.close_session()
        self.failures += 1
        self.retry_at = time.monotonic() + _backoff(self.failures)

    def mark_crashed(self, caller: Any) -> None:
        """A call of ``caller`` failed once sent and the session with it (the process exited, the stream broke):
        maybe for their arguments. The next call opens a new session at once; ``caller``'s own calls wait a backoff
        that doubles while theirs keep failing (redteam56: it was everyone's, so one person's input that crashed a
        server held every other person's calls back, refused ``backoff`` past the connect timeout)."""
        self.close_session()
        failures = self.crashed_by.get(caller, (0, 0.0))[0] + 1
        self.crashed_by[caller] = (failures, time.monotonic() + _backoff(failures))

    def answered(self, caller: Any) -> None:
        self.failures = 0
        self.crashed_by.pop(caller, None)


def _backoff(failures: int) -> float:
    """Seconds before the next try after ``failures`` in a row: doubling from RESTART_BACKOFF_BASE, up to the cap."""
    return min(RESTART_BACKOFF_BASE * 2 ** (failures - 1), settings.SCOUT_MCP_RESTART_BACKOFF_MAX)


def _share() -> int:
    """How many of a server's slots one person may hold while others wait for them."""
    return max(1, settings.SCOUT_MCP_MAX_CALLS_PER_PERSON_PER_SERVER)


class UpstreamPool:
    """Warm sessions to upstream servers, keyed by server primary key. Use inside ``UpstreamPool.running()``."""

    def __init__(self) -> None:
        self._connections: dict[int, _Connection] = {}
        self._task_group: TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[UpstreamPool]:
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            sweep = anyio.CancelScope()

            async def sweeping() -> None:
                with sweep:
                    await self._close_retired_every_while()

            task_group.start_soon(sweeping)
            try:
                yield self
            finally:
                self._task_group = None
                sweep.cancel()  # the sessions end as their closing events are set, as before
                for connection in self._connections.values():
                    if connection.closing is not None:
                        connection.closing.set()
                self._connections.clear()

    async def _close_retired_every_while(self) -> None:
        """Every SCOUT_MCP_SESSION_SWEEP_SECONDS (read before each sleep; 0: never), ``close_retired``. An archived,
        disabled or deleted server's process kept running in every gateway process until it stopped, holding the
        credentials its variables gave it (opsux5: the archived clock server, still running, holding its token). It
        sleeps its whole period: it woke every second to compare clocks (opsux6), in every gateway process."""
        while (every := settings.SCOUT_MCP_SESSION_SWEEP_SECONDS) > 0:
            await anyio.sleep(every)
            try:
                await self.close_retired()
            except Exception:  # noqa: BLE001 - the database may be down; the next sweep tries again
                logger.debug("upstream sessions: the sweep could not read the servers", exc_info=True)

    async def close_retired(self) -> list[str]:
        """Close the open sessions (and forget the connections) of servers no longer Active (archived, disabled,
        failing a sync: their tools reach no client) or deleted, unless a call is in flight on one; the slugs closed.
        A server made Active again opens a session on its next call, as after a restart."""
        from catalog.choices import ServerStatus  # noqa: PLC0415 - beside the models, loaded after the app registry
        from catalog.models import Server  # noqa: PLC0415

        open_pks = [pk for pk, connection in self._connections.items() if connection.session is not None]
        if not open_pks:
            return []

        def active(pks: list[int]) -> set[int]:
            return set(Server.objects.filter(pk__in=pks, status=ServerStatus.ACTIVE).values_list("pk", flat=True))

        serving = await run_orm(active, open_pks)
        closed = []
        for pk in open_pks:
            connection = self._connections.get(pk)
            if pk in serving or connection is None or connection.callers or connection.session is None:
                continue
            del self._connections[pk]
            connection.close_session()
            closed.append(connection.server.slug)
            logger.info("upstream session of %s closed: the server is no longer active", connection.server.slug)
        return closed

    async def close_all(self) -> None:
        """Close every warm session (they reopen on the next call) and reset the circuit breakers. Call from
        the pool's event loop."""
        for connection in self._connections.values():
            if connection.closing is not None:
                connection.closing.set()
        self._connections.clear()
        breaker_forget()

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per server: whether a session is open, how often it was started, failed starts in a row."""
        return {
            c.server.slug: {"open": c.session is not None, "starts": c.starts, "failures": c.failures}
            for c in self._connections.values()
        }

    async def call(
        self,
        *,
        server: Server,
        tool_name: str,
        arguments: dict[str, Any],
        timeout: float,
        progress: CallProgress | None = None,
        tool: Tool | None = None,
        recheck: Callable[[], Awaitable[None]] | None = None,
        caller: Any = None,
    ) -> types.CallToolResult:
        """Call ``tool_name`` on ``server``; the result is capped at ``SCOUT_MCP_MAX_OUTPUT_BYTES``.

        ``progress.sent`` becomes True just before the request goes to the server, so a caller that is
        cancelled can tell "never sent" from "may have run". ``tool`` is the catalog row the call was
        authorized for; an OpenAPI server needs its definition (how to build the request), looked up when
        not given. ``recheck`` is awaited just before a call that had to wait (for a slot of a busy server, or for
        the server to start) is sent: the caller's authorization is then seconds old, and whatever ``recheck``
        raises (access taken away meanwhile) stops the call unsent. Raises UpstreamCallError when no result came
        back (connection, timeout, crash, bulkhead full, or the server's circuit breaker is open: then nothing was
        sent). ``caller`` (a person's key) has a share of the server's slots: ``_take_slot``.
        """
        connection = self._connection(server)
        breaker, own = breaker_for(server.pk), caller_breaker_for(server.pk, caller)
        now = time.monotonic()
        wait = own.admit(now)
        if wait is None:
            wait = breaker.admit(now)
            if wait is not None:
                own.settled()  # its probe, if it was one, tested nothing
        if wait is not None:
            UPSTREAM_BREAKER_REJECTED.labels(server=server.slug).inc()
            seconds = max(1, math.ceil(wait))
            raise UpstreamCallError(
                f"{server.slug}: the server is failing; Scout stopped calling it for {seconds} s",
                kind="circuit_open",
                outcome="error",
                retry_in=seconds,
            )
        UPSTREAM_BREAKER_STATE.labels(server=server.slug).set(LEVELS[breaker.state])  # half-open: the probe
        try:
            result = await self._call(connection, tool_name, arguments, timeout, progress, tool, recheck, caller)
        except UpstreamCallError as exc:
            if exc.kind in BREAKER_FAILURE_KINDS and (exc.outcome == "unknown" or exc.kind == "session_gone"):
                # Sent, then failed (a timeout, a crash or reset mid-call, a 5xx, a 404 on a session just opened):
                # maybe for this caller's tool or arguments. Counted against the caller; the server's opens when
                # several callers' have (redteam56, redteam60).
                opened = breaker.opened_count
                breaker.settled()
                caller_breaker_failed(server.pk, caller, own, time.monotonic())
                self._breaker_counted(breaker, server, opened)
            elif exc.kind in BREAKER_FAILURE_KINDS:
                opened = breaker.opened_count
                breaker.failed(time.monotonic())
                self._breaker_counted(breaker, server, opened)
                own.settled()
            else:
                breaker.settled()
                own.settled()
            raise
        except BaseException:  # cancelled by the caller: says nothing about the server
            breaker.settled()
            own.settled()
            raise
        breaker.succeeded()
        caller_breaker_succeeded(server.pk, caller, own)
        UPSTREAM_BREAKER_STATE.labels(server=server.slug).set(LEVELS[breaker.state])
        return result

    @staticmethod
    def _breaker_counted(breaker: CircuitBreaker, server: Server, opened: int) -> None:
        """A failure was counted: the metrics and log, when it opened the server's breaker (``opened``: its count
        of openings before)."""
        if breaker.opened_count != opened:
            UPSTREAM_BREAKER_OPENED.labels(server=server.slug).inc()
            logger.warning("upstream %s is failing: circuit breaker open", server.slug)
        UPSTREAM_BREAKER_STATE.labels(server=server.slug).set(LEVELS[breaker.state])

    async def _call(
        self,
        connection: _Connection,
        tool_name: str,
        arguments: dict[str, Any],
        timeout: float,
        progress: CallProgress | None,
        tool: Tool | None,
        recheck: Callable[[], Awaitable[None]] | None,
        caller: Any,
    ) -> types.CallToolResult:
        server = connection.server
        held = connection.callers.get(caller, 0)
        connection.callers[caller] = held + 1
        try:
            waited = await self._take_slot(connection, timeout, over_share=caller is not None and held >= _share())
        except BaseException:
            connection.forget_call(caller)
            raise
        try:
            if server.transport == Transport.OPENAPI:
                if waited and recheck is not None:
                    await recheck()
                return await self._call_openapi(connection, tool_name, arguments, timeout, tool, progress)
            # Starting a cold server is bounded by the connect timeout; the call itself by ``timeout``.
            starts = connection.starts
            deadline = time.monotonic() + settings.SCOUT_UPSTREAM_CONNECT_TIMEOUT
            waited = await self._crash_backoff(connection, caller, deadline) or waited
            session = await self._session(connection, deadline)
            if (waited or connection.starts != starts) and recheck is not None:
                await recheck()
            if progress is not None:
                progress.sent = True
            try:
                result = await self._send(connection, session, tool_name, arguments, timeout, tool, recheck, progress)
            except UpstreamError as exc:
                if exc.kind == "too_large":
                    # Its answer passed the line bound (catalog/line_guard.py), which stopped the server: the call ran
                    # and answered, as a capped output (not a crash, which said it may not have run). No backoff.
                    connection.close_session()
                    return output_too_large(f"over {answer_cap()} bytes", settings.SCOUT_MCP_MAX_OUTPUT_BYTES)
                if exc.kind in ("closed", "refused", "protocol", "error"):
                    # The session is unusable (process gone, stream broken): reopen it on the next call.
                    connection.mark_crashed(caller)
                elif exc.kind == "timeout" and server.transport == Transport.HTTP:
                    # The SDK keeps resuming a call's event stream (a GET per second) until the answer comes,
                    # for ever after Scout gave up on it: only closing the session stops it. The next call
                    # opens a new one, without a backoff (the server answered; a call was slow).
                    connection.close_session()
                if exc.kind == "session_gone":
                    # On a new session too, one the server had just opened: it did not take this call, maybe for its
                    # arguments (a front answering 404 for one input). The caller's backoff, not everyone's
                    # (redteam60: one person's input set every person's restart backoff and opened the breaker).
                    connection.mark_crashed(caller)
                    raise UpstreamCallError(str(exc), kind=exc.kind, outcome="error") from exc
                raise UpstreamCallError(str(exc), kind=exc.kind, outcome="unknown") from exc
            connection.answered(caller)
            return capped_result(result, settings.SCOUT_MCP_MAX_OUTPUT_BYTES)
        finally:
            connection.used_at = time.monotonic()
            connection.slots.release()
            connection.forget_call(caller)

    async def _send(
        self,
        connection: _Connection,
        session: UpstreamSession,
        tool_name: str,
        arguments: dict[str, Any],
        timeout: float,
        tool: Tool | None,
        recheck: Callable[[], Awaitable[None]] | None,
        progress: CallProgress | None,
    ) -> types.CallToolResult:
        """Send the call, and once more on a new session when the server answered that it no longer knows this one
        (HTTP 404 under its session id: it restarted, or ended the session): it did not take the call, so it runs once
        (MCP 2025-11-25, "Session Management"). The new session is a start: ``recheck`` runs before the call is sent
        again, and ``progress.session_renewed`` tells the audit. Raises UpstreamError as ``call_tool`` does."""
        schema = tool.input_schema if tool is not None else None
        try:
            return await session.call_tool(tool_name, arguments, timeout, schema)
        except UpstreamError as exc:
            if exc.kind != "session_gone":
                raise
        logger.info(
            "upstream %s no longer knew its session (restarted?): the call goes to a new one", session.server.slug
        )
        if connection.session is session:  # another call may have opened the new one already
            connection.close_session()
        session = await self._session(connection, time.monotonic() + settings.SCOUT_UPSTREAM_CONNECT_TIMEOUT)
        if recheck is not None:
            await recheck()
        if progress is not None:
            progress.session_renewed = True
        return await session.call_tool(tool_name, arguments, timeout, schema)

    @staticmethod
    async def _take_slot(connection: _Connection, timeout: float, *, over_share: bool) -> bool:
        """Take one of the server's slots, waiting for one up to ``timeout``; whether the call had to wait.

        A caller already holding (or waiting for) its share of the slots (SCOUT_MCP_MAX_CALLS_PER_PERSON_PER_SERVER)
        takes only a slot that is free with nobody waiting for it, or none: a lone caller still has the whole
        server, but never queues ahead of another, who gets the next slot that frees (the slots are handed out in
        order), so slow calls of one person keep nobody else waiting longer than one call.
        """
        server = connection.server
        try:
            if over_share and connection.slots.statistics().tasks_waiting:
                raise anyio.WouldBlock
            connection.slots.acquire_nowait()
            return False
        except anyio.WouldBlock:
            if over_share:
                raise UpstreamCallError(
                    f"{server.slug}: this person already has {_share()} calls in flight to it "
                    "(SCOUT_MCP_MAX_CALLS_PER_PERSON_PER_SERVER) and the server is busy",
                    kind="caller_busy",
                    outcome="error",
                ) from None
        try:
            with anyio.fail_after(timeout):
                await connection.slots.acquire()
        except TimeoutError as exc:
            raise UpstreamCallError(
                f"{server.slug}: too many calls in flight; try again shortly", kind="busy", outcome="error"
            ) from exc
        return True

    async def _call_openapi(
        self,
        connection: _Connection,
        tool_name: str,
        arguments: dict[str, Any],
        timeout: float,
        tool: Tool | None,
        progress: CallProgress | None,
    ) -> types.CallToolResult:
        """One HTTP request: no session to keep warm, only the bulkhead, the timeout, the output cap and the
        address checked for an earlier call (``_Connection.pinned_target``). ``progress.sent`` is set once the
        request is built, just before it is sent: one httpx could not write (a header value it cannot encode) was
        never sent (opsux11: its approval is given back)."""
        server = connection.server
        if tool is None:
            from catalog.models import Tool  # noqa: PLC0415 - models load after the app registry

            tool = await sync_to_async(Tool.objects.get)(server=server, name=tool_name)
        try:
            pinned = connection.pinned_target()
            if pinned is None:
                pinned = await openapi_target(server)
                connection.keep_target(pinned)
            result = await openapi_call(
                server,
                tool.input_schema,
                arguments,
                timeout=timeout,
                max_bytes=settings.SCOUT_MCP_MAX_OUTPUT_BYTES,
                pinned=pinned,
                sending=None if progress is None else progress.mark_sent,
            )
        except UpstreamError as exc:
            if exc.kind in ("refused", "timeout"):
                connection.keep_target(None)  # the address may have moved: look it up again next time
            # Nothing was sent when the request was refused before it left or could not connect.
            outcome = "error" if exc.kind in ("config", "refused") else "unknown"
            raise UpstreamCallError(str(exc), kind=exc.kind, outcome=outcome) from exc
        return capped_result(result, settings.SCOUT_MCP_MAX_OUTPUT_BYTES)

    def _connection(self, server: Server) -> _Connection:
        fingerprint = _server_fingerprint(server)
        connection = self._connections.get(server.pk)
        if connection is not None and connection.fingerprint != fingerprint:
            if connection.closing is not None:
                connection.closing.set()
            connection = None
            breaker_forget(server.pk)  # a changed configuration (a fixed command, a new credential) starts afresh
        if connection is None:
            connection = _Connection(
                server=server,
                fingerprint=fingerprint,
                slots=anyio.Semaphore(settings.SCOUT_MCP_MAX_CALLS_PER_SERVER),
            )
            self._connections[server.pk] = connection
        return connection

    @staticmethod
    async def _crash_backoff(connection: _Connection, caller: Any, deadline: float) -> bool:
        """Wait out ``caller``'s own backoff after calls of theirs crashed the session (``mark_crashed``), or refuse
        the call unsent when it ends past ``deadline``; outside the connection's lock, which others' calls take.
        Whether it waited (the call's authorization is then checked again before it is sent)."""
        wait = connection.crashed_by.get(caller, (0, 0.0))[1] - time.monotonic()
        if wait <= 0:
            return False
        if wait >= deadline - time.monotonic():
            raise UpstreamCallError(
                f"{connection.server.slug}: this person's last call failed there; their next may go in {wait:.1f}s",
                kind="backoff",
                outcome="error",
            )
        await anyio.sleep(wait)
        return True

    async def _session(self, connection: _Connection, deadline: float) -> UpstreamSession:
        if self._task_group is None:
            raise UpstreamCallError("the gateway's upstream pool is not running", kind="config", outcome="error")
        async with connection.lock:
            if connection.session is not None and not await self._still_there(connection, deadline):
                # Its process exited (or the server closed the stream, or an HTTP server stopped) while no call was in
                # flight: this call was not sent, so it goes to a new session, as a first start (no backoff), instead
                # of failing as a crash that may have run (a server still down refuses the new one: nothing ran).
                logger.info("upstream session of %s had ended while idle: starting it again", connection.server.slug)
                connection.close_session()
            if connection.session is not None:
                return connection.session
            wait = connection.retry_at - time.monotonic()
            if wait > 0:
                if time.monotonic() + wait >= deadline:
                    raise UpstreamCallError(
                        f"{connection.server.slug}: the server failed recently; restarting in {wait:.1f}s",
                        kind="backoff",
                        outcome="error",
                    )
                await anyio.sleep(wait)
            ready = anyio.Event()
            outcome: dict[str, Any] = {}
            connection.closing = anyio.Event()
            connection.starts += 1
            self._task_group.start_soon(self._supervise, connection, connection.closing, ready, outcome)
            with anyio.move_on_after(max(0.1, deadline - time.monotonic())):
                await ready.wait()
            if "session" in outcome:
                connection.session = outcome["session"]
                connection.used_at = time.monotonic()
                return connection.session
            connection.closing.set()
            connection.mark_dead()
            error = outcome.get("error")
            if error is None:
                raise UpstreamCallError(
                    f"{connection.server.slug}: timed out while connecting", kind="timeout", outcome="error"
                )
            raise UpstreamCallError(str(error), kind=getattr(error, "kind", "error"), outcome="error")

    @staticmethod
    async def _still_there(connection: _Connection, deadline: float) -> bool:
        """Whether the warm session can take a call: not ended, and an HTTP server idle for
        ``SCOUT_UPSTREAM_IDLE_PROBE_SECONDS`` or more still accepts connections (``UpstreamSession.reachable``)."""
        session = connection.session
        if session is None or session.ended:
            return False
        if time.monotonic() - connection.used_at < settings.SCOUT_UPSTREAM_IDLE_PROBE_SECONDS:
            return True
        return await session.reachable(
            max(0.1, min(settings.SCOUT_UPSTREAM_CONNECT_TIMEOUT, deadline - time.monotonic()))
        )

    async def _supervise(
        self, connection: _Connection, closing: anyio.Event, ready: anyio.Event, outcome: dict[str, Any]
    ) -> None:
        """Own one session from open to close; it closes when ``closing`` is set or the pool stops."""
        try:
            async with open_session(connection.server) as session:
                outcome["session"] = session
                ready.set()
                await closing.wait()
        except Exception as exc:  # a failed open or a teardown error; the caller reads it from ``outcome``
            outcome.setdefault("error", exc)
            logger.info("upstream session of %s ended: %s", connection.server.slug, exc)
        finally:
            ready.set()
            if connection.closing is closing:
                connection.session = None
