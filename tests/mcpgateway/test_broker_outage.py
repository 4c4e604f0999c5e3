"""F4 with a real broker outage: Redis (broker and cache) stopped and restarted while a real Celery worker and a
live gateway run. Searches and calls go on with no 500s; the tasks queued during the outage (a sync asked for
over the REST API, the approval webhook for a new approval request, a curated tool's reindex, the learned-request
reindex) are
kept in the outbox (catalog/outbox.py) and reach the worker once Redis is back, without restarting anything;
tasks queued after that go straight through again.

Everything runs over real parts: a redis-server of this test's own on a free port (never the machine's), the
gateway (uvicorn) and ``celery worker`` as subprocesses sharing one SQLite file, clients over HTTP.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from catalog.tasks import BROKER_DOWN_NOTE
from tests.celery_worker import WORKER_TESTS, WORKER_TESTS_REASON, celery_worker

from .conftest import FAULTY_SERVER, REDIS_SERVER, ThrowawayRedis, faulty_calls, free_port
from .test_database_lock import Gateway, _result

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),  # three processes start and the outage is waited out on a shared machine
    pytest.mark.celery_worker,
    pytest.mark.skipif(REDIS_SERVER is None, reason="needs a redis-server binary to stop and restart"),
    pytest.mark.skipif(not WORKER_TESTS, reason=WORKER_TESTS_REASON),
]
RECOVERY_DEADLINE = 120.0  # the test gives up waiting for the kept tasks to run after this long (a failure)

SETUP = f"""
import django, json, sys
django.setup()
from tests.mcpgateway.conftest import build_index, grant, make_token, make_user, sync_server
admin = make_user("gw_admin", is_staff=True, is_superuser=True, email="admin@example.com")
member = make_user("gw_member")
approver = make_user("gw_approver", is_staff=True, email="approver@example.com")
server = sync_server(slug="faulty", transport="stdio", command=sys.executable, args=[{str(FAULTY_SERVER)!r}],
                     env_vars=["FAULTY_CALL_LOG"])
grant(admin, server, member, "discover", "execute")
grant(admin, server, approver, "discover", "approve")
build_index()
print(json.dumps({{"token": make_token(member, ["discover", "execute", "api"]),
                  "admin": make_token(admin, ["discover", "execute", "api"])}}))
"""


class Webhook:
    """The approvers' webhook: a loopback HTTP server that keeps the approval ids it is told about."""

    def __init__(self) -> None:
        self.approval_ids: list[str] = []
        received = self.approval_ids

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append(json.loads(body)["approval_id"])
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/scout-approvals"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Site:
    """The gateway, the worker and their Redis; the database is read directly to see what happened."""

    def __init__(self, gateway: Gateway, redis_server: ThrowawayRedis, webhook: Webhook) -> None:
        self.gateway, self.redis, self.webhook = gateway, redis_server, webhook

    def rows(self, sql: str, *params: Any) -> list[tuple]:
        with sqlite3.connect(self.gateway.database) as db:
            return db.execute(sql, params).fetchall()

    def kept(self) -> list[str]:
        return [row[0] for row in self.rows("SELECT name FROM catalog_queuedtask ORDER BY id")]

    def sync_status(self, trigger: str) -> str | None:
        rows = self.rows("SELECT status FROM catalog_syncrun WHERE source = ?", trigger)
        return rows[0][0] if rows else None

    def ask_sync(self) -> str:
        response = self.gateway.rest("POST", "/api/v1/servers/faulty/sync/", token=self.gateway.people["admin"])
        assert response.status_code == 202, response.text[:500]
        return response.json()["trigger"]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    redis_server = ThrowawayRedis()
    redis_server.start()
    webhook = Webhook()
    env = {
        "REDIS_URL": f"redis://127.0.0.1:{redis_server.port}/0",
        "SCOUT_REDIS_TIMEOUT": "0.5",
        "SCOUT_CACHE_RETRY_SECONDS": "1",
        "SCOUT_BROKER_RETRY_SECONDS": "1",
        "SCOUT_LEARNED_INDEX_INTERVAL": "1",
        "SCOUT_APPROVAL_WEBHOOK_URL": webhook.url,
    }
    gateway = Gateway(tmp_path, setup=SETUP, **env)
    try:
        gateway.start()
        with celery_worker(gateway.env, name="f4-broker-outage") as worker:
            yield Site(gateway, redis_server, webhook)
            assert worker.poll() is None, "the worker exited during the outage"
    finally:
        gateway.stop()
        redis_server.stop()
        webhook.close()


def _serves(site: Site) -> None:
    """What clients do goes on: a search and a call over MCP, a search over REST; no 500, no error result."""
    gateway = site.gateway
    found = _result(gateway.call("tool_search", {"query": "answer with the given text"}))
    assert not found["isError"], found
    assert "faulty::ping" in [match["tool_id"] for match in found["structuredContent"]["matches"]]
    answered = _result(gateway.execute("ping", text="still here"))
    assert not answered["isError"] and answered["content"][0]["text"] == "still here", answered
    rest = gateway.rest_search("answer with the given text")
    assert rest.status_code == 200, rest.text[:500]


