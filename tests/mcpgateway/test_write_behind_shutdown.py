"""Discovery records are written behind the request, in batches (issue 9); a normal shutdown of a gateway worker
(SIGTERM, as a process manager stops it) writes every record still queued: nothing a worker answered is lost."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from .test_cross_process import search_status, two_worker_site

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

COUNT = """
from governance.models import AuditEvent
from search.models import QueryLogEntry
print("ROWS", QueryLogEntry.objects.count(),
      AuditEvent.objects.filter(event_type="discovery", payload__meta_tool="tool_search").count())
"""
SEARCHES_PER_WORKER = 3


def rows(site) -> tuple[int, int]:
    line = next(line for line in site.shell(COUNT).splitlines() if line.startswith("ROWS "))
    query_log, audit = line.split()[1:]
    return int(query_log), int(audit)


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
