"""F7: a locked database. Another connection holds SQLite's write lock past the busy timeout, or (on Postgres)
``LOCK TABLE`` on the permission tables or the audit table past the serving connections' lock/statement
timeout: clients get a clear "busy" result (no stack trace, no tool called; 503 service_busy on the REST API),
a call that already ran upstream keeps its audit row once the lock is gone, and everything works again
afterwards.

The test suite's database is in memory and shared by one connection, which no second connection can lock,
so these tests run a gateway of their own (uvicorn in a subprocess): on a SQLite file with a short busy
timeout (SCOUT_SQLITE_BUSY_TIMEOUT), and, when the suite runs on Postgres, on a Postgres database of its own
with the default SCOUT_DB_LOCK_TIMEOUT / SCOUT_DB_STATEMENT_TIMEOUT, locked from here.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.db import OperationalError, connection, transaction

from mcpgateway.db import THREADS as ORM_THREADS

from .conftest import (
    FAULTY_SERVER,
    MODERN,
    POSTGRES,
    drop_postgres_database,
    faulty_calls,
    free_port,
    migrated_postgres,
    migrated_sqlite,
    modern_request,
    postgres_url,
    rpc_result,
)
from .test_disconnect import _wait_for

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
CALL_TIMEOUT = 2.0
BUSY_RETRY = "database busy; recording the outcome again"  # the gateway's log line for an outcome write that waits

SETUP = f"""
import django, json, sys
django.setup()
from tests.mcpgateway.conftest import grant, make_token, make_user, sync_server
admin = make_user("gw_admin", is_staff=True, is_superuser=True)
member = make_user("gw_member")
server = sync_server(slug="faulty", transport="stdio", command=sys.executable, args=[{str(FAULTY_SERVER)!r}],
                     env_vars=["FAULTY_CALL_LOG"])
