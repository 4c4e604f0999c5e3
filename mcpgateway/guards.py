"""ASGI guards in front of the MCP endpoint: checks that need no identity run before authentication, the
body checks after it, so nobody can make the gateway buffer or parse more than the limits allow.

- ``SecurityHeaders`` (outermost, also on the protected-resource metadata): the response headers Django's
  security and clickjacking middleware give every other page (nosniff, Referrer-Policy, X-Frame-Options,
  Cross-Origin-Opener-Policy), which these Starlette routes never pass through.
- ``EdgeGuard`` (before auth): Host and Origin against the allowlists (421 / 403), and no query string (a
  token put in the URL is refused, and redacted from the scope so the access log never shows it).
- ``TokenInAddressGuard`` (outermost, the whole site: the REST API, the admin, every page): an address holding a
  Scout token (query or path) is refused, and redacted from the scope so the access log never shows it.
- ``DatabaseBusyGuard`` (after EdgeGuard, around authentication): a request the database could not serve before
  its answer started (no connection to be had, locked) is a 503 with Retry-After, not a bare 500.
- ``RateGuard`` (after auth): requests per token, counted in the cache (Redis with REDIS_URL, so every worker
  shares the count), 429 with Retry-After past ``SCOUT_MCP_RATE``.
- ``StatelessGetGuard`` (after auth, stateless /mcp only): a GET is 405; there is no stream to open.
- ``BodyGuard`` (after auth): counts body bytes as they stream in and answers 413 as soon as the limit is
  passed (declared, chunked or understated lengths alike); then rejects what JSON-RPC dispatch should never
  see: a byte-order mark, invalid or truncated JSON, duplicate object keys (authorization and dispatch must
  never read different values), nesting deeper than the limit, batches, and lone surrogates. Each refusal is audited.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import deque
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import anyio
import numpy as np
import re2
from django.conf import settings
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    decode_header_value,
    find_duplicated_routing_header,
)
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.jsonrpc import HEADER_MISMATCH
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from catalog.dbbusy import database_busy
from governance.api.throttling import parse_rate, slots_over_the_limits

from .auth import ScoutAccessToken, access_confirm, busy_response_send, cache_off_the_loop

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
RATE_LIMITED = -32000  # JSON-RPC's implementation-defined server error range

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
# Where a surrogate code point can come from: a ``\uD800``-``\uDFFF`` escape, or its bytes sent raw (json.loads
# decodes bytes with "surrogatepass"). A pair of escapes is one character; a lone one is no character at all.
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


def _host_allowed(host: str, allowed: list[str]) -> bool:
    for pattern in allowed:
        if pattern.endswith(":*"):
            if host.startswith(pattern[:-1]) and host[len(pattern) - 1 :].isdigit():
                return True
        elif host == pattern:
            return True
    return False


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] = ()) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def _send_rpc_error(send: Send, status: int, code: int, message: str) -> None:
    await _send_json(send, status, {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


class SecurityHeaders:
    """Adds the security headers Django's middleware would, from the same settings, to each response start."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        referrer = settings.SECURE_REFERRER_POLICY or ""
        wanted = {
            "x-content-type-options": "nosniff" if settings.SECURE_CONTENT_TYPE_NOSNIFF else "",
            "referrer-policy": referrer if isinstance(referrer, str) else ",".join(referrer),
            "x-frame-options": settings.X_FRAME_OPTIONS or "",
            "cross-origin-opener-policy": settings.SECURE_CROSS_ORIGIN_OPENER_POLICY or "",
        }
        self.headers = [(name.encode(), value.encode()) for name, value in wanted.items() if value]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                added = [(name, value) for name, value in self.headers if name not in present]
                message = {**message, "headers": [*message.get("headers", []), *added]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


# A raw Scout token: the prefix and token_urlsafe(32), 43 characters (governance.constants). RE2: the address is the
# client's text.
_RAW_TOKEN = re2.compile(r"scout_[A-Za-z0-9_-]{43}")
MASKED_TOKEN = "scout_MASKED"  # what the access log shows of a token refused in a path
TOKEN_IN_ADDRESS_MESSAGE = (
    "A Scout token does not belong in an address, where it is logged: send it in the Authorization header"
)


class TokenInAddressGuard:
    """Every page's address (/mcp refuses any query string already, EdgeGuard): one holding a Scout token, in its query
    (``?token=``) or its path (``/mcp/scout_…``, as clients configured with a URL that carries the secret send it),
    escaped or not, is refused with 400, and its query blanked and the token masked in its path in the scope, which the
    access log line is written from (a client that sent its token this way put it in the log of every request).

    /mcp answers as its other edge refusals do (``error``, ``error_description``: EdgeGuard); every other address with
    ``api_error(code, message)``, the REST API's one error shape (scoutsite.api.errors.error_body), which a REST
    client reads every other error in: the 400 was the only API error of another shape (opsux6)."""

    def __init__(self, app: ASGIApp, *, api_error: Callable[[str, str], dict[str, Any]]) -> None:
        self.app = app
        self.api_error = api_error
        self.refuse = SecurityHeaders(self._refusal)  # the headers Django's pages carry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _holds_token(scope):
            await self.app(scope, receive, send)
            return
        scope["query_string"] = b""
        scope["path"] = _RAW_TOKEN.sub(MASKED_TOKEN, unquote(scope.get("path") or ""))
        scope["raw_path"] = scope["path"].encode("utf-8")
        await self.refuse(scope, receive, send)

    async def _refusal(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if path == "/mcp" or path.startswith("/mcp/"):
            body = {"error": "invalid_request", "error_description": TOKEN_IN_ADDRESS_MESSAGE}
        else:
            body = self.api_error("token_in_address", TOKEN_IN_ADDRESS_MESSAGE)
        await _send_json(send, 400, body)


def _holds_token(scope: Scope) -> bool:
    """Whether the query or the path (decoded once by the server: a token escaped twice is decoded here again) holds
    a raw Scout token."""
    query = (scope.get("query_string") or b"").decode("latin-1")
    return any(
        ("scout" in text.lower() or "%" in text) and _RAW_TOKEN.search(unquote(text)) is not None
        for text in (query, scope.get("path") or "")
    )


def _database_busy_in(exc: BaseException) -> bool:
    """Whether ``exc``, or any exception an exception group gathered, is the database's "not now" (catalog.dbbusy)."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_database_busy_in(inner) for inner in exc.exceptions)
    return database_busy(exc)


class DatabaseBusyGuard:
    """A request the database could not serve before its answer started (no connection to be had, locked: the token
    looked up for a new session, a refusal explained) is answered 503 with Retry-After and a JSON-RPC error saying
    nothing was carried out. It was a bare 500 (opsux3: Postgres out of connections, no agent could open a session
    and none was told to retry). Once an answer has started, the error goes on as before."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_started(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_started)
        except BaseException as exc:
            if started or not _database_busy_in(exc):
                raise
            logger.warning("mcp: the database could not serve a request (%s); answered 503", type(exc).__name__)
            await busy_response_send(send)


class EdgeGuard:
    """Host/Origin allowlists and the no-query-string rule, before any identity is looked at."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: list[str], allowed_origins: list[str]) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.allowed_origins = allowed_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("query_string"):
            # The scope dict is the server's own: blanking it here keeps a token out of the access log line.
            scope["query_string"] = b""
            await _send_json(
                send,
                400,
                {
                    "error": "invalid_request",
                    "error_description": "Query parameters are not accepted on /mcp; "
                    "send the token in the Authorization header",
                },
            )
            return
        headers = Headers(scope=scope)
        if not _host_allowed(headers.get("host", ""), self.allowed_hosts):
            await _send_json(send, 421, {"error": "misdirected_request", "error_description": "Host not allowed"})
            return
        origin = headers.get("origin")
        if origin is not None and not _host_allowed(origin, self.allowed_origins):
            await _send_json(send, 403, {"error": "forbidden", "error_description": "Origin not allowed"})
            return
        await self.app(scope, receive, send)


def json_depth(body: bytes) -> int:
    """Deepest nesting of arrays/objects in ``body``, without recursion (strings are skipped)."""
    skeleton = _STRING.sub(b'""', body)
    codes = np.frombuffer(skeleton, dtype=np.uint8)
    steps = np.zeros(codes.shape, dtype=np.int32)
    steps[(codes == ord("[")) | (codes == ord("{"))] = 1
    steps[(codes == ord("]")) | (codes == ord("}"))] = -1
    if not steps.any():
        return 0
    return int(np.cumsum(steps).max())


class DuplicateKeyError(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise DuplicateKeyError("duplicate object key")
        result[key] = value
    return result


def check_json_body(body: bytes, *, max_depth: int, headers: Headers | None = None) -> tuple[int, int, str] | None:
    """``(status, code, message)`` for a body JSON-RPC dispatch must not see, or None when it is fine; with the
    request's ``headers``, also for routing headers that say otherwise than the body (``routing_headers_problem``)."""
    if body.startswith(b"\xef\xbb\xbf"):
        return 400, PARSE_ERROR, "Parse error: a byte-order mark is not allowed"
    # No more opening brackets than the limit (inside strings or not) cannot nest deeper: an ordinary request
    # skips the scan.
    if body.count(b"[") + body.count(b"{") > max_depth and json_depth(body) > max_depth:
        return 400, PARSE_ERROR, f"Parse error: JSON nested deeper than {max_depth} levels"
    try:
        decoded = json.loads(body, object_pairs_hook=_no_duplicates)
    except DuplicateKeyError:
        return 400, PARSE_ERROR, "Parse error: duplicate object keys"
    except (ValueError, RecursionError):
        return 400, PARSE_ERROR, "Parse error: invalid JSON"
    if isinstance(decoded, list):
        return 400, INVALID_REQUEST, "Invalid request: JSON-RPC batches are not supported"
    if _SURROGATE.search(body) and lone_surrogate_in(decoded):
        return 400, PARSE_ERROR, "Parse error: a string holds a lone surrogate (not a Unicode character)"
    return routing_headers_problem(decoded, headers) if headers is not None and isinstance(decoded, dict) else None


def routing_headers_problem(decoded: dict[str, Any], headers: Headers) -> tuple[int, int, str] | None:
    """The SDK's header mismatch (400, -32020) when ``MCP-Protocol-Version``, ``Mcp-Method`` or ``Mcp-Name`` says
    otherwise than the body. The SDK routes by the version header alone and checks these only for a 2026-07-28 one:
    a request naming 2025-11-25 (or no version) in its header was served whatever its 2026 envelope, method header
    and name header said, so a proxy or policy that reads the headers (the reason MCP has them) let through one
    call while another ran (T11, C1-9, C1-10). One sent twice is refused too: the first and last copies' readers
    would disagree."""
    duplicated = find_duplicated_routing_header(headers.items())
    if duplicated is not None:
        return 400, HEADER_MISMATCH, f"{duplicated} header appears more than once"
    params = decoded.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta:
        if headers.get(MCP_PROTOCOL_VERSION_HEADER) != meta[PROTOCOL_VERSION_META_KEY]:
            return 400, HEADER_MISMATCH, f"{MCP_PROTOCOL_VERSION_HEADER} {_MISMATCH} envelope's protocol version"
    method = headers.get(MCP_METHOD_HEADER)
    if method is not None and method != decoded.get("method"):
        return 400, HEADER_MISMATCH, f"{MCP_METHOD_HEADER} {_MISMATCH} body's method"
    name_key = NAME_BEARING_METHODS.get(decoded.get("method"))  # type: ignore[arg-type]
    name = headers.get(MCP_NAME_HEADER)
    if name_key and name is not None and isinstance(params, dict) and decode_header_value(name) != params.get(name_key):
        return 400, HEADER_MISMATCH, f"{MCP_NAME_HEADER} {_MISMATCH} body's {name_key!r} parameter"
    return None


_MISMATCH = "header does not match the request"  # the SDK's words for its own check


def lone_surrogate_in(decoded: Any) -> bool:
    """Whether a string of ``decoded`` (parsed JSON) holds a surrogate that no pair made a character: no database,
    log or upstream can encode it as UTF-8, so the lookup of a tool id holding one failed with a traceback instead
    of the unknown-tool answer, and wrote no audit event; a REST search query holding one was a 500."""
    try:
        json.dumps(decoded, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class RateGuard:
    """At most ``SCOUT_MCP_RATE`` POSTs per token per period (T13, L3): a token looping on tool_search (a model
    run per query) or execute_tool took the workers' CPU and the upstreams' capacity from every other caller.
    A person's tokens together get ``SCOUT_MCP_PERSON_TOKENS`` times that: a token mints more of its own scopes
    (REST tokens/), so a rate per token alone bounded nothing. Counted in fixed slots of the period (a burst across
    a slot's end can reach twice the rate); the answer past either is a 429 with Retry-After and a JSON-RPC error,
    before the body is read."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        access = getattr(scope.get("user"), "access_token", None)
        rate = parse_rate(settings.SCOUT_MCP_RATE)
        if scope["type"] != "http" or scope.get("method") != "POST" or access is None or rate is None:
            await self.app(scope, receive, send)
            return
        key = hashlib.sha256(access.token.encode("utf-8")).hexdigest()  # the token, never kept raw
        retry_after, whose = await cache_off_the_loop(_over_the_limits, key, access.subject, *rate)
        if retry_after:
            message = f"Too many requests for {whose} (limit {settings.SCOUT_MCP_RATE}); retry in {retry_after} s"
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": RATE_LIMITED, "message": message}}
            await _send_json(send, 429, body, [(b"retry-after", str(retry_after).encode())])
            return
        await self.app(scope, receive, send)


def _over_the_limits(token_key: str, person: str | None, limit: int, window: int) -> tuple[int, str]:
    """The token's count, then its person's (``SCOUT_MCP_PERSON_TOKENS`` times the limit): the seconds until the
    slot ends when either is one too many (else 0), and whose limit that is."""
    tokens = settings.SCOUT_MCP_PERSON_TOKENS
    limits = [(f"mcp-rate:{token_key}", limit)]
    if person and tokens > 0:
        limits.append((f"mcp-rate:person:{person}", limit * tokens))
    over, retry_after = slots_over_the_limits(limits, window)  # one round trip on Redis
    if over == 2:
        return retry_after, f"this person's tokens together ({tokens} times the limit)"
    return retry_after, "this token"


class SessionShareGuard:
    """A stateful gateway's (``SCOUT_MCP_STATELESS`` off) open sessions per person (T13): at most
    ``SCOUT_MCP_MAX_SESSIONS_PER_PERSON``, all their tokens and agents together (0: no such limit). The SDK keeps at
    most 10,000 sessions for everyone and closes one only after 30 idle minutes, so one person's tokens opening
    sessions in a loop (the /mcp rate allows thousands a minute) filled them, and every other person's new session
    was refused until theirs idled out. Counted from the SDK's own record of who opened each open session; requests
    opening sessions at the same instant may each pass the count (at most as many as are in flight)."""

    def __init__(self, app: ASGIApp, manager: Any) -> None:
        self.app = app
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        access = getattr(scope.get("user"), "access_token", None)
        limit = settings.SCOUT_MCP_MAX_SESSIONS_PER_PERSON
        if access is not None and limit > 0 and _opens_a_session(scope):
            owners = self.manager._session_owners  # noqa: SLF001 - the SDK's record of who opened each open session
            held = sum(1 for owner in list(owners.values()) if owner.get("subject") == access.subject)
            if held >= limit:
                message = (
                    f"Too many open sessions: this person has {limit} open sessions, the most allowed; end one "
                    "(DELETE /mcp with its Mcp-Session-Id) or reuse it"
                )
                body = {"jsonrpc": "2.0", "id": None, "error": {"code": RATE_LIMITED, "message": message}}
                await _send_json(send, 429, body, [])
                return
        await self.app(scope, receive, send)


def _opens_a_session(scope: Scope) -> bool:
    """Whether the SDK's stateful handling would open a new session for this request: a POST naming no session,
    under a handshake-era protocol version (or none; a 2026-07-28 request is served without a session)."""
    if scope["type"] != "http" or scope.get("method") != "POST":
        return False
    headers = Headers(scope=scope)
    version = headers.get("mcp-protocol-version")
    return headers.get("mcp-session-id") is None and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS)


class StatelessGetGuard:
    """A GET on a stateless /mcp (``SCOUT_MCP_STATELESS``) is answered 405, as MCP allows a server that offers no
    server-sent event stream. The SDK held a stream open for it (a 2025 client's, or one naming no version) on which
    nothing is ever sent, with no session and no rate: one token opening GETs in a loop held a connection and a
    server task each, until the workers ran out (T13)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("method") == "GET":
            message = "Method Not Allowed: this endpoint is stateless and offers no server-sent event stream"
            body = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
            await _send_json(send, 405, body, [(b"allow", b"POST")])
            return
        await self.app(scope, receive, send)


class BodyGuard:
    """Size-limit and sanity-check POST bodies, then replay them to the MCP app."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, max_depth: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            await self._too_large(scope, send)
            return
        body = bytearray()
        trailing: Message | None = None
        while True:
            message = await receive()
            if message["type"] != "http.request":
                trailing = message  # the client went away; let the app see it
                break
            body.extend(message.get("body", b""))
            if len(body) > self.max_body_bytes:
                await self._too_large(scope, send)
                return
            if not message.get("more_body", False):
                break
        if trailing is None:
            problem = check_json_body(bytes(body), max_depth=self.max_depth, headers=Headers(scope=scope))
            if problem is not None:
                await _record_rejection(scope, *problem)  # on the record before the caller hears of it
                await _send_rpc_error(send, *problem)
                return
        pending: deque[Message] = deque([{"type": "http.request", "body": bytes(body), "more_body": False}])
        if trailing is not None:
            pending.append(trailing)

        async def replay() -> Message:
            return pending.popleft() if pending else await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, send: Send) -> None:
        message = f"Request body larger than {self.max_body_bytes} bytes"
        await _record_rejection(scope, 413, INVALID_REQUEST, message)
        await _send_rpc_error(send, 413, INVALID_REQUEST, message)


async def _record_rejection(scope: Scope, status: int, code: int, message: str) -> None:
    """A DENIED audit event for a body refused here. The guard runs after authentication, so the principal
    verified for this request is known; the event names the rule broken (Scout's own text), never the body."""
    from governance.choices import AuditEventType, AuditOutcome
    from governance.services.audit import audit_record

    from .db import run_orm

    access = getattr(scope.get("user"), "access_token", None)

    def record() -> None:
        # A token kept by this process is confirmed first: one revoked since gets the 401 of an unknown token
        # (ConfirmedAccess) and nothing is written under its name.
        principal = access_confirm(access) if isinstance(access, ScoutAccessToken) else None
        if principal is None and isinstance(access, ScoutAccessToken):
            return
        audit_record(
            event_type=AuditEventType.REQUEST_REJECTED,
            principal=principal,
            outcome=AuditOutcome.DENIED,
            payload={"status": status, "code": code, "rule": message},
        )

    with anyio.CancelScope(shield=True):  # the client may already be gone; the record is still written
        await run_orm(record)
