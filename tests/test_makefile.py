"""`make worker` and `make beat` start beside the demo: the same secret key and the demo memory server's file.

Run through make itself, with a stand-in ``celery`` that prints the environment it was given. Before, both
targets gave no key (so the worker refused to start with DEBUG off) and no MEMORY_FILE_PATH (so a worker's sync of
the demo's memory server failed and hid its tools from clients)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _stand_in(tmp_path: Path, program: str, script: str) -> tuple[Path, Path]:
    """A bin directory make takes as installed, with ``program`` a shell script, and a key file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / ".installed").touch()
    stand_in = bin_dir / program
    stand_in.write_text(f"#!/bin/sh\n{script}\n")
    stand_in.chmod(0o755)
    key = tmp_path / "secret-key"
    key.write_text("k\n")
    return bin_dir, key


def _make(args: list[str], *, leave_out: tuple[str, ...]) -> subprocess.CompletedProcess:
    environment = {name: value for name, value in os.environ.items() if name not in leave_out}
    done = subprocess.run(
        ["make", *args, "-o", "tools/node_modules/.installed"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize("target", ["worker", "beat"])
def test_worker_and_beat_get_the_demo_key_and_memory_file(tmp_path, target):
    bin_dir, key = _stand_in(tmp_path, "celery", 'env\necho "ARGS $*"')
    done = _make(["-s", target, f"BIN={bin_dir}", f"KEY_FILE={key}"], leave_out=("MEMORY_FILE_PATH", "MAKEFLAGS"))
    printed = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line and " " not in line[:1])
    assert printed["SECRET_KEY_FILE"] == str(key)
    assert printed["MEMORY_FILE_PATH"] == str(ROOT / "var" / "demo-memory.jsonl")
    assert f"ARGS -A scoutsite {target}" in done.stdout


@pytest.mark.parametrize(("target", "program"), [("run", "uvicorn"), ("worker", "celery")])
def test_run_and_worker_echo_their_command_not_the_metrics_cleanup_loop(tmp_path, target, program):
    """opsux7: `make run` printed the shell loop clearing the metrics directory (three lines of ``for f in ...; do
    pid=...; kill -0 ...``) before the server's command. The loop still runs (a gone process's file is removed, a
    live one's kept), unseen; the command an operator started is still echoed."""
    bin_dir, key = _stand_in(tmp_path, program, 'echo "STARTED $*"')
    metrics = tmp_path / "prometheus"
    metrics.mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()
    (metrics / f"counter_{gone.pid}.db").touch()
    (metrics / f"counter_{os.getpid()}.db").touch()
    done = _make(
        [target, f"BIN={bin_dir}", f"KEY_FILE={key}", f"PROMETHEUS_MULTIPROC_DIR={metrics}", "--no-print-directory"],
        leave_out=("MAKEFLAGS", "MFLAGS", "MAKELEVEL"),  # a nested make's -s would hide the echo this test reads
    )
    assert "kill -0" not in done.stdout and "for f in" not in done.stdout, done.stdout
    echoed = [line for line in done.stdout.splitlines() if not line.startswith("STARTED")]
    assert len(echoed) == 1 and f"{bin_dir}/{program} " in echoed[0], done.stdout
    assert "STARTED " in done.stdout
    assert sorted(path.name for path in metrics.iterdir()) == [f"counter_{os.getpid()}.db"]