grant(admin, server, member, "discover", "execute")
print(json.dumps({{"token": make_token(member, ["discover", "execute", "api"])}}))
"""


class Gateway:
    """A gateway of its own: ``setup`` (a script run first, without Redis, on a migrated database: it creates the
    people, printing a JSON object last, e.g. the member's token) then uvicorn in a subprocess. The SQLite file is a
    copy of the session's migrated one (``migrated_sqlite``); a Postgres database is made migrated by its caller
    (``migrated_postgres``)."""

    def __init__(self, tmp_path: Path, database: dict[str, str] | None = None, setup: str = SETUP, **env: str) -> None:
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
            SCOUT_MCP_CALL_TIMEOUT=str(CALL_TIMEOUT),
            SCOUT_MCP_EXPOSURE="meta",
            SCOUT_PUBLIC_URL=self.url,
            FAULTY_CALL_LOG=str(self.call_log),
            PYTHONPATH=str(ROOT),
        )
        self.env.update(database or {"SQLITE_PATH": str(self.database), "SCOUT_SQLITE_BUSY_TIMEOUT": "0.3"})
        self.env.update(env)
        self.setup = setup
        self.process: subprocess.Popen[bytes] | None = None
        self.token = ""
        self.people: dict[str, Any] = {}

    def start(self) -> None:
        setup_env = {key: value for key, value in self.env.items() if key != "REDIS_URL"}  # tasks run in-process
        if "DATABASE_URL" not in self.env:
            migrated_sqlite(self.database, setup_env)
        setup = subprocess.run(
            [sys.executable, "-c", self.setup], cwd=ROOT, env=setup_env, capture_output=True, text=True, timeout=300
        )
        assert setup.returncode == 0, setup.stderr[-2000:]
        self.people = json.loads(setup.stdout.strip().splitlines()[-1])
        self.token = self.people["token"]
        with self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "scoutsite.asgi:application", "--host", "127.0.0.1"]
                + ["--port", str(self.port), "--no-access-log"],
                cwd=ROOT,
                env=self.env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = time.monotonic() + 120  # Django, the model and the index load slowly on a loaded machine
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                httpx.get(f"{self.url}/healthz", timeout=5)
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError(self.stderr.read_text()[-2000:])

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(20)

    def call(self, meta_tool: str, arguments: dict[str, Any]) -> httpx.Response:
        return self.rpc("tools/call", {"name": meta_tool, "arguments": arguments})

    def rpc(self, method: str, params: dict[str, Any]) -> httpx.Response:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
            **({"Mcp-Name": params["name"]} if "name" in params else {}),
            "Authorization": f"Bearer {self.token}",
        }
        body = modern_request(method, params)
        return httpx.post(f"{self.url}/mcp", content=json.dumps(body), headers=headers, timeout=60)

    def execute(self, tool: str, **arguments: Any) -> httpx.Response:
        return self.call("execute_tool", {"tool_id": f"faulty::{tool}", "arguments": arguments})

    def rest_search(self, query: str) -> httpx.Response:
        return self.rest("POST", "/api/v1/search/", json={"query": query})

    def rest(self, method: str, path: str, token: str | None = None, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token or self.token}"}
        return httpx.request(method, f"{self.url}{path}", headers=headers, timeout=60, **kwargs)


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
    discovered = "SELECT count(*) FROM governance_auditevent WHERE event_type = 'discovery' AND outcome = 'success'"
    _wait_for(
        lambda: sqlite3.connect(gateway.database).execute(discovered).fetchone()[0],
        "the inspect's discovery audit row landed after the lock was released",
        limit=60,
    )

    # Recovery: the same call works as soon as the lock is gone.
    assert _result(gateway.execute("ping", text="back"))["content"][0]["text"] == "back"

    # A call that ran upstream while the lock was taken: its outcome waits for the database, then is recorded.
    answers: list[httpx.Response] = []
    caller = threading.Thread(target=lambda: answers.append(gateway.execute("hang")))
    caller.start()
    _wait_for(lambda: faulty_calls(gateway.call_log, "hang"), "the hang reached the upstream", limit=60)
    assert faulty_calls(gateway.call_log, "hang") == 1
    logged = len(gateway.stderr.read_text())
    with Lock(gateway.database):
        _wait_for(  # the call times out and tries to record its outcome while locked (a loaded machine: later)
            lambda: BUSY_RETRY in gateway.stderr.read_text()[logged:], "the outcome's write met the lock", limit=60
        )
        assert answers == []  # the answer waits for its audit row
    caller.join(60)
    hang = _result(answers[0])
    assert hang["isError"] and hang["structuredContent"]["upstream_failure"] == "timeout"
    assert BUSY_RETRY in gateway.stderr.read_text()
    rows = sqlite3.connect(gateway.database).execute(
        "SELECT outcome FROM governance_auditevent WHERE event_type = 'execution' AND tool_ref = 'faulty::hang'"
    )
    assert [row[0] for row in rows] == ["unknown"]


# --- Postgres: LOCK TABLE past the serving connections' lock_timeout / statement_timeout ---------------------

on_postgres = pytest.mark.skipif(
    not POSTGRES,
    reason="LOCK TABLE and the lock/statement timeouts are Postgres's: runs when DATABASE_URL is Postgres (CI); "
    "on SQLite the locked-file test above covers F7",
)
# Every table a grant is read from: guardian's object permissions on tools and servers, for users and groups.
GRANT_TABLES = (
    # With the tool's row: a tool a token found before is served from the visibility cache (execspeed), which
    # re-reads only its row; locking the grants alone would let such a call through unchecked by this test.
    "catalog_tool",
    "governance_tooluserobjectpermission",
    "governance_toolgroupobjectpermission",
    "governance_serveruserobjectpermission",
    "governance_servergroupobjectpermission",
)


class TableLock:
    """Another connection holding ACCESS EXCLUSIVE locks on tables (a migration, a maintenance script)."""

    def __init__(self, url: str, *tables: str) -> None:
        import psycopg

        self.connection = psycopg.connect(url)  # a transaction: the locks last until the rollback
        self.tables = tables

    def __enter__(self) -> TableLock:
        self.connection.execute(f"LOCK TABLE {', '.join(self.tables)} IN ACCESS EXCLUSIVE MODE")
        return self

    def __exit__(self, *exc: object) -> None:
        self.connection.rollback()
        self.connection.close()


class _ConnectionPeak:
    """The most connections to ``url``'s database, other than ``ignored`` and its own, seen while it runs."""

    def __init__(self, url: str, ignored: int) -> None:
        import psycopg

        self.most = 0
        self._done = threading.Event()
        self._connection = psycopg.connect(url, autocommit=True)
        self._ignored = ignored
        self._thread = threading.Thread(target=self._watch)
        self._thread.start()

    def _watch(self) -> None:
        query = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid NOT IN (pg_backend_pid(), %s)"
        )
        while not self._done.wait(0.02):
            self.most = max(self.most, self._connection.execute(query, (self._ignored,)).fetchone()[0])

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
        self._connection.close()


