"""The Redis cache backend (with REDIS_URL): Django's, keeping one redis-py client per connection pool.

Django's ``RedisCacheClient`` builds a new ``redis.Redis`` object around its pool on every call (get, set, add,
incr...); issue 9: about as much CPU as the GET it sends (bench/NOTES-speed12.md). A redis-py client is safe to
share between threads (each command takes a connection from the pool), so one per pool serves the process.

``redis_client()`` hands that client to work the cache API has no call for (a Lua script, a lock), with the
backend's key prefix and pool, instead of reaching into the backend's private ``_cache``.
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class KeptRedisCacheClient(RedisCacheClient):
    """``RedisCacheClient`` whose ``get_client`` answers the same client for the same pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}  # id(pool) -> redis.Redis; pools live as long as this object

    def get_client(self, key: str | None = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:  # two threads may both build one: either serves, the other is dropped
            client = self._clients.setdefault(id(pool), self._client(connection_pool=pool))
        return client


class ScoutRedisCache(RedisCache):
    """Django's RedisCache over ``KeptRedisCacheClient`` (module note)."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = KeptRedisCacheClient

    def redis_client(self) -> Any:
        """The redis-py client the backend writes with (its first server), for scripts and locks."""
        return self._cache.get_client(write=True)
