"""The one place Scout talks to upstream MCP servers: connect, list tools, call tools, hear list changes.
(OpenAPI services, the other kind of upstream, are spoken to by its sibling package ``catalog.openapi``.)

Used by catalog sync (``list_tools``) and by the gateway's tool execution (``open_session`` for warm
sessions, ``call_tool`` for one-shot calls). ORM-free apart from reading a Server's connection fields, so
it runs the same in a Celery task, a management command or an async gateway handler.

Every failure surfaces as one ``UpstreamError`` whose message says what went wrong in words an operator
can act on (command not found, connection refused, timed out, protocol error), never with a secret value.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import math
import os
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
import mcp_types as types
from django.conf import settings
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from catalog.choices import Transport
from catalog.egress import EgressRefused, EgressTarget, egress_resolved
from catalog.line_guard import ANSWER_TOO_LONG, UNASKED_PER_SECOND, Budget, Outstanding
from catalog.schemas import MAX_SCHEMA_DEPTH
from catalog.secrets import json_secrets_removed, secrets_removed, server_secrets

if TYPE_CHECKING:
    from catalog.models import Server

logger = logging.getLogger(__name__)

# Besides the SDK's defaults (HOME, LOGNAME, PATH, SHELL, TERM, USER), variables a process commonly needs
# to start and decode text. Everything else must be named in Server.env_vars.
BASIC_ENV_VARS = ("LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")
STDERR_TAIL_CHARS = 1500
STDERR_MAX_BYTES = 1024 * 1024
LINE_GUARD = Path(__file__).with_name("line_guard.py")  # runs every stdio server, its stdout lines and stderr bounded
TOOLS_LIST_CHANGED = "notifications/tools/list_changed"

T = TypeVar("T")
MessageHandler = Callable[[Any], Awaitable[None]]


def is_tools_list_changed(message: object) -> bool:
    """Whether a message handed to ``open_session``'s ``message_handler`` is a tools/list_changed notification."""
    return isinstance(message, types.ToolListChangedNotification)


class UpstreamError(Exception):
    """Talking to an upstream server failed. ``str(error)`` is a readable message for SyncRun and admin."""

    def __init__(self, message: str, *, kind: str = "error") -> None:
        super().__init__(message)
        self.kind = kind  # config, not_found, refused, timeout, protocol, closed, too_large, session_gone, error


def _fail(server: Server, message: str, kind: str) -> UpstreamError:
    """An error about ``server`` whose message never carries a value Scout gave it: it is shown in the admin, kept
    with the sync run and logged, and a server's stderr or answer may quote its own token (T14)."""
    return UpstreamError(f"{server.slug}: {secrets_removed(message, server_secrets(server))}", kind=kind)


# pydantic, which the SDK reads every message with, stops parsing JSON nested deeper than this (its recursion limit).
SDK_JSON_DEPTH = 200
_TOO_DEEP = re.compile(r"recursion limit exceeded at line \d+ column \d+")


def _too_deep(server: Server, doing: str, where: str) -> UpstreamError:
    """The error for a message the SDK could not read because it nests too deeply (``where``: its parse error's
    position). Over stdio the SDK only logs such a message and drops it, so the request it answered waited for its
    whole timeout: "timed out while listing tools"."""
    return _fail(
        server,
        f"protocol error while {doing}: the server's answer nests more than about {SDK_JSON_DEPTH} levels, which the"
        f" MCP SDK cannot read ({where}), so none of it was read; Scout itself refuses a tool definition nested more"
        f" than {MAX_SCHEMA_DEPTH} levels",
        "protocol",
    )


class _TooDeepWatch:
    """A session's message handler (passing every message on to the caller's): notes a message the SDK dropped as
    nested too deeply, so a listing waiting for its answer fails at once, saying why."""

    def __init__(self, forward: MessageHandler | None) -> None:
        self.forward = forward
        self.seen = anyio.Event()
        self.where = ""

    async def __call__(self, message: Any) -> None:
        found = _TOO_DEEP.search(str(message)) if isinstance(message, ValueError) else None
        if found is not None:
            self.where = found.group()
            self.seen.set()
        if self.forward is not None:
            await self.forward(message)