def _learn(site: Site, query: str) -> None:
    """A search, then a successful call of the tool it found: the query becomes a learned request for the tool,
    whose reindex is queued (batched, SCOUT_LEARNED_INDEX_INTERVAL)."""
    found = _result(site.gateway.call("tool_search", {"query": query}))
    assert "faulty::ping" in [match["tool_id"] for match in found["structuredContent"]["matches"]], found
    assert not _result(site.gateway.execute("ping", text=query))["isError"]


def _unindexed_learned(site: Site) -> int:
    return site.rows("SELECT count(*) FROM search_learnedrequest WHERE indexed = 0")[0][0]


def _ready_generations(site: Site, after: int = 0) -> int:
    """Ready generations newer than generation ``after`` (old ones are pruned: a count of all stops growing)."""
    return site.rows("SELECT count(*) FROM search_indexgeneration WHERE status = 'ready' AND id > ?", after)[0][0]


def _latest_generation(site: Site) -> int:
    return site.rows("SELECT coalesce(max(id), 0) FROM search_indexgeneration")[0][0]


def _wait_for(what: str, check) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > RECOVERY_DEADLINE:
            pytest.fail(f"{what}: not done {RECOVERY_DEADLINE:.0f} s after Redis came back")
        time.sleep(0.2)
    return time.monotonic() - started


def test_tasks_queued_while_the_broker_is_down_are_kept_and_run_once_it_is_back(site: Site):
    gateway = site.gateway
    # Before the outage the worker takes tasks from Redis.
    before = site.ask_sync()
    _wait_for("a sync asked for before the outage", lambda: site.sync_status(before) == "success")
    _serves(site)  # its search and call teach a learned request, reindexed by the worker in a batch
    _wait_for("the learned-request reindex before the outage", lambda: _unindexed_learned(site) == 0)

    site.redis.stop()
    _serves(site)

    # Tasks asked for during the outage: each request succeeds and its task is kept.
    during = site.ask_sync()
    held = _result(gateway.execute("record_note", note="during the outage"))
    assert held["isError"] and held["structuredContent"]["approval_required"] is True, held
    approval_id = held["structuredContent"]["approval_id"]
    _learn(site, "answer with the text given to you")
    assert _unindexed_learned(site) >= 1  # the tool's learned requests wait for their reindex
    latest = _latest_generation(site)
    curated = gateway.rest(
        "PATCH",
        "/api/v1/tools/faulty::ping/curation/",
        token=gateway.people["admin"],
        json={"examples": ["bounce my words straight back"]},
    )
    assert curated.status_code == 200, curated.text[:500]  # the tool's reindex is queued after the commit
    deadline = time.monotonic() + RECOVERY_DEADLINE  # the learned reindex is queued once its transaction commits
    while "search.tasks.flush_learned_index" not in site.kept() and time.monotonic() < deadline:
        time.sleep(0.1)
    kept = site.kept()
    assert "catalog.tasks.sync_server" in kept, kept
    assert "governance.tasks.notify_approval_requested" in kept, kept
    assert "search.tasks.flush_learned_index" in kept, kept
    assert "search.tasks.reindex_tools" in kept, kept
    # mend3: the sync's run exists at once, queued, saying why no worker has it yet.
    assert site.rows("SELECT status, error FROM catalog_syncrun WHERE source = ?", during) == [
        ("queued", BROKER_DOWN_NOTE)
    ]
    assert site.webhook.approval_ids == []
    assert faulty_calls(gateway.call_log, "record_note") == 0  # held for approval, not run

    site.redis.start()  # empty: what was in Redis before is gone; the kept tasks are not
    back = time.monotonic()
    sent = _wait_for("the kept tasks", lambda: not site.kept())
    _wait_for("the sync asked for during the outage", lambda: site.sync_status(during) == "success")
    assert site.rows("SELECT status, error FROM catalog_syncrun WHERE source = ?", during) == [("success", "")]
    _wait_for("the approval webhook", lambda: approval_id in site.webhook.approval_ids)
    _wait_for("the learned-request reindex", lambda: _unindexed_learned(site) == 0)
    # Two index generations published from the kept tasks: the curated tool's reindex and the learned batch.
    _wait_for("the curated tool's reindex", lambda: _ready_generations(site, after=latest) >= 2)
    # Figures for the report, not checks: how long after Redis came back the tasks were sent and had all run.
    print(f"\nkept tasks sent {sent:.1f} s and all run {time.monotonic() - back:.1f} s after Redis came back")

    # Nothing wedged: traffic goes on, and a task asked for now goes straight through.
    _serves(site)
    after = site.ask_sync()
    _wait_for("a sync asked for after the outage", lambda: site.sync_status(after) == "success")
    assert site.kept() == []
    assert "kept to send when the broker is back" in gateway.stderr.read_text()
