"""/metrics under two worker processes: a scrape of either worker counts what both did (multiprocess mode), whether
the workers are started by hand with PROMETHEUS_MULTIPROC_DIR or by `make run WORKERS=2`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from tests.mcpgateway.conftest import REPO, free_port
from tests.mcpgateway.test_cross_process import Site, call, ledger_site, two_worker_site

from .test_metrics import value
from .test_serve_workers import make_run_two_workers

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


def _serving_workers(session: int) -> list[int]:
    """The uvicorn workers (multiprocessing's spawned children) of the process session ``session``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):  # ended meanwhile
            continue
        if int(stat.rsplit(")", 1)[1].split()[3]) == session and b"spawn_main" in command:
            pids.append(int(entry.name))
    return sorted(pids)


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """``pid`` stopped (SIGSTOP): it accepts no connection, so the other worker answers every request meanwhile."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def test_make_run_workers_sum_their_counters(tmp_path: Path):
    """opsux6: `make run WORKERS=2` did not set PROMETHEUS_MULTIPROC_DIR, so each worker kept its own counters and a
    scrape showed those of whichever worker took the connection. Each worker in turn answers alone (the other
    stopped): one unknown-tool call on the first, two on the second, then each is scraped alone and counts all three
    (and none of an earlier run's)."""
    site, tokens = ledger_site(tmp_path, SCOUT_MCP_WARM_UP="0")
    key_file = tmp_path / "secret-key"
    key_file.write_text(site.env.pop("SECRET_KEY") + "\n")  # the key the tokens were made under
    site.env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    # An earlier run's worker, gone, counted five: its file is removed before the workers start, not summed with theirs.
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    earlier = "from mcpgateway.metrics import EXECUTIONS; EXECUTIONS.labels(outcome='unknown_tool').inc(5)"
    subprocess.run(
        [sys.executable, "-c", earlier], cwd=REPO, env={**site.env, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    ).check_returncode()
    assert list(metrics_dir.glob("counter_*.db"))
    port = free_port()
    gateway = SimpleNamespace(url=f"http://127.0.0.1:{port}")
    unknown = {"tool_id": "ledger::nope", "arguments": {}}
    with make_run_two_workers(tmp_path, site.env, port, key_file) as (server, log):
        assert log.count("Application startup complete.") == 2, log[-3000:]
        first, second = _serving_workers(session=server.pid)
        with stopped(second):
            assert call(gateway, tokens["alice"], "execute_tool", unknown)["result"]["isError"]
        with stopped(first):
            for _ in range(2):
                assert call(gateway, tokens["alice"], "execute_tool", unknown)["result"]["isError"]
        scrapes = []
        for alone in ((first, second), (second, first)):
            with stopped(alone[1]):
                scrapes.append(httpx.get(f"{gateway.url}/metrics", timeout=30).text)
    for text in scrapes:
        assert value(text, "scout_executions_total", outcome="unknown_tool") == 3, text
