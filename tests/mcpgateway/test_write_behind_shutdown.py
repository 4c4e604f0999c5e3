"""Discovery records are written behind the request, in batches (issue 9); a normal shutdown of a gateway worker
(SIGTERM, as a process manager stops it) writes every record still queued: nothing a worker answered is lost."""

from __future__ import annotations

import signal
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from .test_cross_process import search_status, two_worker_site

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SEARCHES_PER_WORKER = 3


def rows(site) -> tuple[int, int]:
    """The query-log rows and the tool_search discovery audit rows in the site's SQLite file (read directly: a
    ``manage.py shell`` for it started Django twice a test)."""
    with closing(sqlite3.connect(site.env["SQLITE_PATH"])) as database:
        (query_log,) = database.execute("SELECT count(*) FROM search_querylogentry").fetchone()
        (audit,) = database.execute(
            "SELECT count(*) FROM governance_auditevent WHERE event_type = 'discovery' "
            "AND json_extract(payload, '$.meta_tool') = 'tool_search'"
        ).fetchone()
    return query_log, audit


def test_a_normal_shutdown_writes_every_queued_discovery_record(tmp_path: Path):
    # The writer waits a minute between batches: what the workers answered is still queued when they stop.
    with two_worker_site(tmp_path, SCOUT_WRITE_BEHIND_SECONDS="60") as (site, tokens):
        for worker in site.workers:
            for _ in range(SEARCHES_PER_WORKER):
                assert search_status(worker, tokens["alice"]) == 200
        assert rows(site) == (0, 0)  # the control: queued, not yet written
        for worker in site.workers:
            worker.process.send_signal(signal.SIGTERM)
        for worker in site.workers:
            # uvicorn ends a graceful shutdown by re-raising the signal it got
            assert worker.process.wait(timeout=60) in (0, -signal.SIGTERM)
        written = 2 * SEARCHES_PER_WORKER
        assert rows(site) == (written, written)
