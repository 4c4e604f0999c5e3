"""Rate limits per API token (per user for sessions, per address when anonymous), counted in the cache.

With REDIS_URL the cache is Redis, so every worker and replica shares one count. Rates are read from settings
at each request (SCOUT_API_RATE, SCOUT_API_ANON_RATE); a refused request gets 429 with Retry-After.

Fail mode (SECURITY-TESTS F4): when the cache cannot be reached the limiter fails open, so a Redis outage
does not take the API down. It is a limit on volume, not an access control: authentication and every
permission check are answered by the database either way. Each such request is logged."""

import logging

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from catalog.cachesafe import cache_available
from governance.principals import Principal

logger = logging.getLogger(__name__)


class FailOpenThrottle(SimpleRateThrottle):
    """A cache-based throttle that lets the request through when the cache is down (see the module note)."""

    def allow_request(self, request: Request, view) -> bool:
        if not cache_available():
            return True
        try:
            return super().allow_request(request, view)
        except Exception as exc:  # noqa: BLE001 - a cache outage: count nothing, refuse nothing
            logger.warning("rate limit not applied: cache unavailable (%s)", type(exc).__name__)
            return True


class PrincipalRateThrottle(FailOpenThrottle):
    scope = "api"

    def get_rate(self) -> str:
        return settings.SCOUT_API_RATE

    def get_cache_key(self, request: Request, view) -> str | None:
        if not request.user or not request.user.is_authenticated:
            return None  # AnonymousRateThrottle counts these
        if isinstance(request.auth, Principal) and request.auth.token_id is not None:
            ident = f"token:{request.auth.token_id}"  # each token its own budget, even for one user
        else:
            ident = f"user:{request.user.pk}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class PersonRateThrottle(FailOpenThrottle):
    """All of one person's tokens together (their agents' too): ``SCOUT_API_PERSON_TOKENS`` times ``SCOUT_API_RATE``
    (0: no such limit). A token mints tokens of its own scopes (POST tokens/), so a budget per token alone bounded
    nothing (the MCP endpoint's ``RateGuard`` counts a person's tokens the same way)."""

    scope = "api-person"

    def get_rate(self) -> str | None:
        return settings.SCOUT_API_RATE if settings.SCOUT_API_PERSON_TOKENS > 0 else None

    def parse_rate(self, rate: str | None) -> tuple[int | None, int | None]:
        requests, seconds = super().parse_rate(rate)
        return (requests * settings.SCOUT_API_PERSON_TOKENS if requests is not None else None), seconds

    def get_cache_key(self, request: Request, view) -> str | None:
        if not isinstance(request.auth, Principal) or request.auth.token_id is None:
            return None  # a session is counted per person already (PrincipalRateThrottle)
        return self.cache_format % {"scope": self.scope, "ident": f"user:{request.user.pk}"}


class AnonymousRateThrottle(FailOpenThrottle):
    scope = "api-anon"

    def get_rate(self) -> str:
        return settings.SCOUT_API_ANON_RATE

    def get_cache_key(self, request: Request, view) -> str | None:
        if request.user and request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
