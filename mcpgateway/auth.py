"""Identity on /mcp: Scout API tokens verified through the SDK's ``TokenVerifier`` protocol.

The bearer middleware calls ``ScoutTokenVerifier.verify_token`` for every HTTP request; a None answer is a
401 with an RFC 6750 challenge (``RequireToken``). Inside a handler the principal is the one verified for the
*current* HTTP request (``principal_from_context``), so a revocation takes effect on the next message even within
an open session. Nothing a client sends besides the bearer token (other headers, ``_meta``, arguments) ever names
a user, agent or tenant.

Verified tokens are kept per process (``TokenCache``, issue 9: the token check was a second ORM hop and
~14% of a search's CPU). A kept answer is only a candidate: before the request's principal is used, it is
confirmed on an ORM thread against the database's visibility version (``access_confirm``), which every
token save, revocation, user, tenant-membership and agent change rewrites in its own transaction, so a
revoked token is refused by every process on its next request. tool_search confirms on the thread that runs
its search (one hop in all); any other request is confirmed by its handler or, at the latest, before its
response starts (``ConfirmedAccess``), and a refusal there is the same 401 as ``RequireToken``'s.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import anyio
from django.conf import settings
from django.core.cache.backends.locmem import LocMemCache
from django.db import DatabaseError
from django.utils import timezone
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from pydantic import PrivateAttr
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from catalog.cachesafe import shared_cache
from catalog.dbbusy import database_busy
from catalog.lru import LruMap
from governance.api.throttling import bearer_wait, client_address, refused_token_wait, token_seen
from governance.principals import Principal
from governance.services.tokens import (
    VerifiedToken,
    api_token_confirm,
    api_token_refusal,
    api_token_verify,
    api_token_verify_versioned,
)

from .db import BUSY_RETRY_AFTER, busy_rpc_error, run_orm

TOKEN_CACHE_SIZE = 4096


class TokenCache:
    """Verified tokens of this process, by a hash of the raw token (the raw value is never kept); bounded,
    least recently used first out."""

    def __init__(self, size: int = TOKEN_CACHE_SIZE) -> None:
        self._entries: LruMap[str, VerifiedToken] = LruMap(size)

    @staticmethod
    def _key(raw: str) -> str:
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()

    def get(self, raw: str) -> VerifiedToken | None:
        return self._entries.get(self._key(raw))

    def put(self, raw: str, verified: VerifiedToken | None) -> None:
        """Keep ``verified`` for ``raw``, or forget ``raw`` (None)."""
        if verified is None:
            self._entries.pop(self._key(raw))
        else:
            self._entries.put(self._key(raw), verified)

    def clear(self) -> None:
        self._entries.clear()


token_cache = TokenCache()


class ScoutAccessToken(AccessToken):
    """An AccessToken that carries the Principal it was verified as, for the rest of this HTTP request.

    ``_verified`` comes from the database (this request) or from the token cache (then ``_confirmed`` is
    False until ``access_confirm`` has checked it on an ORM thread); ``_refused``: the check found that the
    token may no longer act."""

    _principal: Principal | None = PrivateAttr(default=None)
    _verified: VerifiedToken | None = PrivateAttr(default=None)
    _confirmed: bool = PrivateAttr(default=True)
    _refused: bool = PrivateAttr(default=False)


def _access(raw: str, verified: VerifiedToken, *, confirmed: bool) -> ScoutAccessToken:
    principal = verified.principal
    access = ScoutAccessToken(
        token=raw,
        client_id=principal.token_ref or f"user-{principal.user.pk}",
        subject=str(principal.user.pk),
        scopes=sorted(principal.scopes),
        expires_at=int(verified.expires_at.timestamp()),  # the SDK's bearer backend checks it too
    )
    # A kept answer names no principal until it is confirmed: nothing can act as it by reading it early.
    access._verified, access._confirmed = verified, confirmed
    access._principal = principal if confirmed else None
    return access


class ScoutTokenVerifier:
    """Maps a Scout API token to an ``AccessToken`` whose ``client_id`` and ``subject`` name the token and user,
    so the SDK binds a Streamable HTTP session to the token that opened it."""

    def __init__(self, cache: TokenCache | None = None) -> None:
        self.cache = cache or token_cache

    async def verify_token(self, token: str) -> AccessToken | None:
        kept = self.cache.get(token)
        if kept is not None and kept.expires_at > timezone.now():
            # A candidate, confirmed before use (module note); expiry stays a per-request clock check there.
            return _access(token, kept, confirmed=False)
        verified = await run_orm(api_token_verify_versioned, token)
        if verified is None:
            return None
        self.cache.put(token, verified)
        await cache_off_the_loop(token_seen, token)
        return _access(token, verified, confirmed=True)


def access_confirm(access: ScoutAccessToken, cache: TokenCache | None = None) -> Principal | None:
    """On an ORM thread: the request's principal, checked against the database if it came from the cache, or
    None (the token may no longer act; the response will be a 401)."""
    if access._confirmed:
        return None if access._refused else access._principal
    assert access._verified is not None
    cache = cache or token_cache
    verified = api_token_confirm(access._verified, access.token)
    cache.put(access.token, verified)
    # ``_confirmed`` last: the event loop reads it without a lock (principal_from_context, ConfirmedAccess) and
    # then trusts ``_refused`` and ``_principal``, so both must hold this check's answer before it is set.
    access._verified = verified
    access._principal = verified.principal if verified is not None else None
    access._refused = verified is None
    access._confirmed = True
    return access._principal


def _request_access_token(ctx: Any) -> AccessToken | None:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    return user.access_token if isinstance(user, AuthenticatedUser) else None


def unconfirmed_access(ctx: Any) -> ScoutAccessToken | None:
    """This request's access token when its principal still has to be confirmed: the caller passes it to
    ``access_confirm`` on the ORM thread that does its own work (one hop instead of two)."""
    access = _request_access_token(ctx)
    if isinstance(access, ScoutAccessToken) and not access._confirmed:
        return access
    return None


async def principal_from_context(ctx: Any) -> Principal | None:
    """The verified principal of the request being handled, or None.

    The access token comes from the current HTTP request's authentication (set by the bearer middleware,
    never by the client), falling back to the SDK's ``get_access_token()`` context variable."""
    access_token = _request_access_token(ctx)
    if isinstance(access_token, ScoutAccessToken) and access_token._verified is not None:
        if access_token._confirmed:  # verified against the database for this very HTTP request
            return None if access_token._refused else access_token._principal
        return await run_orm(access_confirm, access_token)
    access_token = access_token or get_access_token()
    if access_token is None:
        return None
    # A context variable may outlive the request that set it (a session task): verify again.
    return await run_orm(api_token_verify, access_token.token)


