"""Stalled connections (issue 12, finding 6): a client that connects and sends nothing, half a request line,
or headers and part of a body is disconnected once SCOUT_HTTP_REQUEST_TIMEOUT passes; an idle kept-alive
connection once SCOUT_HTTP_KEEP_ALIVE passes. A complete request is still answered.

The server is the documented run command (``uvicorn scoutsite.asgi:application --http <PROTOCOL>``) in a
subprocess, with short timeouts. Each check asserts that the server closes the connection (``recv`` returns
b"") before a generous deadline of the test's own; none measures how long it took.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scoutsite.serving import PROTOCOL
from tests.mcpgateway.conftest import free_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 1.0  # the server's request timeout and keep-alive in this test
DEADLINE = 30.0  # the test gives up waiting for the close after this long (a stalled connection's failure)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("stalled")
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "DATABASE_URL", "TESTING")}
    env.update(
        DJANGO_SETTINGS_MODULE="scoutsite.settings",
        SECRET_KEY="stalled-test-only-not-a-secret",
        SQLITE_PATH=str(tmp / "scout.sqlite3"),
        SCOUT_HTTP_REQUEST_TIMEOUT=str(TIMEOUT),
        SCOUT_HTTP_KEEP_ALIVE=str(TIMEOUT),
        PYTHONPATH=str(ROOT),
    )
    stderr = tmp / "uvicorn.stderr"
    with stderr.open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "scoutsite.asgi:application", "--http", PROTOCOL]
            + ["--host", "127.0.0.1", "--port", str(port), "--no-access-log"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        for _ in range(600):
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                assert process.poll() is None, stderr.read_text()[-2000:]
                time.sleep(0.1)
        else:
            pytest.fail(stderr.read_text()[-2000:])
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(20)


def _connect(server: str) -> socket.socket:
    host, port = server.split(":")
    sock = socket.create_connection((host, int(port)), timeout=DEADLINE)
    return sock


def _read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection; fails if it is still open at the deadline."""
    received = b""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            return received
        if chunk == b"":
            return received
        received += chunk
    pytest.fail(f"the server kept the connection open for over {DEADLINE:.0f} s (received {received[:200]!r})")


def test_a_connection_that_sends_nothing_is_closed(server):
    with _connect(server) as sock:
        assert _read_until_closed(sock) == b""


def test_a_connection_that_sends_half_a_request_is_closed(server):
    with _connect(server) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: " + server.encode() + b"\r\nContent-Type: applic")
        assert _read_until_closed(sock) == b""


def test_a_connection_that_sends_part_of_the_body_is_closed(server):
    with _connect(server) as sock:
        sock.sendall(
            b"POST /api/v1/search/ HTTP/1.1\r\nHost: " + server.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n" + b'{"query": "ti'
        )
        answer = _read_until_closed(sock)
    assert b"200 OK" not in answer


def test_a_complete_request_is_answered_and_the_idle_connection_closed_after(server):
    with _connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: " + server.encode() + b"\r\n\r\n")
        answer = _read_until_closed(sock)  # keep-alive: the server closes it once idle
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert b'"status"' in answer
