"""F4: Redis stopped and restarted during traffic. Searches and calls go on (the cache is only an accelerator),
authorization never fails open, the REST rate limiter fails open as documented, and the cache is used again
once Redis is back.

Runs against a throwaway ``redis-server`` this test starts on a free loopback port (skipped where there is
none); the gateway's cache is switched to it for the test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcpgateway.constants import UNKNOWN_TOOL_MESSAGE

from .conftest import (
    MODERN,
    REDIS_SERVER,
    ThrowawayRedis,
    build_index,
    gateway_db,
    grant,
    make_token,
    make_user,
    mcp_client,
    modern_request,
    raw_post,
    run,
    unknown_tool_text,
)

pytestmark = [
    gateway_db,
    pytest.mark.slow,
    pytest.mark.skipif(REDIS_SERVER is None, reason="needs a redis-server binary to stop and restart"),
]


@pytest.fixture
def throwaway_redis(settings) -> Iterator[ThrowawayRedis]:
    from catalog.cachesafe import cache_reset

    server = ThrowawayRedis()
    server.start()
    settings.CACHES = {
        "default": {
            "BACKEND": "catalog.rediscache.ScoutRedisCache",
            "LOCATION": f"redis://127.0.0.1:{server.port}/0",
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
    settings.SCOUT_CACHE_RETRY_SECONDS = 0.5
    cache_reset()
    try:
        yield server
    finally:
        server.stop()
        cache_reset()


@pytest.fixture
def people(gateway, admin_user, time_server) -> dict[str, str]:
    member, outsider = make_user("gw_member"), make_user("gw_outsider")
    grant(admin_user, time_server, member, "discover", "execute")
    build_index()
    return {
        "member": make_token(member, ["discover", "execute", "api"]),
        "outsider": make_token(outsider, ["discover", "execute", "api"]),
    }


def _traffic(gateway: Any, people: dict[str, str]) -> dict[str, Any]:
    """One round of what clients do: search and execute (member), the same as an outsider, a REST search."""

    async def main() -> dict[str, Any]:
        found: dict[str, Any] = {}
        async with mcp_client(gateway, people["member"], mode=MODERN) as client:
            search = await client.call_tool("tool_search", {"query": "current time in a timezone"})
            found["search"] = [m["tool_id"] for m in search.structured_content["matches"]]
            found["execute"] = await client.call_tool(
                "execute_tool", {"tool_id": "time::get_current_time", "arguments": {"timezone": "UTC"}}
            )
        async with mcp_client(gateway, people["outsider"], mode=MODERN) as client:
            search = await client.call_tool("tool_search", {"query": "current time in a timezone"})
            found["outsider_search"] = [m["tool_id"] for m in search.structured_content["matches"]]
            refused = await client.call_tool(
                "execute_tool", {"tool_id": "time::get_current_time", "arguments": {"timezone": "UTC"}}
            )
            found["outsider_execute"] = unknown_tool_text(refused) or "ran"
        return found

    found = run(main)
    found["rest"] = httpx.post(
        f"{gateway.url}/api/v1/search/",
        json={"query": "current time in a timezone"},
        headers={"Authorization": f"Bearer {people['member']}"},
        timeout=30,
    )
    return found


def _assert_served(found: dict[str, Any]) -> None:
    assert "time::get_current_time" in found["search"]
    assert not found["execute"].is_error
    # Authorization never fails open, whatever the cache does.
    assert found["outsider_search"] == []
    assert found["outsider_execute"] == UNKNOWN_TOOL_MESSAGE
    assert found["rest"].status_code == 200, found["rest"].text[:300]
    assert "time::get_current_time" in found["rest"].text


def test_searches_and_calls_go_on_while_redis_is_down_and_the_cache_returns_after(gateway, people, throwaway_redis):
    _assert_served(_traffic(gateway, people))
    assert throwaway_redis.keys() > 0  # the gateway really uses this Redis

    throwaway_redis.stop()
    for _ in range(2):  # the first round meets the failures, the second the skip window
        _assert_served(_traffic(gateway, people))

    throwaway_redis.start()  # empty: nothing from before the outage survives
    assert throwaway_redis.keys() == 0
    time.sleep(0.6)  # the skip window after the last failure passes (a wait, not a timed assertion)
    _assert_served(_traffic(gateway, people))
    assert throwaway_redis.keys() > 0  # recovered: the cache is written again without a restart


def _rest_statuses(gateway: Any, token: str, count: int) -> list[int]:
    return [
        httpx.get(f"{gateway.url}/api/v1/tools/", headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code
        for _ in range(count)
    ]


def test_the_rest_rate_limit_fails_open_while_redis_is_down_and_applies_again_after(
    gateway, people, throwaway_redis, settings
):
    """The documented fail mode (governance/api/throttling.py, README "REST API"): the limit is counted in Redis;
    without Redis it lets requests through (authentication and permissions are the database's either way)."""
    settings.SCOUT_API_RATE = "3/minute"
    assert _rest_statuses(gateway, people["member"], 5) == [200, 200, 200, 429, 429]

    throwaway_redis.stop()
    assert _rest_statuses(gateway, people["member"], 5) == [200] * 5  # fails open: no count, no refusal
    outsider = httpx.get(
        f"{gateway.url}/api/v1/tools/time::get_current_time/",
        headers={"Authorization": f"Bearer {people['outsider']}"},
        timeout=30,
    )
    assert outsider.status_code == 404  # what the limiter lets through is still authorised by the database

    throwaway_redis.start()  # empty: the count starts again
    time.sleep(0.6)  # the skip window after the last failure passes (a wait, not a timed assertion)
    assert _rest_statuses(gateway, people["member"], 5) == [200, 200, 200, 429, 429]


def test_the_mcp_rate_limit_fails_open_while_redis_is_down_and_applies_again_after(
    gateway, people, throwaway_redis, settings
):
    """/mcp's limit per token (SCOUT_MCP_RATE) is counted in Redis too and has the same fail mode."""
    settings.SCOUT_MCP_RATE = "3/day"  # a day's slot: the test never straddles two

    def statuses(count: int) -> list[int]:
        return [
            raw_post(gateway, modern_request("tools/list"), token=people["member"]).status_code for _ in range(count)
        ]

    assert statuses(5) == [200, 200, 200, 429, 429]
    throwaway_redis.stop()
    assert statuses(5) == [200] * 5  # fails open: no count, no refusal
    throwaway_redis.start()  # empty: the count starts again
    time.sleep(0.6)  # the skip window after the last failure passes (a wait, not a timed assertion)
    assert statuses(5) == [200, 200, 200, 429, 429]