REALM = "scout"
REFUSALS = {  # api_token_refusal's answer -> what the 401 says of the token sent (RFC 6750 error_description)
    "revoked": "The access token was revoked",
    "expired": "The access token expired",
    "invalid": "The access token is not valid",
    "too_many_scopes": "The access token names more servers than a token may now: make a new one",
}


async def send_challenge(send: Send, *, refusal: str | None, resource_metadata: str) -> None:
    """A 401 with an RFC 6750 challenge naming the protected-resource metadata (RFC 9728, ``resource_metadata``:
    server.py). ``refusal`` None: the request carried no bearer token, which gets no error code (§3.1: the client
    may not know authentication is needed); else ``invalid_token`` and what was wrong with the token sent."""
    challenge = f'Bearer realm="{REALM}", resource_metadata="{resource_metadata}"'
    body = {"error_description": "This endpoint needs an API token: send Authorization: Bearer <token>"}
    if refusal is not None:
        body = {"error": "invalid_token", "error_description": REFUSALS[refusal]}
        challenge += f', error="invalid_token", error_description="{REFUSALS[refusal]}"'
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"www-authenticate", challenge.encode()),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def sent_bearer_token(scope: Scope) -> str | None:
    """The bearer token of the Authorization header, as the SDK's BearerAuthBackend reads it, or None."""
    header = Headers(scope=scope).get("authorization")
    return header[7:] if header and header.lower().startswith("bearer ") else None


class RequireToken:
    """In place of the SDK's RequireAuthMiddleware (whose 401 says ``invalid_token`` to a request without any
    token): a request the bearer backend did not authenticate is answered by ``send_challenge``."""

    def __init__(self, app: ASGIApp, resource_metadata: str) -> None:
        self.app = app
        self.resource_metadata = resource_metadata

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if isinstance(scope.get("user"), AuthenticatedUser):
            await self.app(scope, receive, send)
            return
        raw = sent_bearer_token(scope)
        if raw is not None and (wait := await _refused_token_wait(scope, count=True)):
            await send_too_many_refused(send, wait)
            return
        # Looked up again only on this refusal path: the verifier's answer (None) does not say why.
        refusal = None if raw is None else await run_orm(api_token_refusal, raw)
        await send_challenge(send, refusal=refusal, resource_metadata=self.resource_metadata)