@contextmanager
def _own_postgres_gateway(tmp_path: Path, **env: str) -> Iterator[tuple[Gateway, str]]:
    """A gateway of its own on a migrated Postgres database of its own (``env``: more of its settings), and that
    database's URL."""
    name = f"scout_f7_{uuid.uuid4().hex[:12]}"
    migrated_postgres(name)
    url = postgres_url(name)
    gateway = Gateway(tmp_path, {"DATABASE_URL": url}, **env)
    try:
        gateway.start()
        yield gateway, url
    finally:
        gateway.stop()
        drop_postgres_database(name)


@pytest.fixture
def postgres_gateway(tmp_path: Path) -> Iterator[tuple[Gateway, str]]:
    with _own_postgres_gateway(tmp_path) as running:
        yield running


def _audit_outcomes(url: str, tool_ref: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT outcome FROM governance_auditevent WHERE event_type = 'execution' AND tool_ref = %s ORDER BY id",
            (tool_ref,),
        )
        return [row[0] for row in rows]


@on_postgres
def test_locked_permission_tables_on_postgres_answer_busy_never_allow_lose_no_audit_and_recover(postgres_gateway):
    gateway, url = postgres_gateway
    assert not _result(gateway.execute("ping", text="warm"))["isError"]  # no search yet: nothing cached

    with TableLock(url, *GRANT_TABLES):
        executed = gateway.execute("ping", text="locked")
        searched = gateway.call("tool_search", {"query": "ping"})
        rest = gateway.rest_search("ping")
        listed = gateway.rpc("tools/list", {})
    for response in (executed, searched, rest, listed):
        assert "Traceback" not in response.text and "psycopg" not in response.text
        assert "lock" not in response.text.lower() and "canceling statement" not in response.text
    # The grant could not be read: the call is refused as busy, never allowed, and never reaches the tool.
    result = _result(executed)
    assert result["isError"] and result["structuredContent"]["service_busy"] is True, result
    assert "database is busy" in result["content"][0]["text"]
    assert faulty_calls(gateway.call_log, "ping") == 1
    found = _result(searched)
    assert found["isError"] and found["structuredContent"]["service_busy"] is True, found
    assert rest.status_code == 503, rest.text
    assert rest.json()["error"]["code"] == "service_busy" and rest.headers["Retry-After"]
    # tools/list has no tool result to carry it: a JSON-RPC error saying so, with service_busy as its data (it was
    # "Internal server error", opsux4).
    listed_error = rpc_result(listed)["error"]
    assert listed_error["data"] == {"service_busy": True}, listed_error
    assert "database is busy" in listed_error["message"]
    assert _audit_outcomes(url, "faulty::ping") == ["success"]  # the refused call ran nowhere, as recorded

    # The pool cap holds: 24 calls at once against the locked tables each answer busy, and the gateway never holds
    # more connections than its ORM threads, whatever the number of calls waiting.
    with TableLock(url, *GRANT_TABLES) as lock, ThreadPoolExecutor(24) as pool:
        peak = _ConnectionPeak(url, lock.connection.info.backend_pid)
        answers = list(pool.map(lambda _: gateway.execute("ping", text="storm"), range(24)))
        peak.stop()
    assert [_result(response)["structuredContent"].get("service_busy") for response in answers] == [True] * 24
    assert faulty_calls(gateway.call_log, "ping") == 1
    assert 0 < peak.most <= ORM_THREADS, peak.most

    # Recovery: the lock is gone, the same requests work.
    assert _result(gateway.execute("ping", text="back"))["content"][0]["text"] == "back"
    searched = _result(gateway.call("tool_search", {"query": "ping"}))
    assert not searched["isError"] and searched["structuredContent"]["matches"][0]["tool_id"] == "faulty::ping"
    assert gateway.rest_search("ping").json()["matches"][0]["tool_id"] == "faulty::ping"
    # Locked again: a search is answered from this process's visible set, cached and current (the lock changed
    # no grant; a grant change bumps the visibility version, which is not locked); execute still reads the grant.
    with TableLock(url, *GRANT_TABLES):
        cached = _result(gateway.call("tool_search", {"query": "ping"}))
        executed = _result(gateway.execute("ping", text="locked again"))
    assert cached["structuredContent"]["matches"] == searched["structuredContent"]["matches"]
    assert executed["structuredContent"]["service_busy"] is True
    assert faulty_calls(gateway.call_log, "ping") == 2

    # The audit table locked while a call is out upstream: the outcome waits for the lock, then is recorded.
    answers: list[httpx.Response] = []
    caller = threading.Thread(target=lambda: answers.append(gateway.execute("hang")))
    caller.start()
    _wait_for(lambda: faulty_calls(gateway.call_log, "hang"), "the hang reached the upstream", limit=60)
    assert faulty_calls(gateway.call_log, "hang") == 1
    logged = len(gateway.stderr.read_text())
    with TableLock(url, "governance_auditevent"):
        _wait_for(  # the call times out and tries to record its outcome while locked (a loaded machine: later)
            lambda: BUSY_RETRY in gateway.stderr.read_text()[logged:], "the outcome's write met the lock", limit=60
        )
        assert answers == []  # the answer waits for its audit row
    caller.join(60)
    hang = _result(answers[0])
    assert hang["isError"] and hang["structuredContent"]["upstream_failure"] == "timeout"
    assert BUSY_RETRY in gateway.stderr.read_text()
    assert _audit_outcomes(url, "faulty::hang") == ["unknown"]


