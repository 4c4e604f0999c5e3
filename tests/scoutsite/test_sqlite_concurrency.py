"""SQLite as the embedded default under concurrent writers (issue 9, SECURITY-TESTS F7).

Real processes against one file database, as a small deployment runs: uvicorn with two workers (the admin
and MCP clients over HTTP), and a catalog sync in its own process, all writing at once. Every write must
land and none may fail with "database is locked" (the curator's admin save used to be lost that way).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from tests.mcpgateway.conftest import FAULTY_SERVER, MODERN, REPO, free_port, modern_request, rpc_result

pytestmark = pytest.mark.slow

ADMIN_SAVES = 12
GATEWAY_THREADS = 4
CALLS_PER_THREAD = 12
SYNC_RUNS = 6

SETUP = f"""
import json
from django.contrib.auth import get_user_model
from catalog.models import Server, Tool
from catalog.services.sync import server_sync
from governance.services.permissions import permission_grant
from governance.services.tokens import api_token_create
from datetime import timedelta
from django.utils import timezone

curator = get_user_model().objects.create_superuser("curator", "curator@example.com", "pw-curator-123456")
server = Server.objects.create(name="faulty", slug="faulty", transport="stdio", command={sys.executable!r},
                               args=[{str(FAULTY_SERVER)!r}])
assert server_sync(server_pk=server.pk, trigger="test").status == "success"
for action in ("discover", "execute"):
    permission_grant(actor=curator, target=server, action=action, holder=curator)
_, token = api_token_create(user=curator, name="t", scopes=["discover", "execute"],
                            expires_at=timezone.now() + timedelta(hours=1))
print("SETUP" + json.dumps({{"token": token, "tool_pk": Tool.objects.get(tool_id="faulty::ping").pk}}))
"""

SYNCS = f"""
from catalog.models import Server
from catalog.services.sync import server_sync
pk = Server.objects.get(slug="faulty").pk
for _ in range({SYNC_RUNS}):
    run = server_sync(server_pk=pk, trigger="test")
    print("SYNC", run.status, repr(run.error), flush=True)
