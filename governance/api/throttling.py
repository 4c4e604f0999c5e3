"""Rate limits per API token (per user for sessions, per address when anonymous), counted in the cache.

With REDIS_URL the cache is Redis, so every worker and replica shares one count. Rates are read from settings
at each request (SCOUT_API_RATE, SCOUT_API_ANON_RATE); a refused request gets 429 with Retry-After."""

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from governance.principals import Principal


class PrincipalRateThrottle(SimpleRateThrottle):
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


class AnonymousRateThrottle(SimpleRateThrottle):
    scope = "api-anon"

    def get_rate(self) -> str:
        return settings.SCOUT_API_ANON_RATE

    def get_cache_key(self, request: Request, view) -> str | None:
        if request.user and request.user.is_authenticated:
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
