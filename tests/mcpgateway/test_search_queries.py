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
