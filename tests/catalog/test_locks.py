"""catalog.locks: a named lock held in Redis (when configured) through the process's one connection pool."""

import contextvars

from catalog.locks import named_lock


def _take_twice() -> tuple[bool, bool]:
    with named_lock("sync:1", ttl=60) as held, named_lock("sync:1", ttl=60) as again:
        return held, again


def test_locks_share_the_processes_redis_connection(redis_connects):
    """Every lock (one per server sync, one per Weaviate build or replay record) made a Redis client of its own: a
    new TCP connection, closed again at release. Locks now go through the process's one pool; each is still held
    against a second taker and released on exit."""
    taken = [contextvars.Context().run(_take_twice) for _ in range(5)]

    assert taken == [(True, False)] * 5
    assert len(redis_connects) == 1
