"""/metrics in multiprocess mode forgets the breaker state of a worker that died (opsux7).

Each process writes its gauge to a file named after its pid; a worker that died never removed its "live" gauge,
so its open breaker was the worst state over "live" workers, shown until every worker had been restarted."""

import subprocess
import sys

import pytest

from tests.mcpgateway.conftest import REPO

from .test_metrics import value

pytestmark = pytest.mark.django_db

# A gateway process's breaker of "flaky" as the upstream pool sets it (mcpgateway/upstreams.py): 2, open.
OPENED = "from mcpgateway.metrics import UPSTREAM_BREAKER_STATE as g; g.labels(server='{slug}').set(2)"


def _process(metrics_dir, slug: str, *, stays: bool) -> subprocess.Popen:
    code = OPENED.format(slug=slug) + ("; print('ready', flush=True); input()" if stays else "")
    env = {"PATH": "/usr/bin:/bin", "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    return subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def test_a_dead_workers_open_breaker_is_not_shown_a_live_ones_is(client, settings, tmp_path):
    settings.PROMETHEUS_MULTIPROC_DIR = str(tmp_path)
    dead = _process(tmp_path, "crashed-worker-saw-it", stays=False)
    assert dead.wait(timeout=30) == 0
    assert list(tmp_path.glob(f"gauge_livemax_{dead.pid}.db"))
    live = _process(tmp_path, "live-worker-sees-it", stays=True)
    try:
        assert live.stdout.readline() == "ready\n"
        text = client.get("/metrics").content.decode()
    finally:
        live.communicate(input="\n", timeout=30)
    assert value(text, "scout_upstream_breaker_state", server="live-worker-sees-it") == 2
    assert "crashed-worker-saw-it" not in text
    assert not list(tmp_path.glob(f"gauge_livemax_{dead.pid}.db"))
