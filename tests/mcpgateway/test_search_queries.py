"""The database work of a warm tool_search over HTTP (issue 9), pinned: one query, the visibility version row.

Everything else a search needs is kept per process under that row's token, which every change that can alter
an answer rewrites in its own transaction: the verified token (mcpgateway/auth.py), the visible set
(governance/selectors/tools.py), the index snapshot and the answer's descriptors. Its discovery records
(audit event, query-log entry) are queued for the write-behind thread (governance/writebehind.py), and
periodic reads (the index generation every SCOUT_SEARCH_GENERATION_CHECK_SECONDS, a token's last_used_at once
a minute) are not per request. A new query on this path is a cost every search pays: this test fails then.

Queries are counted on every thread of the process (the event loop, the ORM threads, the write-behind
thread) by wrapping Django's cursor, so a query moved to another thread still counts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.db.backends import utils

from governance.models import VisibilityVersion
from governance.writebehind import write_behind, write_behind_flush

from .conftest import build_index, gateway_db, grant, make_token, make_user, modern_request, raw_post, rpc_result

pytestmark = [gateway_db, pytest.mark.slow]
SEARCH = modern_request("tools/call", {"name": "tool_search", "arguments": {"query": "current time in a zone"}})


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The SQL of every statement run through Django's cursors from now on, on any thread."""
    seen: list[str] = []
    lock = threading.Lock()
    execute, executemany = utils.CursorWrapper.execute, utils.CursorWrapper.executemany

    def counted(self, sql, params=None):
        with lock:
            seen.append(sql)
        return execute(self, sql, params)

    def counted_many(self, sql, param_list):
        with lock:
            seen.append(sql)
        return executemany(self, sql, param_list)

    monkeypatch.setattr(utils.CursorWrapper, "execute", counted)
    monkeypatch.setattr(utils.CursorWrapper, "executemany", counted_many)
    return seen


@pytest.fixture
def queued_discovery(settings) -> Iterator[None]:
    """Discovery records written behind the request, as in production (the tests write them inline), with a
    batch interval longer than the test, so the writer thread inserts nothing while queries are counted."""
    write_behind_flush()
    settings.SCOUT_WRITE_BEHIND_SECONDS = 300
    settings.SCOUT_SEARCH_GENERATION_CHECK_SECONDS = 300  # periodic, not per request (module note)
    yield
    settings.SCOUT_WRITE_BEHIND_SECONDS = 0
    write_behind_flush()


def test_a_warm_search_reads_the_version_row_and_nothing_else(
    gateway, admin_user, time_server, queued_discovery, executed
):
    member = make_user("gw_queries")
    grant(admin_user, time_server, member, "discover", "execute")
    build_index()
    token = make_token(member)
    for _ in range(2):  # the token verified and kept, the visible set and the descriptors computed and kept
        assert raw_post(gateway, SEARCH, token=token).status_code == 200
    for _ in range(3):
        executed.clear()
        queued = write_behind().pending()
        response = raw_post(gateway, SEARCH, token=token)
        assert response.status_code == 200
        assert rpc_result(response)["result"]["structuredContent"]["matches"][0]["tool_id"] == "time::get_current_time"
        table = VisibilityVersion._meta.db_table
        assert len(executed) == 1 and table in executed[0] and executed[0].startswith("SELECT"), executed
        assert write_behind().pending() == queued + 2  # its audit event and query-log entry, queued


@pytest.fixture
def redis_round_trips(settings, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The gateway's cache on Redis; each request sent to it (a round trip: one command, or a script) from now on,
    on any thread, by its command name."""
    import redis.connection

    from .test_rate_limit import REDIS

    settings.CACHES = {"default": {"BACKEND": "catalog.rediscache.ScoutRedisCache", "LOCATION": REDIS}}
    sent: list[bytes] = []
    send = redis.connection.AbstractConnection.send_packed_command

    def counted(self, command, *args, **kwargs):
        packed = b"".join(command) if isinstance(command, list) else command
        sent.append(packed.split(b"\r\n")[2].upper())  # *<n>, $<len>, then the command's name
        return send(self, command, *args, **kwargs)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    return sent


def test_a_warm_search_on_redis_makes_two_round_trips_to_it(gateway, admin_user, time_server, redis_round_trips):
    """Issue 9, on Postgres + Redis: a warm tool_search sent Redis nine commands, each a round trip: the rate
    count's ``add`` and ``incr`` (SET NX, EXISTS, INCRBY) for the token and again for its person, the visibility
    cache generation, and the index generation's GET and DEL (its 0.5 s timeout, Redis keeping whole seconds only,
    was written as a delete, so every search also read the generation from the database). Now the rate is counted
    in one script for both keys and the index generation is kept per process (search/selectors.py): two round
    trips, whatever SCOUT_SEARCH_GENERATION_CHECK_SECONDS is."""
    member = make_user("gw_redis_trips")
    grant(admin_user, time_server, member, "discover", "execute")
    build_index()
    token = make_token(member)
    for _ in range(2):  # the token verified and kept (its first request also notes it seen in Redis)
        assert raw_post(gateway, SEARCH, token=token).status_code == 200
    for _ in range(3):
        redis_round_trips.clear()
        response = raw_post(gateway, SEARCH, token=token)
        assert response.status_code == 200
        assert rpc_result(response)["result"]["structuredContent"]["matches"][0]["tool_id"] == "time::get_current_time"
        assert sorted(redis_round_trips) == [b"EVAL", b"GET"], redis_round_trips  # the rate; the visibility version
