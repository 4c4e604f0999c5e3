"""Who is calling the REST API: the same API tokens as /mcp (verified into a Principal), or a Django session."""

from django.contrib.auth.models import AbstractBaseUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, SessionAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.request import Request

from governance.api.throttling import bearer_wait, client_address, refused_token_wait, token_seen
from governance.constants import BASE_SCOPES
from governance.principals import Principal, principal_for_user
from governance.services.tokens import api_token_verify

# One message for every refused token (malformed, unknown, revoked, expired, inactive user): nothing tells
# them apart (/mcp's challenge tells the token's holder whether it was revoked or expired).
INVALID_TOKEN_MESSAGE = "Invalid or expired token."


class BearerTokenAuthentication(BaseAuthentication):
    """``Authorization: Bearer scout_...``: ``request.user`` is the token's user, ``request.auth`` its Principal."""

    keyword = b"bearer"

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, Principal] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword:
            return None  # not ours: a session may still authenticate the request
        # Refused tokens per address (refused_token_wait): past the limit, answered before any lookup.
        address = client_address(request.META.get("REMOTE_ADDR"), request.headers)
        try:
            raw = parts[1].decode("ascii") if len(parts) == 2 else ""
        except UnicodeDecodeError:
            raw = ""
        if wait := bearer_wait(address, raw):
            raise Throttled(wait)
        principal = api_token_verify(raw) if raw else None
        if principal is None:
            if wait := refused_token_wait(address, count=True):
                raise Throttled(wait)
            raise AuthenticationFailed(INVALID_TOKEN_MESSAGE)
        token_seen(raw)
        return principal.user, principal

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) to an anonymous caller.
        return 'Bearer realm="scout"'


class AdminSessionAuthentication(SessionAuthentication):
    """A Django session, as the admin accepts it: only an active staff member's. A session comes from the admin's
    sign-in, so a person whose staff status was taken away is refused here at once, as there, rather than keep
    acting with every scope (minting tokens of any scope among them) until their session expires."""

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, None] | None:
        authenticated = super().authenticate(request)
        if authenticated is None or not authenticated[0].is_staff:
            return None
        return authenticated


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "governance.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": 'A Scout API token ("scout_..."); the token needs the "api" scope.',
        }


def request_principal(request: Request) -> Principal:
    """The caller as governance sees them: the token's principal, or the session user with every scope
    (a logged-in human acts with their own full rights, as in the admin)."""
    if isinstance(request.auth, Principal):
        return request.auth
    return principal_for_user(request.user, scopes=BASE_SCOPES, via="api-session")