class RefusedTokenGuard:
    """Before the bearer backend looks a token up: a client address past its limit of refused tokens
    (``refused_token_wait``, counted by ``RequireToken``) is answered 429 with Retry-After, unlooked-up, until its
    period ends, unless the token verified earlier (this process keeps it, or any noted it: ``bearer_wait``; it is
    still confirmed against the database)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = sent_bearer_token(scope) if scope["type"] == "http" else None
        if raw is not None and token_cache.get(raw) is None:
            if wait := await cache_off_the_loop(bearer_wait, _address(scope), raw):
                await send_too_many_refused(send, wait)
                return
        await self.app(scope, receive, send)


def _address(scope: Scope) -> str:
    return client_address((scope.get("client") or ("", 0))[0], Headers(scope=scope))


async def _refused_token_wait(scope: Scope, *, count: bool) -> int:
    return await cache_off_the_loop(lambda: refused_token_wait(_address(scope), count=count))


async def cache_off_the_loop(func: Any, *args: Any) -> Any:
    """``func(*args)``, a call on the shared cache: in this process's memory (LocMemCache, the embedded default
    without REDIS_URL) at once, since counting there takes microseconds and never waits (issue 9: the hop to a worker
    thread and back cost ~0.2 ms of CPU per request, more than the count); on a worker thread for a network cache
    (Redis), which may take up to its socket timeout and must never hold up the event loop."""
    if isinstance(shared_cache(), LocMemCache):
        return func(*args)
    return await anyio.to_thread.run_sync(func, *args)


async def rpc_error_send(send: Send, *, status: int, error: dict[str, Any], retry_after: int) -> None:
    """Answer with HTTP ``status``, ``Retry-After`` and the JSON-RPC ``error`` (no request id: none was read)."""
    payload = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"retry-after", str(retry_after).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def send_too_many_refused(send: Send, wait: int) -> None:
    limit = settings.SCOUT_REFUSED_TOKEN_RATE
    message = f"Too many refused tokens from this address (limit {limit}); retry in {wait} s"
    await rpc_error_send(send, status=429, error={"code": -32000, "message": message}, retry_after=wait)


async def busy_response_send(send: Send) -> None:
    """Answer a request the database could not serve before its answer started: 503 and ``busy_rpc_error``."""
    await rpc_error_send(send, status=503, error=busy_rpc_error(), retry_after=BUSY_RETRY_AFTER)


class ConfirmedAccess:
    """Between ``RequireToken`` and the MCP app: a request authenticated from the token cache is confirmed
    before its response starts, if its handler has not done so, and answered 401 (as by ``RequireToken``) when
    the token may no longer act. The handler's own answer is dropped then."""

    def __init__(self, app: ASGIApp, resource_metadata: str) -> None:
        self.app = app
        self.resource_metadata = resource_metadata

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        access = user.access_token if isinstance(user, AuthenticatedUser) else None
        if not isinstance(access, ScoutAccessToken) or access._confirmed:
            await self.app(scope, receive, send)
            return
        dropped = False  # the handler's answer, replaced by a 401 or a 503

        async def send_confirmed(message: Message) -> None:
            nonlocal dropped
            if message["type"] == "http.response.start":
                if not access._confirmed and not await _confirmed_or_busy(access):
                    # Unconfirmed, the handler's answer may not be sent; raised here, in a session's task, the
                    # error reached no guard and the client got a bare 500 (opsux4).
                    dropped = True
                    await busy_response_send(send)
                    return
                if access._refused:
                    dropped = True
                    refusal = await run_orm(api_token_refusal, access.token)
                    await send_challenge(send, refusal=refusal, resource_metadata=self.resource_metadata)
                    return
            if not dropped:
                await send(message)

        await self.app(scope, receive, send_confirmed)


async def _confirmed_or_busy(access: ScoutAccessToken) -> bool:
    """Confirm ``access`` against the database; False when the database cannot answer now (catalog.dbbusy)."""
    try:
        await run_orm(access_confirm, access)
    except DatabaseError as exc:
        if not database_busy(exc):
            raise
        return False
    return True