"""


class _FormFields(HTMLParser):
    """The submittable fields of the admin change form (inputs, selects, textareas), as a browser sends them."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, Any] = {}
        self._textarea: str | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.fields[name] = a.get("value") or ("on" if a.get("type") == "checkbox" else "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.fields[name] = ""
        elif tag == "select" and name:
            self._select = name
            self.fields.setdefault(name, [] if "multiple" in a else "")
        elif tag == "option" and self._select and "selected" in a:
            value = a.get("value") or ""
            current = self.fields[self._select]
            if isinstance(current, list):
                current.append(value)
            else:
                self.fields[self._select] = value

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea":
            self._textarea = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.fields[self._textarea] += data


def _env(db_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DEBUG")}
    env.update(SQLITE_PATH=str(db_path), SECRET_KEY="contention-test-only", LOG_LEVEL="WARNING")
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _admin_saves(base: str, tool_pk: int, errors: list[str]) -> list[str]:
    """Log in as the curator and save the tool's purpose ADMIN_SAVES times; the purposes sent, in order."""
    sent: list[str] = []
    with httpx.Client(base_url=base, timeout=120, follow_redirects=False) as client:
        client.get("/admin/login/")
        login = client.post(
            "/admin/login/",
            data={
                "username": "curator",
                "password": "pw-curator-123456",
                "csrfmiddlewaretoken": client.cookies["csrftoken"],
                "next": "/admin/",
            },
        )
        assert login.status_code == 302, login.text[:500]
        url = f"/admin/catalog/tool/{tool_pk}/change/"
        for i in range(ADMIN_SAVES):
            page = client.get(url)
            if page.status_code != 200:
                errors.append(f"admin GET {page.status_code}: {page.text[:300]}")
                continue
            form = _FormFields()
            form.feed(page.text)
            purpose = f"Answer with the given text (curator edit {i})."
            form.fields["purpose"] = purpose
            response = client.post(url, data=form.fields)
            if response.status_code != 302:
                errors.append(f"admin POST {response.status_code}: {response.text[:300]}")
            else:
                sent.append(purpose)
    return sent


def _gateway_calls(base: str, token: str, worker: int, errors: list[str], answered: list[int]) -> None:
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "execute_tool",
    }
    with httpx.Client(base_url=base, timeout=120) as client:
        for i in range(CALLS_PER_THREAD):
            arguments = {"tool_id": "faulty::ping", "arguments": {"text": f"w{worker}-{i}"}}
            body = modern_request("tools/call", {"name": "execute_tool", "arguments": arguments}, request_id=i + 1)
            response = client.post("/mcp", content=json.dumps(body), headers=headers)
            if response.status_code != 200:
                errors.append(f"mcp {response.status_code}: {response.text[:300]}")
                continue
            message = rpc_result(response)
            result = message.get("result") or {}
            texts = [block.get("text", "") for block in result.get("content", [])]
            if result.get("isError") or texts != [f"w{worker}-{i}"]:
                errors.append(f"mcp call failed: {json.dumps(message)[:300]}")
            else:
                answered.append(1)


@pytest.mark.skipif(
    settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3",
    reason="SQLite-specific: checks the SQLite OPTIONS (WAL, busy timeout, immediate transactions)",
)
def test_admin_gateway_and_sync_write_at_once_without_lock_errors(tmp_path: Path):
    db_path = tmp_path / "scout.sqlite3"
    env = _env(db_path)
    _manage(env, "migrate", "--noinput")
    setup = json.loads(_manage(env, "shell", "-c", SETUP).split("SETUP", 1)[1])

    port = free_port()
    server_log = tmp_path / "uvicorn.log"
    with server_log.open("w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "scoutsite.asgi:application", "--host", "127.0.0.1"]
            + ["--port", str(port), "--workers", "2", "--log-level", "warning"],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/admin/login/", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, server_log.read_text()[-3000:]
            time.sleep(0.3)

        errors: list[str] = []
        answered: list[int] = []
        sent: list[str] = []
        sync = subprocess.Popen(
            [sys.executable, "manage.py", "shell", "-c", SYNCS],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threads = [
            threading.Thread(target=_gateway_calls, args=(base, setup["token"], n, errors, answered))
            for n in range(GATEWAY_THREADS)
        ]
        threads.append(threading.Thread(target=lambda: sent.extend(_admin_saves(base, setup["tool_pk"], errors))))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
        sync_out, _ = sync.communicate(timeout=600)
    finally:
        server.terminate()
        server.wait(30)

    log_text = server_log.read_text()
    assert "database is locked" not in log_text + sync_out
    assert errors == []
    assert sync.returncode == 0, sync_out[-3000:]
    assert re.findall(r"^SYNC (\w+)", sync_out, re.M) == ["success"] * SYNC_RUNS, sync_out[-3000:]

    # Every write landed: the curator's last edit, one audit row per call, one run per sync.
    assert len(answered) == GATEWAY_THREADS * CALLS_PER_THREAD and len(sent) == ADMIN_SAVES
    with sqlite3.connect(db_path) as db:
        (purpose,) = db.execute("SELECT purpose FROM catalog_tool WHERE id = ?", (setup["tool_pk"],)).fetchone()
        (executions,) = db.execute(
            "SELECT count(*) FROM governance_auditevent WHERE event_type = 'execution' AND outcome = 'success'"
        ).fetchone()
        (runs,) = db.execute("SELECT count(*) FROM catalog_syncrun WHERE status = 'success'").fetchone()
        (journal,) = db.execute("PRAGMA journal_mode").fetchone()
    assert purpose == sent[-1]
    assert executions == GATEWAY_THREADS * CALLS_PER_THREAD
    assert runs == SYNC_RUNS + 1  # the setup's sync too
    assert journal == "wal"