@on_postgres
def test_rest_requests_past_the_process_bound_are_refused_at_once_while_the_database_is_locked(tmp_path: Path):
    """F7 on the REST API: each request waits on a database connection of its own, so with the grant tables locked
    16 searches at once held 16 connections. Past SCOUT_API_MAX_CONCURRENT (2 here) a request is answered busy at
    once, with Retry-After, and opens none; every answer is busy, none a result, and it recovers."""
    from scoutsite.middleware import API_FULL_MESSAGE

    with _own_postgres_gateway(tmp_path, SCOUT_API_MAX_CONCURRENT="2") as (gateway, url):
        with TableLock(url, *GRANT_TABLES) as lock, ThreadPoolExecutor(16) as pool:
            peak = _ConnectionPeak(url, lock.connection.info.backend_pid)
            answers = list(pool.map(lambda _: gateway.rest_search("ping"), range(16)))
            peak.stop()
        assert [(r.status_code, r.json()["error"]["code"], bool(r.headers["Retry-After"])) for r in answers] == [
            (503, "service_busy", True)
        ] * 16
        assert 0 < peak.most <= 2 + ORM_THREADS, peak.most
        refused = [r for r in answers if r.json()["error"]["message"] == API_FULL_MESSAGE]
        assert refused, [r.json() for r in answers]  # the others waited on the lock, two at a time
        assert gateway.rest_search("ping").json()["matches"][0]["tool_id"] == "faulty::ping"


