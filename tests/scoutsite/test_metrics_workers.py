"""/metrics under two worker processes: a scrape of either worker counts what both did (multiprocess mode)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.mcpgateway.test_cross_process import Site, call, two_worker_site

from .test_metrics import value

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[Site, dict[str, str]]]:
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    with two_worker_site(tmp_path, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir)) as built:
        yield built


def test_a_scrape_of_either_worker_sums_both(site):
    site, tokens = site
    first, second = site.workers
    call(first, tokens["alice"], "tool_search", {"query": "look up an account in the ledger"})
    unknown = call(second, tokens["alice"], "execute_tool", {"tool_id": "ledger::nope", "arguments": {}})
    assert unknown["result"]["isError"] is True and unknown["result"]["structuredContent"] == {"unknown_tool": True}
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
