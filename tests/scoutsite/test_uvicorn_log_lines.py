"""uvicorn's own records go through Scout's log handler (opsux8). An exception that leaves the application is
logged by uvicorn ("Exception in ASGI application", on ``uvicorn.error``), through the handler uvicorn set up before
it imported Scout: the exception's last line, which may quote an upstream, reached the log raw (a forged record on
a line of its own, a terminal escape, a hosted server's secret URL path), past scoutsite/logfilters.py.

A real uvicorn, started as `make run` starts it, serves tests/scoutsite/raising_app.py: Scout's application with an
address whose exception quotes such text."""

import os
import signal
import subprocess
import sys
import time

import httpx

from tests.mcpgateway.conftest import REPO, free_port
from tests.scoutsite.raising_app import FORGED_MESSAGE


def test_an_unhandled_exceptions_log_lines_are_scouts(tmp_path):
    port = free_port()
    env = {**os.environ, "SECRET_KEY": "x"}  # no database is opened: no lifespan, no request reaches Django
    command = [sys.executable, "-m", "uvicorn", "tests.scoutsite.raising_app:application", "--port", str(port)]
    command += ["--http", "scoutsite.serving:BoundedH11Protocol", "--lifespan", "off"]
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        server = subprocess.Popen(command, cwd=REPO, env=env, stdout=stdout, stderr=stderr)
    try:
        deadline = time.monotonic() + 120  # a loaded machine imports Django slowly
        while True:
            assert server.poll() is None and time.monotonic() < deadline, err.read_text()[-3000:]
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/raise", timeout=30).status_code
                break
            except httpx.TransportError:
                time.sleep(0.2)
        assert status == 500
        while "GET /raise" not in out.read_text() and time.monotonic() < deadline:  # written after the error's
            time.sleep(0.05)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    log = err.read_text()
    assert " ERROR uvicorn.error Exception in ASGI application\nTraceback" in log, log[-3000:]
    said = FORGED_MESSAGE.split("https://")[0].replace("\n", "\\n").replace("\x1b", "\\x1b")
    assert f"RuntimeError: {said}https://mcp.example/" in log
    assert not any(line.startswith("2026-01-01") for line in log.splitlines())
    assert "\x1b" not in log and "SECRETPATH" not in log
    assert '"GET /raise HTTP/1.1" 500' in out.read_text()  # uvicorn's access log is left as it was
