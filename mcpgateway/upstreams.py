"""Live sessions to upstream servers for ``execute_tool``.

One ``UpstreamPool`` per gateway process, running inside the ASGI lifespan. Each server gets a warm session
(a stdio process kept running, or a Streamable HTTP client) opened on first use through
``catalog.upstream.open_session`` and owned by a supervisor task, because an SDK session must be entered and
left in the same task. Calls are bounded three ways: a per-server bulkhead (calls in flight), a per-call
timeout (default 30 s, capped at 120 s) and an output cap. A session that dies (process crash, connection
closed) is torn down and reopened on the next call after a backoff that doubles per consecutive failure.
Nothing is retried here: a call that failed mid-way may have had effects upstream, so the caller decides.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from asgiref.sync import sync_to_async
from django.conf import settings

from catalog.choices import Transport
from catalog.openapi import openapi_call
from catalog.upstream import UpstreamError, UpstreamSession, open_session

if TYPE_CHECKING:
    from catalog.models import Server, Tool

logger = logging.getLogger(__name__)

RESTART_BACKOFF_BASE = 0.25  # seconds before the first restart; doubles per consecutive failure


class UpstreamCallError(Exception):
    """The upstream call did not produce a result. ``outcome`` is "error" when nothing can have run upstream
    (no connection, bulkhead full) and "unknown" when the call may have run (timeout, crash mid-call)."""

    def __init__(self, message: str, *, kind: str, outcome: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.outcome = outcome


@dataclass
class CallProgress:
    """How far one call got: set by ``UpstreamPool.call`` as it goes."""

    sent: bool = False


def call_timeout(requested: float | None = None) -> float:
    """The timeout for one call: the setting (or ``requested``), never above the cap, never below 0.1 s."""
    value = settings.SCOUT_MCP_CALL_TIMEOUT if requested is None else requested
    return max(0.1, min(float(value), float(settings.SCOUT_MCP_CALL_TIMEOUT_CAP)))


def _server_fingerprint(server: Server) -> tuple[Any, ...]:
    """What a session depends on: a change of any of these (an admin edit, a rotated credential) reopens it.
    Environment values are only hashed here, never kept."""
    names = [*(server.env_vars or []), *(server.header_env or {}).values()]
    values = hashlib.sha256("\0".join(f"{n}={os.environ.get(n, '')}" for n in names).encode()).hexdigest()
    return (server.transport, server.command, tuple(server.args or ()), server.url, str(server.header_env), values)


def capped_result(result: types.CallToolResult, max_bytes: int) -> types.CallToolResult:
    """``result`` unchanged when its JSON fits in ``max_bytes``; otherwise an isError result saying it was cut."""
    size = len(result.model_dump_json(by_alias=True, exclude_none=True))
    if size <= max_bytes:
        return result
    return types.CallToolResult(
        content=[
            types.TextContent(
                type="text",
                text=f"The tool's output ({size} bytes) was cut: it exceeds the gateway's limit of {max_bytes} "
                "bytes. Ask for less, for example with a filter, a smaller page or a narrower query.",
            )
        ],
        is_error=True,
    )


@dataclass
class _Connection:
    """The supervisor-owned session of one server and its restart state."""

    server: Server
    fingerprint: tuple[Any, ...]
    slots: anyio.Semaphore
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    session: UpstreamSession | None = None
    closing: anyio.Event | None = None
    failures: int = 0
    retry_at: float = 0.0
    starts: int = 0

    def mark_dead(self) -> None:
        if self.closing is not None:
            self.closing.set()
        self.session = None
        self.failures += 1
        self.retry_at = time.monotonic() + min(
            RESTART_BACKOFF_BASE * 2 ** (self.failures - 1), settings.SCOUT_MCP_RESTART_BACKOFF_MAX
        )


class UpstreamPool:
    """Warm sessions to upstream servers, keyed by server primary key. Use inside ``UpstreamPool.running()``."""

    def __init__(self) -> None:
        self._connections: dict[int, _Connection] = {}
        self._task_group: TaskGroup | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[UpstreamPool]:
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            try:
                yield self
            finally:
                self._task_group = None
                for connection in self._connections.values():
                    if connection.closing is not None:
                        connection.closing.set()
                self._connections.clear()

    async def close_all(self) -> None:
        """Close every warm session (they reopen on the next call). Call from the pool's event loop."""
        for connection in self._connections.values():
            if connection.closing is not None:
                connection.closing.set()
        self._connections.clear()

    @property
    def is_running(self) -> bool:
        return self._task_group is not None

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per server: whether a session is open, how often it was started, consecutive failures."""
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
    ) -> types.CallToolResult:
        """Call ``tool_name`` on ``server``; the result is capped at ``SCOUT_MCP_MAX_OUTPUT_BYTES``.

        ``progress.sent`` becomes True just before the request goes to the server, so a caller that is
        cancelled can tell "never sent" from "may have run". ``tool`` is the catalog row the call was
        authorized for; an OpenAPI server needs its definition (how to build the request), looked up when
        not given. Raises UpstreamCallError when no result came back (connection, timeout, crash, bulkhead
        full).
        """
        connection = self._connection(server)
        try:
            with anyio.fail_after(timeout):
                await connection.slots.acquire()
        except TimeoutError as exc:
            raise UpstreamCallError(
                f"{server.slug}: too many calls in flight; try again shortly", kind="busy", outcome="error"
            ) from exc
        try:
            if server.transport == Transport.OPENAPI:
                if progress is not None:
                    progress.sent = True
                return await self._call_openapi(server, tool_name, arguments, timeout, tool)
            # Starting a cold server is bounded by the connect timeout; the call itself by ``timeout``.
            session = await self._session(connection, time.monotonic() + settings.SCOUT_UPSTREAM_CONNECT_TIMEOUT)
            if progress is not None:
                progress.sent = True
            try:
                result = await session.call_tool(tool_name, arguments, timeout)
            except UpstreamError as exc:
                if exc.kind in ("closed", "refused", "protocol", "error"):
                    # The session is unusable (process gone, stream broken): reopen it on the next call.
                    connection.mark_dead()
                raise UpstreamCallError(str(exc), kind=exc.kind, outcome="unknown") from exc
            connection.failures = 0
            return capped_result(result, settings.SCOUT_MCP_MAX_OUTPUT_BYTES)
        finally:
            connection.slots.release()

    async def _call_openapi(
        self, server: Server, tool_name: str, arguments: dict[str, Any], timeout: float, tool: Tool | None
    ) -> types.CallToolResult:
        """One HTTP request: no session to keep warm, only the bulkhead, the timeout and the output cap."""
        if tool is None:
            from catalog.models import Tool  # noqa: PLC0415 - models load after the app registry

            tool = await sync_to_async(Tool.objects.get)(server=server, name=tool_name)
        try:
            result = await openapi_call(
                server, tool.input_schema, arguments, timeout=timeout, max_bytes=settings.SCOUT_MCP_MAX_OUTPUT_BYTES
            )
        except UpstreamError as exc:
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
        if connection is None:
            connection = _Connection(
                server=server,
                fingerprint=fingerprint,
                slots=anyio.Semaphore(settings.SCOUT_MCP_MAX_CALLS_PER_SERVER),
            )
            self._connections[server.pk] = connection
        return connection

    async def _session(self, connection: _Connection, deadline: float) -> UpstreamSession:
        if self._task_group is None:
            raise UpstreamCallError("the gateway's upstream pool is not running", kind="config", outcome="error")
        async with connection.lock:
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
                return connection.session
            connection.closing.set()
            connection.mark_dead()
            error = outcome.get("error")
            if error is None:
                raise UpstreamCallError(
                    f"{connection.server.slug}: timed out while connecting", kind="timeout", outcome="error"
                )
            raise UpstreamCallError(str(error), kind=getattr(error, "kind", "error"), outcome="error")

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
