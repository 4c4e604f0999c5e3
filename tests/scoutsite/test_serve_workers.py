"""`make run WORKERS=N` on a slow machine: uvicorn's supervisor pings each worker and kills one that does not answer
within --timeout-worker-healthcheck seconds (uvicorn's default 5), then starts another. A worker answers from a
thread it starts only once its interpreter is up and has read what the supervisor sent it, so a worker whose start
took longer than that was killed before it could answer, and its replacement too (opsux5: "Child process [...] died"
under a CPU burner, on the documented serve command). The serve command gives workers a minute.

The slow start is real and deterministic: every Python process of the run (the supervisor and each worker) first
sleeps 8 seconds in a ``sitecustomize`` put on its path, before anything of uvicorn or Scout runs."""

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.mcpgateway.conftest import free_port, migrated_sqlite

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SLOW_START_SECONDS = 8  # past uvicorn's default healthcheck timeout (5 s), well within the serve command's


def serve_command(port: int, key_file: Path, metrics_dir: Path) -> str:
    """The commands `make run WORKERS=2` runs, as make prints them (its last two lines: the key file exists). Under
    `make test` (as .ci/run runs the suite) this make is nested, and printed "Leaving directory" after it; without the
    outer make's variables it prints the commands alone."""
    outer_make = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")
    variables = [f"PORT={port}", f"KEY_FILE={key_file}", f"PROMETHEUS_MULTIPROC_DIR={metrics_dir}"]
    dry_run = subprocess.run(
        ["make", "--no-print-directory", "-n", "run", "WORKERS=2", *variables],
        cwd=ROOT,
        env={key: value for key, value in os.environ.items() if key not in outer_make},
        capture_output=True,
        text=True,
        check=True,
    )
    *_, cleanup, command = dry_run.stdout.strip().splitlines()
    assert "uvicorn scoutsite.asgi:application" in command and "--workers 2" in command, command
    # The line before it clears the metric files of processes no longer running (a line of its own since opsux7, who
    # stopped make echoing it): run as make runs it, both.
    assert cleanup.startswith(f"mkdir -p {metrics_dir} && for f in "), cleanup
    return f"{cleanup}\n{command}"


@contextmanager
def make_run_two_workers(
    tmp_path: Path, env: dict[str, str], port: int, key_file: Path
) -> Iterator[tuple[subprocess.Popen, str]]:
    """`make run WORKERS=2` serving on ``port`` (its metrics in ``tmp_path``/prometheus) until the block ends, in a
    process session of its own (the session id: the process's pid); the block gets the process and its log once both
    workers started, or one died, or four minutes passed."""
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            ["sh", "-c", serve_command(port, key_file, tmp_path / "prometheus")],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 240  # two workers starting on a loaded machine
        while time.monotonic() < deadline and server.poll() is None:
            text = log.read_text()
            if "died" in text or text.count("Application startup complete.") == 2:
                break
            time.sleep(0.5)
        yield server, log.read_text()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)


def test_the_serve_command_keeps_workers_that_start_slowly(tmp_path: Path):
    key_file = tmp_path / "secret-key"
    key_file.write_text("serve-workers-test-only-not-a-secret\n")
    env = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "DATABASE_URL", "TESTING")}
    env.update(SQLITE_PATH=str(tmp_path / "scout.sqlite3"), SECRET_KEY_FILE=str(key_file), SCOUT_MCP_WARM_UP="0")
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    migrated_sqlite(tmp_path / "scout.sqlite3", env)

    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(f"import time\n\ntime.sleep({SLOW_START_SECONDS})\n")
    env["PYTHONPATH"] = os.pathsep.join([str(slow), str(ROOT)])
    port = free_port()
    with make_run_two_workers(tmp_path, env, port, key_file) as (_, text):
        assert "died" not in text, text[-3000:]
        assert text.count("Application startup complete.") == 2, text[-3000:]
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).json() == {"status": "ok"}