def listing_cap_check(server: Server, count: int, listing: str) -> None:
    """Raise UpstreamError when ``listing`` (an MCP tools/list, an OpenAPI document) holds more than
    SCOUT_UPSTREAM_MAX_TOOLS tools: each costs a row, a review and an index entry, at every sync (T13)."""
    if count > settings.SCOUT_UPSTREAM_MAX_TOOLS:
        raise _fail(
            server,
            f"{listing} listed more than {settings.SCOUT_UPSTREAM_MAX_TOOLS} tools (SCOUT_UPSTREAM_MAX_TOOLS)",
            "protocol",
        )


# --- connection ---------------------------------------------------------------------------------


def _resolve_command(server: Server) -> str:
    """The executable to start. A bare name not on PATH is also looked up next to this Python, so the
    servers installed into Scout's virtualenv start without activating it."""
    command = server.command.strip()
    if not command:
        raise _fail(server, "no command configured for this stdio server", "config")
    if os.sep in command:
        if not (os.path.isfile(command) and os.access(command, os.X_OK)):
            raise _fail(server, f"command not found or not executable: {command}", "not_found")
        return command
    found = shutil.which(command)
    if found:
        return found
    beside_python = Path(sys.executable).parent / command
    if beside_python.is_file() and os.access(beside_python, os.X_OK):
        return str(beside_python)
    raise _fail(server, f"command not found: {command!r} is not on PATH", "not_found")


def _process_env(server: Server) -> dict[str, str]:
    """Only the variables the server names, plus locale basics; never Scout's whole environment."""
    env = {name: os.environ[name] for name in BASIC_ENV_VARS if name in os.environ}
    missing = [name for name in server.env_vars or [] if name not in os.environ]
    if missing:
        raise _fail(server, f"environment variable(s) not set: {', '.join(missing)}", "config")
    env.update({name: os.environ[name] for name in server.env_vars or []})
    return env


def _headers(server: Server) -> dict[str, str]:
    header_env = server.header_env or {}
    missing = [name for name in header_env.values() if name not in os.environ]
    if missing:
        raise _fail(server, f"environment variable(s) for headers not set: {', '.join(missing)}", "config")
    return {header: os.environ[name] for header, name in header_env.items()}


_DEFAULT_PORTS = {"http": 80, "https": 443}
# The least time between two GET requests of one session (its event stream opened again, or a call's stream resumed):
# the SDK reopens a stream the server closed after the server's own SSE ``retry`` delay, which may be 0.
GET_INTERVAL_SECONDS = 1.0


def answer_cap() -> int:
    """The most bytes Scout reads of one upstream answer (a JSON body, one event of an event stream, a stdio line): four
    times the output cap, so an answer the gateway would cap still arrives whole, and never under 1 MB."""
    return max(4 * settings.SCOUT_MCP_MAX_OUTPUT_BYTES, 1024 * 1024)


ANSWER_OVER_CAP = "the server's answer is over the"  # AnswerTooLarge's words, which the SDK passes on in its error


class AnswerTooLarge(httpx2.StreamError):
    """An upstream's answer body passed ``answer_cap``. A StreamError, so the SDK answers the request it was for with
    an error carrying this message and closes the response (and its connection)."""


class _CappedBody(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, limit: int) -> None:
        self._stream, self._limit = stream, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._stream:
            read += len(chunk)
            if read > self._limit:
                raise AnswerTooLarge(f"{ANSWER_OVER_CAP} {self._limit}-byte limit")
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


# What the pinned transport answers a request refused with HTTP 404 under a session id: the server no longer knows the
# session (it restarted, or ended it), so it did not take the request (MCP 2025-11-25, transports, "Session
# Management"). The SDK passes the words on in its error; the random part keeps a server's own error from reading so.
SESSION_GONE = f"the server no longer knows this session (HTTP 404) [{secrets.token_hex(8)}]"


def _session_gone_answer(request: httpx2.Request) -> httpx2.Response | None:
    """The JSON-RPC error (``SESSION_GONE``) for a POSTed request the server answered 404 under its session id, or
    None (a notification, an answer, a body that is not one request: the SDK reads the server's own 404)."""
    try:
        message = json.loads(request.content)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    error = {"code": types.INVALID_REQUEST, "message": SESSION_GONE}
    return httpx2.Response(404, json={"jsonrpc": "2.0", "id": message["id"], "error": error})


class CompressedAnswer(httpx2.StreamError):
    """An upstream compressed its answer though Scout asked for it uncompressed (``Accept-Encoding: identity``): the
    bound counts bytes as they arrive, and a gzip body decompresses to a thousand times its size. Refused before any
    of it is decompressed, as the SDK answers a StreamError (``AnswerTooLarge``)."""


