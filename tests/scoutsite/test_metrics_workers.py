"""/metrics under two worker processes: a scrape of either worker counts what both did (multiprocess mode)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.mcpgateway.test_cross_process import SETUP, Site, call, listing_line

from .test_metrics import value

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Site, dict[str, str]]]:
    site = Site(tmp_path)
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    site.env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics_dir)
    (tmp_path / "v1.jsonl").write_text(listing_line("Look up an account in the ledger.") + "\n")
    site.manage("migrate", "-v0")
    printed = site.shell(SETUP.format(listing=tmp_path / "v1.jsonl"))
    tokens = dict(line.split()[1:] for line in printed.splitlines() if line.startswith("TOKEN "))
    try:
        site.start_worker()
        site.start_worker()
        yield site, tokens
    finally:
        site.stop()


def test_a_scrape_of_either_worker_sums_both(site):
    site, tokens = site
    first, second = site.workers
    call(first, tokens["alice"], "tool_search", {"query": "look up an account in the ledger"})
    unknown = call(second, tokens["alice"], "execute_tool", {"tool_id": "ledger::nope", "arguments": {}})
    assert "error" in unknown
    failed = call(second, tokens["bob"], "execute_tool", {"tool_id": "ledger::lookup", "arguments": {"account": "1"}})
    assert failed["result"]["isError"] is True  # an imported server has no live connection: an upstream error

    for worker in (first, second):
        text = httpx.get(f"{worker.url}/metrics", timeout=10).text
        searches = sum(
            value(text, "scout_searches_total", confidence=c, degraded=d, backend=b)
            for c in ("high", "low", "none")
            for d in ("true", "false")
            for b in ("", "embedded")
        )
        assert searches == 1, text
        assert value(text, "scout_executions_total", outcome="unknown_tool") == 1
        assert value(text, "scout_executions_total", outcome="error") == 1
        assert value(text, "scout_execute_seconds_count") == 2
