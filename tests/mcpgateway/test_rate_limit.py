"""T13, L3: /mcp had no rate limit, so one token looping on tool_search (a model run per query) or execute_tool
took the workers' CPU and the upstreams' capacity from every caller. Each token now has SCOUT_MCP_RATE requests
per period, counted in the cache like the REST API's; past it the answer is a 429 with Retry-After and a
JSON-RPC error the SDK client hands to its caller, and nothing runs."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone
from mcp.shared.exceptions import MCPError

from .conftest import MODERN, gateway_db, make_token, make_user, mcp_client, modern_request, raw_post, run

pytestmark = [gateway_db, pytest.mark.slow]
REDIS = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


def test_a_token_past_its_rate_gets_429_and_other_tokens_keep_theirs(gateway, settings):
    settings.SCOUT_MCP_RATE = "5/day"  # a day's slot: the test never straddles two
    user = make_user("gw_busy")
    busy, other = make_token(user), make_token(user)
    statuses = [raw_post(gateway, modern_request("tools/list"), token=busy).status_code for _ in range(6)]
    assert statuses == [200, 200, 200, 200, 200, 429]
    refused = raw_post(gateway, modern_request("tools/list"), token=busy)
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
    error = refused.json()["error"]
    assert error["code"] == -32000 and "Too many requests for this token (limit 5/day)" in error["message"]
    assert raw_post(gateway, modern_request("tools/list"), token=other).status_code == 200  # its own budget

    async def main() -> str:
        async with mcp_client(gateway, busy, mode=MODERN) as client:
            try:
                await client.list_tools()
            except MCPError as exc:
                return exc.error.message
        return "answered"

    assert run(main).startswith("Too many requests for this token")  # the SDK client's caller reads why

    settings.SCOUT_MCP_RATE = ""  # no limit
    assert raw_post(gateway, modern_request("tools/list"), token=busy).status_code == 200


def test_an_anonymous_request_is_401_not_counted(gateway, settings):
    settings.SCOUT_MCP_RATE = "1/day"
    for _ in range(3):
        assert raw_post(gateway, modern_request("tools/list")).status_code == 401


@pytest.mark.parametrize("protocol", [None, "2025-06-18", MODERN])
def test_a_get_on_the_stateless_endpoint_is_405_not_a_stream_held_open(gateway, settings, protocol):
    """T13: POSTs are counted per token, GETs were not, and on the stateless endpoint (the default) the SDK held a
    server-sent event stream open for a 2025 client's GET (or one naming no version) that nothing is ever sent on:
    one token opening GETs in a loop held a connection and a server task each. Now a GET is 405 at once; a GET
    without a token is still the 401 of any anonymous request."""
    settings.SCOUT_MCP_RATE = "1/day"
    token = make_token(make_user("gw_getter"))
    headers = {"Accept": "text/event-stream", **({"MCP-Protocol-Version": protocol} if protocol else {})}
    for _ in range(3):
        answer = httpx.get(f"{gateway.url}/mcp", headers={**headers, "Authorization": f"Bearer {token}"}, timeout=10)
        assert answer.status_code == 405
    assert httpx.get(f"{gateway.url}/mcp", headers=headers, timeout=10).status_code == 401
    assert raw_post(gateway, modern_request("tools/list"), token=token).status_code == 200  # its one POST


def test_tokens_minted_by_a_token_share_their_persons_ceiling(gateway, settings):
    """A token with the api scope mints tokens of its own scopes (REST tokens/), each with a rate of its own: ten
    tokens made ten times the rate. A person's tokens together get SCOUT_MCP_PERSON_TOKENS times it; another person
    keeps theirs."""
    settings.SCOUT_MCP_RATE = "2/day"
    settings.SCOUT_MCP_PERSON_TOKENS = 2
    first = make_token(make_user("gw_minter"), scopes=["api", "discover", "execute"])
    expires = (timezone.now() + timedelta(minutes=30)).isoformat()
    minted = []
    for n in range(3):
        answer = httpx.post(
            f"{gateway.url}/api/v1/tokens/",
            json={"name": f"more {n}", "scopes": ["discover", "execute"], "expires_at": expires},
            headers={"Authorization": f"Bearer {first}"},
            timeout=30,
        )
        assert answer.status_code == 201, answer.text
        minted.append(answer.json()["token"])
    answers = [raw_post(gateway, modern_request("tools/list"), token=token) for token in minted * 2]
    assert [answer.status_code for answer in answers] == [200, 200, 200, 200, 429, 429]  # 2 x 2, not 3 tokens x 2
    message = answers[-1].json()["error"]["message"]  # the third token is within its own rate
    assert message.startswith("Too many requests for this person's tokens together (2 times the limit)")
    assert raw_post(gateway, modern_request("tools/list"), token=make_token(make_user("gw_other"))).status_code == 200


@pytest.mark.parametrize("local", [True, False], ids=["process-memory cache", "redis cache"])
def test_the_rate_is_counted_on_the_event_loop_only_in_process_memory(gateway, settings, monkeypatch, local):
    """Issue 9: with the embedded cache (LocMemCache) a request is counted on the event loop itself, without the
    hop to a worker thread and back (~0.2 ms of CPU per request, more than the count). A network cache (Redis)
    is still counted on a worker thread: a Redis that hangs takes up to its socket timeout, which must never
    stall every request of the worker. Either way the 429 comes past the rate."""
    from mcpgateway import guards

    if local:
        settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "rate"}}
    else:
        settings.CACHES = {"default": {"BACKEND": "catalog.rediscache.ScoutRedisCache", "LOCATION": REDIS}}
    settings.SCOUT_MCP_RATE = "3/day"  # a day's slot: the test never straddles two
    on_loop: list[bool] = []
    count = guards._over_the_limits

    def counted(*args):
        on_loop.append(_event_loop_running())
        return count(*args)

    monkeypatch.setattr(guards, "_over_the_limits", counted)
    token = make_token(make_user("gw_counted"))
    statuses = [raw_post(gateway, modern_request("tools/list"), token=token).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert on_loop == [local] * 4


def test_requests_share_the_processes_redis_connections(gateway, settings, redis_connect_log):
    """Issue 9: Django's ``cache`` is kept per context (asgiref's Local) and every ASGI request is a context of its
    own, so every request built its own Redis backend and connection pool: a new TCP connection (connect, handshake,
    close) for the rate count on its worker thread and again for the search's version reads (a read on a new
    connection 2.1 ms of CPU, on a pooled one 0.6). The hot path's cache calls now share one backend per process:
    twelve requests one after another open a connection or two, not twenty-three."""
    settings.CACHES = {"default": {"BACKEND": "catalog.rediscache.ScoutRedisCache", "LOCATION": REDIS}}
    settings.SCOUT_MCP_RATE = "10/day"  # counted in Redis on every request; a day's slot: never straddles two
    settings.SCOUT_MCP_PERSON_TOKENS = 0  # the token's count only (a fresh token: nothing counted by an earlier run)
    token = make_token(make_user("gw_pooled"))
    statuses = [raw_post(gateway, modern_request("tools/list"), token=token).status_code for _ in range(12)]
    assert statuses == [200] * 10 + [429] * 2  # counted in the Redis this test configured
    assert 1 <= len(redis_connect_log) <= 3


def test_the_redis_backend_builds_one_client_for_all_its_calls(gateway, settings, monkeypatch):
    """Issue 9: Django's RedisCacheClient built a new redis-py client for every cache call (the rate count, the
    visibility generation read...), about as much CPU as the call itself (bench/NOTES-speed12.md). Scout's backend
    keeps one per connection pool: twelve requests, each counted in Redis, build one client, not one a call."""
    import redis

    settings.CACHES = {"default": {"BACKEND": "catalog.rediscache.ScoutRedisCache", "LOCATION": REDIS}}
    settings.SCOUT_MCP_RATE = "10/day"  # counted in Redis on every request; a day's slot: never straddles two
    settings.SCOUT_MCP_PERSON_TOKENS = 0
    built = []
    init = redis.Redis.__init__

    def counted(self, *args, **kwargs):
        built.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "__init__", counted)
    token = make_token(make_user("gw_one_client"))
    statuses = [raw_post(gateway, modern_request("tools/list"), token=token).status_code for _ in range(12)]
    assert statuses == [200] * 10 + [429] * 2  # counted in the Redis this test configured
    assert len(built) == 1


def _event_loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_a_subscriptions_listen_is_answered_at_once_not_a_stream_held_open(gateway, settings):
    """T13: a 2026-07-28 `subscriptions/listen` was served by the SDK's listen handler: acknowledged, then a stream
    held open for ever (Scout publishes no change events), a connection and a server task each. One token opened
    1,024 in under six seconds at the default rate, the SDK's cap per process, after which every other caller's
    listen was "Subscription limit reached". Now the method is not served: answered at once, and the capabilities
    no longer promise list changes."""
    settings.SCOUT_MCP_RATE = "5/day"
    token = make_token(make_user("gw_listener"))
    listen = modern_request("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen",
        "Authorization": f"Bearer {token}",
    }
    try:  # the read timeout bounds only how long a stream held open is waited for: the answer is whole or not
        answer = httpx.post(f"{gateway.url}/mcp", json=listen, headers=headers, timeout=10)
    except httpx.ReadTimeout:
        pytest.fail("subscriptions/listen held its stream open")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == -32601  # Method not found

    async def main() -> str:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            try:
                async with client.listen(tools_list_changed=True):
                    return "listening"
            except MCPError as exc:
                return exc.error.message

    assert run(main) == "Method not found"  # the SDK client's caller is told, not left waiting for events
    discovered = raw_post(gateway, modern_request("server/discover"), token=token).json()["result"]
    assert discovered["capabilities"]["tools"] == {"listChanged": False}


def test_refused_tokens_from_one_address_are_limited_before_any_lookup_on_mcp_and_rest(gateway, settings, monkeypatch):
    """T13: a request whose bearer token is refused (unknown, revoked, expired, malformed) was counted by no rate
    (the token and person limits need a token that authenticates; the REST anonymous limit counts only requests with
    no credential, since DRF answers a failed authentication first), and each refusal cost database lookups: anyone
    sent them at will, and tried token values without end. Now SCOUT_REFUSED_TOKEN_RATE counts them per client
    address, /mcp and REST together; past it a token never verified is answered 429 and never looked up (one verified
    earlier is served: everyone behind one address, a NAT or an uncounted proxy, keeps working)."""
    from django.core.cache import cache

    from governance.services import tokens
    from mcpgateway import auth

    cache.clear()
    settings.SCOUT_REFUSED_TOKEN_RATE = "3/day"  # a day's slot: the test never straddles two
    user = make_user("gw_refused")
    known, unused = make_token(user), make_token(user)
    assert raw_post(gateway, modern_request("tools/list"), token=known).status_code == 200  # verified before
    lookups: list[str] = []
    for name in ("api_token_verify_versioned", "api_token_refusal"):
        real = getattr(auth, name)
        monkeypatch.setattr(auth, name, lambda raw, _real=real, _name=name: lookups.append(_name) or _real(raw))
    real_verify = tokens.api_token_verify
    monkeypatch.setattr(
        "governance.api.authentication.api_token_verify", lambda raw: lookups.append("rest") or real_verify(raw)
    )

    guesses = [raw_post(gateway, modern_request("tools/list"), token=f"scout_guess{n}") for n in range(3)]
    assert [response.status_code for response in guesses] == [401, 401, 401]
    rest = httpx.get(f"{gateway.url}/api/v1/tools/", headers={"Authorization": "Bearer scout_guess3"})
    assert rest.status_code == 429 and int(rest.headers["retry-after"]) > 0  # one count for both
    assert lookups == ["api_token_verify_versioned", "api_token_refusal"] * 3 + ["rest"]
    lookups.clear()

    past = raw_post(gateway, modern_request("tools/list"), token="scout_guess4")
    assert past.status_code == 429 and int(past.headers["retry-after"]) > 0
    assert "Too many refused tokens from this address" in past.json()["error"]["message"]
    assert httpx.get(f"{gateway.url}/api/v1/tools/", headers={"Authorization": "Bearer x"}).status_code == 429
    # A live token never verified is not told apart from a guess (no lookup), ...
    assert raw_post(gateway, modern_request("tools/list"), token=unused).status_code == 429
    assert httpx.get(f"{gateway.url}/api/v1/tools/", headers={"Authorization": f"Bearer {unused}"}).status_code == 429
    assert lookups == []
    # ... one verified earlier is still served (and confirmed), by any process (this one's token cache emptied, as
    # another worker's would be) and over REST, and another client behind a proxy has its own count.
    auth.token_cache.clear()
    assert raw_post(gateway, modern_request("tools/list"), token=known).status_code == 200
    assert httpx.get(f"{gateway.url}/api/v1/tools/", headers={"Authorization": f"Bearer {known}"}).status_code != 429

    async def listed() -> list:
        async with mcp_client(gateway, known, mode=MODERN) as client:
            return (await client.list_tools()).tools

    assert run(listed) == []  # the SDK client, over HTTP: answered (this person may see no tool)
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    elsewhere = {"X-Forwarded-For": "198.51.100.8"}
    assert raw_post(gateway, modern_request("tools/list"), token="scout_x", headers=elsewhere).status_code == 401
    assert raw_post(gateway, modern_request("tools/list"), token=unused, headers=elsewhere).status_code == 200
