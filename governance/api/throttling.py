"""Rate limits per API token (per user for sessions, per address when anonymous), counted in the cache.

With REDIS_URL the cache is Redis, so every worker and replica shares one count. Rates are read from settings
at each request (SCOUT_API_RATE, SCOUT_API_ANON_RATE); a refused request gets 429 with Retry-After.

Fail mode (SECURITY-TESTS F4): when the cache cannot be reached the limiter fails open, so a Redis outage
does not take the API down. It is a limit on volume, not an access control: authentication and every
permission check are answered by the database either way. Each such request is logged."""

import hashlib
import ipaddress
import logging
import math
import time
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

from django.conf import settings
from django.core.cache.backends.base import BaseCache
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from catalog.cachesafe import cache_available, cache_call, cache_run
from catalog.rediscache import ScoutRedisCache
from governance.principals import Principal

logger = logging.getLogger(__name__)


class FailOpenThrottle(SimpleRateThrottle):
    """A cache-based throttle that lets the request through when the cache is down (see the module note). Counted
    per address, it counts an IPv6 client per /64 network (``address_counted``)."""

    def get_ident(self, request) -> str:
        return address_counted(super().get_ident(request) or "")

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


_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int] | None:
    """``"<n>/<second|minute|hour|day>"`` (DRF's syntax) as (requests, seconds); None for an empty rate (no limit)."""
    if not rate.strip():
        return None
    count, _, period = rate.partition("/")
    return int(count), _PERIODS[period.strip()[:1]]


def slot_over_the_limit(key: str, limit: int, window: int, *, count: bool = True) -> int:
    """Counts one request of ``key`` (``count`` False: only looks) in the current ``window``-second slot: the seconds
    until the slot ends when it is past ``limit``, else 0. A cache outage counts nothing and refuses nothing (F4)."""
    if count:
        return slots_over_the_limits([(key, limit)], window)[1]
    now = time.time()
    seen = cache_call("get", f"{key}:{int(now // window)}", default=0) or 0
    return 0 if seen <= limit else _slot_left(now, window)


# Counts one request against each key in turn, stopping at the first past its limit: its position (1-based) or 0.
# One round trip for what the cache API takes three per key for (``add``, then ``incr``'s EXISTS and INCRBY).
_COUNT_IN_TURN = """
for i, key in ipairs(KEYS) do
  local seen = redis.call('INCR', key)
  if seen == 1 then redis.call('EXPIRE', key, ARGV[1]) end
  if seen > tonumber(ARGV[i + 1]) then return i end
end
return 0
"""


def slots_over_the_limits(limits: Sequence[tuple[str, int]], window: int) -> tuple[int, int]:
    """Counts one request against each (key, limit) in turn in the current ``window``-second slot, stopping at the
    first one past its limit (the keys after it are not counted): that one's position (1-based) and the seconds
    until the slot ends, else (0, 0). On Redis one round trip for all (issue 9: two keys took six on the gateway's
    every request), with the same counts the cache API reads. A cache outage counts nothing and refuses nothing
    (F4)."""
    now = time.time()
    slot = int(now // window)
    keys = [(f"{key}:{slot}", limit) for key, limit in limits]
    over = cache_run(lambda cache: _count_in_turn(cache, keys, window + 1), default=0)
    return over, (_slot_left(now, window) if over else 0)


def _count_in_turn(cache: BaseCache, keys: list[tuple[str, int]], timeout: int) -> int:
    if isinstance(cache, ScoutRedisCache):
        names = [cache.make_and_validate_key(key) for key, _ in keys]
        return int(
            cache.redis_client().eval(_COUNT_IN_TURN, len(names), *names, timeout, *(limit for _, limit in keys))
        )
    for position, (key, limit) in enumerate(keys, start=1):
        seen = 1 if cache.add(key, 1, timeout=timeout) else cache.incr(key)
        if seen > limit:
            return position
    return 0


def _slot_left(now: float, window: int) -> int:
    return max(1, math.ceil(window - now % window))


def client_address(remote_addr: str | None, headers: Mapping[str, str]) -> str:
    """The caller's address as every per-address limit reads it (DRF's rule: the connection's, or the one the Nth
    trusted reverse proxy put in X-Forwarded-For, ``SCOUT_API_NUM_PROXIES``), for a Django or an ASGI request; an
    IPv6 client's /64 network (``address_counted``)."""
    ident = BaseThrottle().get_ident(SimpleNamespace(headers=headers, META={"REMOTE_ADDR": remote_addr})) or ""
    return address_counted(ident)


# An IPv6 host is given a whole /64 network (a cloud VM, a home line), so it sends from 2^64 addresses at will.
IPV6_COUNTED_PREFIX = 64


def address_counted(address: str) -> str:
    """What a per-address limit counts for ``address``: an IPv6 address's /64 network (counted per address, one
    host had a fresh budget per request: sign-in guesses without limit), an IPv4-mapped one's IPv4 address, anything
    else as it is."""
    try:
        parsed = ipaddress.ip_address(address.strip())
    except ValueError:
        return address
    if parsed.version == 4:
        return str(parsed)
    if parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(ipaddress.IPv6Network((int(parsed), IPV6_COUNTED_PREFIX), strict=False))


# How long a token verified once is let past an address's refused-token limit (renewed at each verification).
TOKEN_SEEN_SECONDS = 24 * 3600


def _seen_key(raw: str) -> str:
    return "token-seen:" + hashlib.sha256(raw.encode("utf-8")).hexdigest()  # the token, never kept raw


def token_seen(raw: str) -> None:
    """Note that ``raw`` verified, in the shared cache: a flood of refused tokens from its address (a NAT, or a proxy
    not counted in ``SCOUT_API_NUM_PROXIES``) then never stops it, in any process, on /mcp or REST."""
    cache_call("set", _seen_key(raw), 1, timeout=TOKEN_SEEN_SECONDS)


def bearer_wait(address: str, raw: str) -> int:
    """Before ``raw`` is looked up: the seconds to wait when its address is past its refused-token limit and the token
    never verified (``token_seen``), else 0. Only looks; ``refused_token_wait`` counts a refusal."""
    wait = refused_token_wait(address, count=False)
    return 0 if wait and cache_call("get", _seen_key(raw), default=None) else wait


def refused_token_wait(address: str, *, count: bool) -> int:
    """Bearer tokens refused (unknown, revoked, expired, malformed) per client address, on /mcp and the REST API
    together: at most ``SCOUT_REFUSED_TOKEN_RATE`` a period. Each refusal costs database
    lookups, and a request with any bearer value was counted by no limit (the token and person limits need a token
    that authenticates, the anonymous one a request without credentials). ``count``: count this refusal; else only
    look whether the address is past its limit, before a token is looked up. The seconds to wait, or 0."""
    rate = parse_rate(settings.SCOUT_REFUSED_TOKEN_RATE)
    if rate is None:
        return 0
    return slot_over_the_limit(f"refused-token:{address}", *rate, count=count)
