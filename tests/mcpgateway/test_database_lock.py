"""F7: a locked database. Another connection holds SQLite's write lock past the busy timeout: clients get a
clear "busy" result (no stack trace, no tool called), a call that already ran upstream keeps its audit row
once the lock is gone, and everything works again afterwards.

The test suite's database is in memory and shared by one connection, which no second connection can lock,
so this test runs a gateway of its own (uvicorn in a subprocess) on a SQLite file with a short busy timeout
(SCOUT_SQLITE_BUSY_TIMEOUT) and locks that file from here.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import FAULTY_SERVER, MODERN, faulty_calls, free_port, modern_request

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
CALL_TIMEOUT = 2.0

SETUP = f"""
import django, json, sys
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from tests.mcpgateway.conftest import grant, make_token, make_user, sync_server
admin = make_user("gw_admin", is_staff=True, is_superuser=True)
member = make_user("gw_member")
server = sync_server(slug="faulty", transport="stdio", command=sys.executable, args=[{str(FAULTY_SERVER)!r}],
                     env_vars=["FAULTY_CALL_LOG"])
grant(admin, server, member, "discover", "execute")
print(json.dumps({{"token": make_token(member)}}))
"""


class Gateway:
    def __init__(self, tmp_path: Path) -> None:
        self.database = tmp_path / "scout.sqlite3"
        self.call_log = tmp_path / "faulty-calls.log"
        self.stderr = tmp_path / "gateway.stderr"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "DATABASE_URL", "TESTING")
        }
        self.env.update(
            DJANGO_SETTINGS_MODULE="scoutsite.settings",
            SECRET_KEY="f7-test-only-not-a-secret",
            SQLITE_PATH=str(self.database),
            SCOUT_SQLITE_BUSY_TIMEOUT="0.3",
            SCOUT_MCP_CALL_TIMEOUT=str(CALL_TIMEOUT),
            SCOUT_MCP_EXPOSURE="meta",
            SCOUT_PUBLIC_URL=self.url,
            FAULTY_CALL_LOG=str(self.call_log),
            PYTHONPATH=str(ROOT),
        )
        self.process: subprocess.Popen[bytes] | None = None
        self.token = ""

    def start(self) -> None:
        setup = subprocess.run(
            [sys.executable, "-c", SETUP], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300
        )
        assert setup.returncode == 0, setup.stderr[-2000:]
        self.token = json.loads(setup.stdout.strip().splitlines()[-1])["token"]
        with self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "scoutsite.asgi:application", "--host", "127.0.0.1"]
                + ["--port", str(self.port), "--no-access-log"],
                cwd=ROOT,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        for _ in range(300):
            try:
                httpx.get(f"{self.url}/healthz", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(self.stderr.read_text()[-2000:])

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(20)

    def call(self, meta_tool: str, arguments: dict[str, Any]) -> httpx.Response:
        body = modern_request("tools/call", {"name": meta_tool, "arguments": arguments})
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call",
            "Mcp-Name": meta_tool,
            "Authorization": f"Bearer {self.token}",
        }
        return httpx.post(f"{self.url}/mcp", content=json.dumps(body), headers=headers, timeout=60)

    def execute(self, tool: str, **arguments: Any) -> httpx.Response:
        return self.call("execute_tool", {"tool_id": f"faulty::{tool}", "arguments": arguments})


def _result(response: httpx.Response) -> dict[str, Any]:
    from .conftest import rpc_result

    return rpc_result(response)["result"]


@pytest.fixture
def own_gateway(tmp_path: Path) -> Iterator[Gateway]:
    gateway = Gateway(tmp_path)
    try:
        gateway.start()
        yield gateway
    finally:
        gateway.stop()


class Lock:
    """Another connection holding SQLite's write lock (as a long transaction in a shell or a script would)."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None, timeout=10)

    def __enter__(self) -> Lock:
        self.connection.execute("BEGIN EXCLUSIVE")
        return self

    def __exit__(self, *exc: object) -> None:
        self.connection.execute("ROLLBACK")
        self.connection.close()


def test_a_locked_database_gives_a_clear_busy_error_loses_no_audit_and_recovers(own_gateway: Gateway):
    gateway = own_gateway
    warm = _result(gateway.execute("ping", text="warm"))
    assert not warm["isError"]

    with Lock(gateway.database):
        executed = gateway.execute("ping", text="locked")
        inspected = gateway.call("tool_inspect", {"tool_ids": ["faulty::ping"]})
    for response in (executed, inspected):
        assert response.status_code == 200
        assert "Traceback" not in response.text and "OperationalError" not in response.text
    result = _result(executed)
    assert result["isError"] and result["structuredContent"]["service_busy"] is True, result
    assert "database is busy" in result["content"][0]["text"]
    assert faulty_calls(gateway.call_log, "ping") == 1  # the locked call never reached the tool
    # A read (tool_inspect) is answered beside the lock: its discovery audit row is written behind the request
    # (governance/writebehind.py) and lands once the lock is gone.
    inspected_result = _result(inspected)
    assert not inspected_result["isError"]
    assert inspected_result["structuredContent"]["tools"][0]["tool_id"] == "faulty::ping"
    for _ in range(200):
        rows = sqlite3.connect(gateway.database).execute(
            "SELECT count(*) FROM governance_auditevent WHERE event_type = 'discovery' AND outcome = 'success'"
        )
        if rows.fetchone()[0] >= 1:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the inspect's discovery audit row never landed after the lock was released")

    # Recovery: the same call works as soon as the lock is gone.
    assert _result(gateway.execute("ping", text="back"))["content"][0]["text"] == "back"

    # A call that ran upstream while the lock was taken: its outcome waits for the database, then is recorded.
    answers: list[httpx.Response] = []
    caller = threading.Thread(target=lambda: answers.append(gateway.execute("hang")))
    caller.start()
    for _ in range(200):
        if faulty_calls(gateway.call_log, "hang"):
            break
        time.sleep(0.05)
    assert faulty_calls(gateway.call_log, "hang") == 1
    with Lock(gateway.database):
        time.sleep(CALL_TIMEOUT + 3)  # the call times out and tries to record its outcome while locked
        assert answers == []  # the answer waits for its audit row
    caller.join(60)
    hang = _result(answers[0])
    assert hang["isError"] and hang["structuredContent"]["upstream_failure"] == "timeout"
    assert "database busy; recording the outcome again" in gateway.stderr.read_text()
    rows = sqlite3.connect(gateway.database).execute(
        "SELECT outcome FROM governance_auditevent WHERE event_type = 'execution' AND tool_ref = 'faulty::hang'"
    )
    assert [row[0] for row in rows] == ["unknown"]