class _RefusedBody(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, refusal: httpx2.StreamError) -> None:
        self._stream, self._refusal = stream, refusal

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raise self._refusal
        yield b""  # an async generator, never reached

    async def aclose(self) -> None:
        await self._stream.aclose()


class _UnaskedEventsBounded(httpx2.AsyncByteStream):
    """An event stream whose events that answer no request of the gateway's (notifications, the server's own
    requests, events with no JSON-RPC message, answers to no request the session sent or to one already answered)
    pass at most ``UNASKED_PER_SECOND`` a second per session (``budget``); the first answer to each request sent
    (``outstanding``) always passes. As ``line_guard`` bounds a stdio server's (T13): each event costs the event loop
    every client shares a parse and a callback, and a server may send them at network speed, unasked and while idle (a
    2025-11-25 session's own stream). Events are split at a blank line (line ends made ``\n``); one longer than
    ``limit`` bytes is refused as an answer too large (the SDK refuses it anyway, ``max_sse_event_size``)."""

    def __init__(
        self, stream: httpx2.AsyncByteStream, budget: Budget, outstanding: Outstanding, limit: int, host: str
    ) -> None:
        self._stream, self._budget, self._outstanding = stream, budget, outstanding
        self._limit, self._host = limit, host

    async def __aiter__(self) -> AsyncIterator[bytes]:
        buffer, held = bytearray(), b""  # the event so far (line ends made \n); a \r that may start a \r\n
        async for chunk in self._stream:
            chunk = held + chunk
            held = b"\r" if chunk.endswith(b"\r") else b""
            scanned = max(0, len(buffer) - 1)  # a blank line may straddle the chunks
            buffer += chunk[: len(chunk) - len(held)].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            kept, start = [], 0
            while (end := buffer.find(b"\n\n", max(start, scanned))) >= 0:
                if self._passes(buffer[start:end]):
                    kept.append(bytes(buffer[start : end + 2]))
                start = end + 2
            del buffer[:start]
            if len(buffer) > self._limit:
                raise AnswerTooLarge(f"{ANSWER_OVER_CAP} {self._limit}-byte limit")
            if kept:
                yield b"".join(kept)
        if buffer or held:
            yield bytes(buffer) + held

    def _passes(self, event: bytes) -> bool:
        data = b"\n".join(line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:"))
        if self._outstanding.answered(data) or self._budget.take():
            return True
        if math.log10(self._budget.dropped).is_integer():  # told at 1, 10, 100, ...
            logger.warning(
                "upstream %s: dropped %d event(s) it did not ask for, past %d a second",
                self._host,
                self._budget.dropped,
                UNASKED_PER_SECOND,
            )
        return False

    async def aclose(self) -> None:
        await self._stream.aclose()


class _PinnedTransport(httpx2.AsyncBaseTransport):
    """Sends every request of one session to the address ``egress_check`` approved when it connected (``Host`` and
    TLS SNI still name the host), so a second DNS answer cannot move the session elsewhere (DNS rebinding); a
    request for any other origin (a redirect the SDK might follow) is refused, never sent.

    A body that is not an event stream (the JSON answer the SDK reads whole into memory) is cut at ``answer_cap``
    bytes (T13); an event stream is read event by event, each event capped, and its events that answer nothing the
    gateway asked bounded to ``UNASKED_PER_SECOND`` a second (``_UnaskedEventsBounded``).
    Answers are asked for uncompressed and a compressed one is refused (``CompressedAnswer``): the bound counts the
    bytes on the wire, which a gzip body multiplies by up to a thousand. GET requests are spaced (``_space_gets``)."""

    def __init__(self, target: EgressTarget) -> None:
        self._target = target
        self._origin = urlsplit(target.url)
        self._inner = httpx2.AsyncHTTPTransport()
        self._cap = answer_cap()
        self._next_get = 0.0
        self._unasked = Budget(UNASKED_PER_SECOND)  # the session's, over all its event streams
        self._outstanding = Outstanding()  # the session's requests not yet answered

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url, origin = request.url, self._origin
        # httpx drops a default port and keeps an address's case; the checked URL may spell either.
        asked = (url.scheme, url.host.lower(), url.port or _DEFAULT_PORTS.get(url.scheme))
        if asked != (origin.scheme, self._target.host, origin.port or _DEFAULT_PORTS.get(origin.scheme)):
            raise httpx2.ConnectError(f"refused: {safe_url(str(url))} is not the server's checked origin")
        request.url = url.copy_with(host=str(self._target.address))
        request.headers["Host"] = self._target.host_header
        if url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": self._target.host}
        request.headers["Accept-Encoding"] = "identity"
        if request.method == "GET":
            await self._space_gets()
        elif request.method == "POST":
            self._outstanding.sent(request.content)  # the SDK sends one message a POST, read whole (json=)
        response = await self._inner.handle_async_request(request)
        if response.status_code == 404 and request.method == "POST" and "mcp-session-id" in request.headers:
            gone = _session_gone_answer(request)
            if gone is not None:
                await response.aclose()
                return gone
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            refusal = CompressedAnswer("the server's answer is compressed, though asked not to be")
            body: httpx2.AsyncByteStream = _RefusedBody(response.stream, refusal)  # type: ignore[arg-type]
        elif response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            stream = response.stream
            body = _UnaskedEventsBounded(stream, self._unasked, self._outstanding, self._cap, self._target.host)  # type: ignore[arg-type]
        else:
            body = _CappedBody(response.stream, self._cap)  # type: ignore[arg-type]
        return httpx2.Response(
            response.status_code, headers=response.headers, stream=body, extensions=response.extensions
        )

    async def _space_gets(self) -> None:
        """Wait until GET_INTERVAL_SECONDS after the session's previous GET. A server answering each GET with
        ``retry: 0`` and closing the stream had the gateway open it again at once, hundreds of times a second for
        as long as the session stayed warm, on the event loop every client shares (T13)."""
        now = anyio.current_time()
        start, self._next_get = max(now, self._next_get), max(now, self._next_get) + GET_INTERVAL_SECONDS
        await anyio.sleep(start - now)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _egress_target(server: Server) -> EgressTarget:
    """The checked, resolved address of an HTTP server's URL (``SCOUT_UPSTREAM_ALLOWED_HOSTS``), asked for at
    every connection: a name may resolve elsewhere than when it was registered. Raises UpstreamError "config"."""
    if not server.url:
        raise _fail(server, "no URL configured for this Streamable HTTP server", "config")
    try:
        return await egress_resolved(server.url)
    except EgressRefused as exc:
        raise _fail(server, f"URL refused: {exc}", "config") from exc


@asynccontextmanager
async def _http_transport(target: EgressTarget, headers: dict[str, str], connect_timeout: float) -> AsyncIterator[Any]:
    # Read timeout stays long: a Streamable HTTP response is an event stream that may idle between events. Not
    # from the environment (trust_env): a proxy would choose the address, not the check.
    timeout = httpx2.Timeout(connect_timeout, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    transport = _PinnedTransport(target)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, transport=transport, trust_env=False) as client:
        async with streamable_http_client(target.url, http_client=client, max_sse_event_size=answer_cap()) as streams:
            yield streams


def _transport(
    server: Server, *, connect_timeout: float, errlog: IO[str] | None, target: EgressTarget | None = None
) -> Any:
    if server.transport == Transport.STDIO:
        # Through line_guard: the SDK would keep a line without a newline whole, however long (C1-28), and the
        # server's stderr would fill the disk between two calls.
        params = StdioServerParameters(
            command=sys.executable,
            args=[
                *("-I", "-S", str(LINE_GUARD), str(answer_cap()), str(STDERR_MAX_BYTES)),
                *(_resolve_command(server), *(server.args or [])),
            ],
            env=_process_env(server),
            encoding_error_handler="replace",  # invalid UTF-8 becomes U+FFFD; "strict" stalled the session (C1-27)
        )
        return stdio_client(params, errlog=errlog) if errlog is not None else stdio_client(params)
    if server.transport == Transport.HTTP:
        if target is None:
            raise _fail(server, "no checked URL for this Streamable HTTP server", "config")
        return _http_transport(target, _headers(server), connect_timeout)
    raise _fail(server, f"transport {server.transport!r} has no live connection", "config")


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _pick(exc: BaseException) -> BaseException:
    """The most telling exception inside a (possibly nested) task-group failure."""
    leaves = _leaves(exc)
    for preferred in (UpstreamError, OSError, httpx2.HTTPError, TimeoutError, MCPError, ValidationError):
        for leaf in leaves:
            if isinstance(leaf, preferred):
                return leaf
    return leaves[0]


def safe_url(url: str) -> str:
    """The URL without user info, query or fragment, which may carry credentials: fit for messages and logs."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "<invalid URL>"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _translate(server: Server, exc: BaseException, *, doing: str, timeout: float | None, stderr: str) -> UpstreamError:
    """Map SDK, network and process errors to one readable UpstreamError."""
    exc = _pick(exc)
    tail = f" (server stderr: {stderr.strip()[-STDERR_TAIL_CHARS:]})" if stderr.strip() else ""
    url = safe_url(server.url)
    after = f" after {timeout:g}s" if timeout is not None else ""
    if isinstance(exc, UpstreamError):
        return exc
    if isinstance(exc, FileNotFoundError | PermissionError):
        return _fail(server, f"command not found or not executable: {server.command} ({exc.strerror})", "not_found")
    if isinstance(exc, TimeoutError):
        return _fail(server, f"timed out{after} while {doing}{tail}", "timeout")
    if isinstance(exc, httpx2.ConnectError | ConnectionRefusedError):
        return _fail(server, f"connection refused or unreachable: {url} ({_scrub(exc, server)})", "refused")
    if isinstance(exc, httpx2.TimeoutException):
        return _fail(server, f"HTTP timeout while {doing}: {url}", "timeout")
    if isinstance(exc, httpx2.HTTPStatusError):
        return _fail(server, f"HTTP {exc.response.status_code} from {url} while {doing}", "protocol")
    if isinstance(exc, httpx2.HTTPError):
        return _fail(server, f"HTTP error while {doing}: {type(exc).__name__}: {_scrub(exc, server)}", "refused")
    if isinstance(exc, MCPError):
        if (exc.code == types.CONNECTION_CLOSED and ANSWER_TOO_LONG in stderr) or (
            exc.code == types.PARSE_ERROR and ANSWER_OVER_CAP in exc.message
        ):
            # The answer passed the bound (line_guard stopped the server; over HTTP the JSON body was cut as it came,
            # and the SDK answered the request with a parse error): the call ran (too_large), no crash.
            return _fail(
                server, f"the server's answer while {doing} was over the {answer_cap()}-byte limit", "too_large"
            )
        if exc.code == types.CONNECTION_CLOSED:
            return _fail(server, f"the server closed the connection while {doing}{tail}", "closed")
        if exc.code == types.INVALID_REQUEST and exc.message == SESSION_GONE:
            # Not sent as far as the server is concerned: a new session may take the request (session_gone).
            return _fail(
                server, f"the server no longer knows the session (HTTP 404: restarted?) while {doing}", "session_gone"
            )
        if exc.code == types.REQUEST_TIMEOUT:
            return _fail(server, f"timed out while {doing}{tail}", "timeout")
        too_deep = _TOO_DEEP.search(exc.message)
        if too_deep is not None:  # over HTTP the SDK answers the request with its parse error
            return _too_deep(server, doing, too_deep.group())
        message = _scrub(exc.message, server)
        return _fail(server, f"protocol error while {doing}: {message} (code {exc.code}){tail}", "protocol")
    if isinstance(exc, ValidationError):
        return _fail(
            server, f"protocol error while {doing}: invalid response ({exc.error_count()} problem(s))", "protocol"
        )
    if isinstance(exc, OSError):
        return _fail(server, f"could not connect while {doing}: {_scrub(exc, server)}{tail}", "refused")
    return _fail(server, f"failed while {doing}: {type(exc).__name__}: {_scrub(exc, server)}{tail}", "error")


def _scrub(value: object, server: Server) -> str:
    """Exception text with the server's full URL replaced: it may carry secrets (values from the environment are
    taken out by ``_fail``)."""
    text = str(value)
    if server.url:
        text = text.replace(server.url, safe_url(server.url))
    return text


def _read_tail(errlog: IO[str] | None) -> str:
    if errlog is None:
        return ""
    try:
        errlog.flush()
        size = errlog.seek(0, os.SEEK_END)
        errlog.seek(max(0, size - 4 * STDERR_TAIL_CHARS))
        return errlog.read()
    except (OSError, ValueError):
        return ""


@dataclass
class UpstreamSession:
    """A connected session to one upstream server. Keep it open to reuse it (the gateway's warm sessions)."""

    server: Server
    client: Client
    errlog: IO[str] | None = None
    too_deep: _TooDeepWatch | None = None
    list_timeout: float = 30.0
    max_pages: int = 500
    target: EgressTarget | None = None  # an HTTP server's checked address, which this session connects to
    _stderr_cache: str = field(default="", repr=False)

    @property
    def protocol_version(self) -> str:
        return self.client.protocol_version

    @property
    def is_modern(self) -> bool:
        """2026-07-28 servers send list changes only on a ``subscriptions/listen`` stream."""
        return self.client.protocol_version in MODERN_PROTOCOL_VERSIONS

    def stderr_tail(self) -> str:
        return _read_tail(self.errlog)

    @property
    def ended(self) -> bool:
        """Whether the connection has ended (a stdio process that exited, a stream the server closed): a request
        now would fail unsent, the SDK answering "Connection closed" without writing it. The SDK has no public flag:
        its dispatcher's is read, and an SDK without it reads as not ended (``reachable`` still finds an HTTP
        server gone; a stdio call then fails as a crash, as before the check)."""
        dispatcher = getattr(self.client.session, "_dispatcher", None)
        return getattr(dispatcher, "_closed", False) is True

    async def reachable(self, timeout: float) -> bool:
        """Whether an HTTP server still accepts connections at the address this session uses (a TCP connect, nothing
        sent): a server stopped while the session sat idle sends nothing that ends the session, and a call sent to
        it fails as a connection closed mid-call (the SDK ends the session on the refused request), which may have
        run. Any other transport: True (a stdio process's exit is ``ended``)."""
        if self.target is None:
            return True
        parts = urlsplit(self.target.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with anyio.fail_after(timeout):
                stream = await anyio.connect_tcp(str(self.target.address), port)
        except (OSError, TimeoutError):
            return False
        await stream.aclose()
        return True

    async def _guard(self, doing: str, timeout: float, work: Callable[[], Awaitable[T]]) -> T:
        try:
            with anyio.fail_after(timeout):
                return await work()
        except UpstreamError:
            raise
        except Exception as exc:  # every SDK, network and process failure becomes one readable error
            raise _translate(self.server, exc, doing=doing, timeout=timeout, stderr=self.stderr_tail()) from exc

    async def _list_page(self, cursor: str | None) -> tuple[list[Any], str | None]:
        """One raw ``tools/list`` page.

        The SDK validates a whole page at once, so one malformed tool (say, without a name) would lose the
        good ones with it. Sync must judge each tool alone (catalog.definitions), so the page is sent through
        the session's own request stamping and dispatcher and read as plain JSON.
        """
        session = self.client.session
        request = types.ListToolsRequest(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
        opts: dict[str, Any] = {}
        session._stamp(data, opts)  # noqa: SLF001 - protocol headers/_meta the negotiated version requires
        raw = await session._dispatcher.send_raw_request("tools/list", data.get("params"), opts)  # noqa: SLF001
        if not isinstance(raw, dict) or not isinstance(raw.get("tools"), list):
            raise _fail(self.server, "protocol error: tools/list result has no 'tools' array", "protocol")
        next_cursor = raw.get("nextCursor")
        if next_cursor is not None and not isinstance(next_cursor, str):
            raise _fail(self.server, "protocol error: tools/list nextCursor is not a string", "protocol")
        return raw["tools"], next_cursor or None

    async def list_tools(self) -> list[dict[str, Any]]:
        """The complete listing, every page, as raw JSON tool objects for ``normalize_listing``.

        Raises UpstreamError when any page fails, the cursor loops, the page or tool cap is passed or the whole
        listing takes longer than ``list_timeout``: a partial listing is never returned.
        """

        async def walk() -> list[dict[str, Any]]:
            tools: list[Any] = []
            cursor: str | None = None
            seen: set[str] = set()
            for _page in range(self.max_pages):
                page, cursor = await self._list_page(cursor)
                tools.extend(page)
                listing_cap_check(self.server, len(tools), "tools/list")
                if cursor is None:
                    return tools
                if cursor in seen:
                    raise _fail(
                        self.server, f"protocol error: tools/list cursor loop ({cursor[:60]!r} repeated)", "protocol"
                    )
                seen.add(cursor)
            raise _fail(self.server, f"tools/list still had more pages after {self.max_pages} pages", "protocol")

        async def walk_unless_too_deep() -> list[dict[str, Any]]:
            if self.too_deep is None:
                return await walk()
            watch = self.too_deep
            async with anyio.create_task_group() as group:

                async def stop_when_too_deep() -> None:
                    await watch.seen.wait()
                    raise _too_deep(self.server, "listing tools", watch.where)

                group.start_soon(stop_when_too_deep)
                tools = await walk()
                group.cancel_scope.cancel()
            return tools

        tools = await self._guard("listing tools", self.list_timeout, walk_unless_too_deep)
        # A definition is stored, indexed and shown to every caller who may discover the tool: never with a value
        # Scout gave the server (one quoting its own token in a description or a schema's default).
        return json_secrets_removed(tools, server_secrets(self.server))

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, timeout: float, input_schema: dict[str, Any] | None = None
    ) -> types.CallToolResult:
        """Call one tool. A tool's own failure comes back as ``result.is_error``; UpstreamError otherwise.

        ``input_schema`` is the tool's definition as synced: its ``x-mcp-header`` arguments go out as ``Mcp-Param-*``
        headers (``_mirror_headers``)."""
        if input_schema is not None:
            self._mirror_headers(name, input_schema)
        return await self._guard(
            f"calling tool {name!r}",
            timeout,
            lambda: self.client.call_tool(name, arguments or {}, read_timeout_seconds=timeout),
        )

    def _mirror_headers(self, name: str, input_schema: dict[str, Any]) -> None:
        """Have the SDK mirror ``name``'s ``x-mcp-header`` arguments into ``Mcp-Param-*`` headers, as its client does
        for a tool it listed (2026-07-28, HTTP). Scout's call sessions list nothing, so every first call to such a
        tool went out without them: the upstream refused it (400, -32020) and the SDK listed all its tools again and
        resent the call, and the call failed if that listing failed or did not validate as a whole."""
        if self.is_modern and find_invalid_x_mcp_header(input_schema) is None:
            self.client.session._x_mcp_header_maps[name] = x_mcp_header_map(input_schema)  # noqa: SLF001

    async def listen_for_changes(self, *, heartbeat: float = 30.0, listening: Callable[[], None] | None = None) -> None:
        """Hold the session open so the server's tools/list_changed notifications reach the
        ``message_handler`` given to ``open_session``.

        A 2026-07-28 server sends them only on a ``subscriptions/listen`` stream, which this opens; a
        handshake-era server pushes them unasked, and a ``tools/list`` heartbeat notices a dead connection.
        ``listening`` is called once from when a notice is heard: the subscription acknowledged (a change
        announced before that is not). Returns when the server ends the stream gracefully; raises UpstreamError
        when the connection drops.
        """
        if self.is_modern:
            try:
                async with self.client.listen(tools_list_changed=True) as subscription:
                    if listening is not None:
                        listening()
                    async for _event in subscription:
                        pass  # the same event is delivered to the message handler
                return
            except MCPError as exc:
                if exc.code not in (types.METHOD_NOT_FOUND, types.INVALID_REQUEST):
                    raise _translate(
                        self.server, exc, doing="listening for changes", timeout=None, stderr=self.stderr_tail()
                    ) from exc
                # This server offers no subscriptions: nothing to hear, but keep noticing a dead connection.
            except Exception as exc:
                raise _translate(
                    self.server, exc, doing="listening for changes", timeout=None, stderr=self.stderr_tail()
                ) from exc
        if listening is not None:  # a handshake-era server pushes its notices unasked (or this one has none)
            listening()
        while True:
            await anyio.sleep(heartbeat)
            await self._guard("checking the connection", self.list_timeout, lambda: self._list_page(None))


async def _result_not_checked(name: str, result: types.CallToolResult) -> None:
    """Stands in for the SDK's check of a call's result against the tool's outputSchema, which took the schema from
    the server's own listing at call time (listing its tools again to learn it), not the one Scout synced and
    reviewed, and ran it with Python's backtracking ``re``, in the event loop: a server answering a ``pattern`` of
    ``^(a+)+$`` and a string of 40 "a"s and a "!" froze the gateway for days (24 of them: 2.5 s). Scout passes a
    result on under its own output policy (``capped_result``, governance.sanitize) and never needed the check."""


@asynccontextmanager
async def open_session(
    server: Server,
    *,
    message_handler: MessageHandler | None = None,
    connect_timeout: float | None = None,
    list_timeout: float | None = None,
    max_pages: int | None = None,
) -> AsyncIterator[UpstreamSession]:
    """Connect to ``server`` and negotiate the protocol; the session closes (and a stdio process stops) on exit.

    ``message_handler`` receives every server notification (``types.ServerNotification``; test one with
    ``is_tools_list_changed``) and transport exceptions; ``UpstreamSession.listen_for_changes`` makes a
    2026-07-28 server send list changes at all. Raises UpstreamError if the connection or handshake fails or
    takes longer than the connect timeout; exceptions raised by the caller's block pass through unchanged.
    """
    connect_timeout = settings.SCOUT_UPSTREAM_CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
    with contextlib.ExitStack() as files:
        errlog: IO[str] | None = None
        if server.transport == Transport.STDIO:
            # The server's stderr, kept so a failure can say why the process died. line_guard bounds it (Python's
            # "a+" only seeks to the end once: line_guard sets O_APPEND, so it writes at the end after emptying it).
            errlog = files.enter_context(tempfile.TemporaryFile("a+", encoding="utf-8", errors="replace"))
        # Checked (and resolved) before anything is sent, at every connection: sync, test connection, execution.
        target = await _egress_target(server) if server.transport == Transport.HTTP else None
        too_deep = _TooDeepWatch(message_handler)
        client = Client(
            _transport(server, connect_timeout=connect_timeout, errlog=errlog, target=target),
            cache=None,  # a sync must see the server's listing now, never a cached one
            message_handler=too_deep,
        )
        connected = False
        body_error: BaseException | None = None
        # The deadline covers only the handshake; the scope must still enclose the client's whole life, since
        # anyio requires the client's task group to close inside the scope that opened it.
        with anyio.CancelScope(deadline=anyio.current_time() + connect_timeout) as connect_scope:
            try:
                async with client:
                    connected = True
                    connect_scope.deadline = math.inf
                    client.session.validate_tool_result = _result_not_checked  # type: ignore[method-assign]
                    session = UpstreamSession(
                        server=server,
                        client=client,
                        errlog=errlog,
                        too_deep=too_deep,
                        list_timeout=settings.SCOUT_UPSTREAM_LIST_TIMEOUT if list_timeout is None else list_timeout,
                        max_pages=settings.SCOUT_UPSTREAM_MAX_PAGES if max_pages is None else max_pages,
                        target=target,
                    )
                    try:
                        yield session
                    except BaseException as exc:
                        body_error = exc
                        raise
            except UpstreamError:
                raise
            except Exception as exc:
                if body_error is not None:
                    # The caller's own error, not ours to reword; unwrap it from the SDK's task groups.
                    if exc is not body_error and any(leaf is body_error for leaf in _leaves(exc)):
                        raise body_error from body_error.__cause__
                    raise
                doing, limit = ("closing the connection", None) if connected else ("connecting", connect_timeout)
                raise _translate(server, exc, doing=doing, timeout=limit, stderr=_read_tail(errlog)) from exc
        if connect_scope.cancelled_caught and not connected:
            tail = _read_tail(errlog).strip()[-STDERR_TAIL_CHARS:]
            raise _fail(
                server,
                f"timed out after {connect_timeout:g}s while connecting"
                + (f" (server stderr: {tail})" if tail else ""),
                "timeout",
            )


async def alist_tools(server: Server, **timeouts: Any) -> list[dict[str, Any]]:
    """Connect, fetch the complete listing, disconnect. See ``UpstreamSession.list_tools``."""
    session_cm = open_session(server, **timeouts)
    try:
        async with session_cm as session:
            return await session.list_tools()
    except UpstreamError:
        raise
    except Exception as exc:  # teardown failures after the listing failed or succeeded
        raise _translate(server, exc, doing="closing the connection", timeout=None, stderr="") from exc


async def call_tool(
    server: Server, name: str, arguments: dict[str, Any] | None, timeout: float
) -> types.CallToolResult:
    """One-shot tool call on a fresh session (the gateway keeps warm sessions with ``open_session`` instead)."""
    async with open_session(server) as session:
        return await session.call_tool(name, arguments, timeout)


def run_async(make_coro: Callable[[], Awaitable[T]]) -> T:
    """Run async upstream work from sync code (Celery tasks, commands), even under a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(make_coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, make_coro).result()


def list_tools(server: Server, **timeouts: Any) -> list[dict[str, Any]]:
    """Sync wrapper of ``alist_tools`` for the sync service."""
    return run_async(lambda: alist_tools(server, **timeouts))
