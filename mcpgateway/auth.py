"""Identity on /mcp: Scout API tokens verified through the SDK's ``TokenVerifier`` protocol.

The bearer middleware calls ``ScoutTokenVerifier.verify_token`` for every HTTP request; a None answer is a
401 with ``WWW-Authenticate``. Inside a handler the principal is the one verified for the *current* HTTP
request (``principal_from_context``), so a revocation takes effect on the next message even within an open
session. Nothing a client sends besides the bearer token (other headers,
``_meta``, arguments) ever names a user, agent or tenant.
"""

from __future__ import annotations

from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from pydantic import PrivateAttr

from governance.principals import Principal
from governance.services.tokens import api_token_verify

from .db import run_orm


class ScoutAccessToken(AccessToken):
    """An AccessToken that carries the Principal it was verified as, for the rest of this HTTP request."""

    _principal: Principal | None = PrivateAttr(default=None)


class ScoutTokenVerifier:
    """Maps a Scout API token to an ``AccessToken`` whose ``client_id`` and ``subject`` name the token and user,
    so the SDK binds a Streamable HTTP session to the token that opened it."""

    async def verify_token(self, token: str) -> AccessToken | None:
        principal = await run_orm(api_token_verify, token)
        if principal is None:
            return None
        access = ScoutAccessToken(
            token=token,
            client_id=principal.token_ref or f"user-{principal.user.pk}",
            subject=str(principal.user.pk),
            scopes=sorted(principal.scopes),
        )
        access._principal = principal
        return access


def _request_access_token(ctx: Any) -> AccessToken | None:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    return user.access_token if isinstance(user, AuthenticatedUser) else None


async def principal_from_context(ctx: Any) -> Principal | None:
    """The verified principal of the request being handled, or None.

    The access token comes from the current HTTP request's authentication (set by the bearer middleware,
    never by the client), falling back to the SDK's ``get_access_token()`` context variable."""
    access_token = _request_access_token(ctx)
    if isinstance(access_token, ScoutAccessToken) and access_token._principal is not None:
        return access_token._principal  # verified by the bearer middleware for this very HTTP request
    access_token = access_token or get_access_token()
    if access_token is None:
        return None
    # A context variable may outlive the request that set it (a session task): verify again.
    return await run_orm(api_token_verify, access_token.token)