@on_postgres
def test_a_call_that_waited_is_not_sent_when_its_access_cannot_be_checked_again(tmp_path: Path):
    """A call that waited for its server's only slot is checked again before it is sent (``tool_still_executable_by``,
    Z6); when the database cannot answer that check (the grant tables locked past the lock timeout), the call is
    refused as busy and never sent: fail closed, audited as not run, its idempotency key freed."""
    import psycopg

    from .test_disconnect import _drop, _open_call

    # One slot per server; the hang holds it until its connection drops (not until a call timeout).
    with _own_postgres_gateway(tmp_path, SCOUT_MCP_MAX_CALLS_PER_SERVER="1", SCOUT_MCP_CALL_TIMEOUT="60") as (
        gateway,
        url,
    ):

        def claimed_keys() -> list[str]:
            with psycopg.connect(url) as conn:
                return [row[0] for row in conn.execute("SELECT key FROM mcpgateway_idempotencyrecord")]

        assert not _result(gateway.execute("ping", text="warm"))["isError"]
        hang = _open_call(gateway, gateway.token, {"tool_id": "faulty::hang", "arguments": {}})
        _wait_for(lambda: faulty_calls(gateway.call_log, "hang") == 1, "the hang holds the server's only slot")
        answers: list[httpx.Response] = []
        ping = {"tool_id": "faulty::ping", "arguments": {"text": "late"}, "idempotency_key": "late"}
        caller = threading.Thread(target=lambda: answers.append(gateway.call("execute_tool", ping)))
        caller.start()
        _wait_for(lambda: claimed_keys() == ["late"], "the ping was authorized and waits for the slot")

        with TableLock(url, *GRANT_TABLES):
            _drop(hang)  # the slot is free: the ping's recheck now meets the locked grants
            caller.join(60)
        result = _result(answers[0])
        assert result["isError"] and result["structuredContent"] == {"service_busy": True}, result
        assert "no tool was called" in result["content"][0]["text"]
        assert faulty_calls(gateway.call_log, "ping") == 1  # the warm-up only: the waited call was never sent
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                "SELECT outcome, payload->>'failure' FROM governance_auditevent "
                "WHERE event_type = 'execution' AND tool_ref = 'faulty::ping' ORDER BY id"
            )
            assert list(rows) == [("success", None), ("error", "database_busy")]
        assert claimed_keys() == []  # nothing ran: the key is free for the retry
        # Recovery: the lock is gone, the retry with the same key runs.
        assert _result(gateway.call("execute_tool", ping))["content"][0]["text"] == "late"


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_lock_timeout_and_statement_timeout_both_mean_busy():
    """The two Postgres error codes a serving connection meets (55P03 lock_not_available, 57014 query_canceled)
    map to the one busy answer; any other database error does not."""
    import psycopg

    from catalog.dbbusy import database_busy

    errors: list[OperationalError] = []
    with TableLock(postgres_url(connection.settings_dict["NAME"]), "governance_auditevent"):
        for setting, statement in (
            ("SET LOCAL lock_timeout = 100", "SELECT count(*) FROM governance_auditevent"),
            ("SET LOCAL statement_timeout = 100", "SELECT pg_sleep(5)"),
        ):
            with pytest.raises(OperationalError) as caught, transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(setting)
                cursor.execute(statement)
            errors.append(caught.value)
    assert [error.__cause__.sqlstate for error in errors] == ["55P03", "57014"]
    assert all(database_busy(error) for error in errors)
    with pytest.raises(Exception) as other, connection.cursor() as cursor:
        cursor.execute("SELECT * FROM no_such_table_here")
    assert isinstance(other.value.__cause__, psycopg.Error) and not database_busy(other.value)


@on_postgres
def test_a_directly_listed_tool_called_while_the_grants_are_locked_answers_busy_as_execute_tool_does(tmp_path: Path):
    """With the tools listed directly (no search index, or SCOUT_MCP_EXPOSURE=direct), ``tools/call`` of a listed
    tool looks the name up in the caller's visible tools first. With the grant tables locked that lookup failed and
    the client got the SDK's bare error (no ``service_busy``, nothing saying to retry, agentux17), where
    ``execute_tool`` of the same tool answers busy. Now the same busy result as execute_tool's; the tool is not
    called; it answers again once the lock is gone."""
    with _own_postgres_gateway(tmp_path, SCOUT_MCP_EXPOSURE="direct") as (gateway, url):
        listed = [tool["name"] for tool in _result(gateway.rpc("tools/list", {}))["tools"]]
        assert "faulty__ping" in listed, listed
        ping = {"name": "faulty__ping", "arguments": {"text": "locked"}}
        with TableLock(url, *GRANT_TABLES):
            direct = gateway.rpc("tools/call", ping)
            executed = gateway.execute("ping", text="locked")
        assert direct.status_code == 200, direct.text
        assert "Traceback" not in direct.text and "psycopg" not in direct.text
        answer, through_execute = _result(direct), _result(executed)
        assert answer["isError"] and answer["structuredContent"] == {"service_busy": True}, answer
        assert answer == through_execute
        assert faulty_calls(gateway.call_log, "ping") == 0
        back = _result(gateway.rpc("tools/call", {**ping, "arguments": {"text": "back"}}))
        assert back["content"][0]["text"] == "back", back
