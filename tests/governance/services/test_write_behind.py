"""Discovery records written behind the request: queued, inserted in one batch, flushed at a normal exit."""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from governance.choices import AuditEventType, AuditOutcome
from governance.models import AuditEvent
from governance.principals import principal_for_user
from governance.services.audit import audit_record
from governance.writebehind import write_behind, write_behind_flush
from search.models import QueryLogEntry
from search.usage import LoggedResult, query_log_record


@pytest.fixture
def queued(settings):
    settings.SCOUT_WRITE_BEHIND_SECONDS = 60  # the writer thread waits: the test decides when to flush
    settings.SCOUT_QUERY_LOG = "full"
    write_behind_flush()
    yield
    write_behind_flush()


def _search_records(principal, n):
    for i in range(n):
        query_log_record(
            principal=principal,
            query=f"find tool {i}",
            results=[LoggedResult(tool_id="srv::tool", score=0.5)],
            confidence="high",
            degraded=False,
            backend="embedded",
            latency_ms=3.0,
            deferred=True,
        )
        audit_record(
            event_type=AuditEventType.DISCOVERY,
            principal=principal,
            outcome=AuditOutcome.SUCCESS,
            payload={"meta_tool": "tool_search", "n": i},
            deferred=True,
        )


@pytest.mark.django_db(transaction=True)
def test_deferred_records_are_queued_then_written_whole_by_a_flush(queued, member):
    principal = principal_for_user(member)
    _search_records(principal, 3)
    assert write_behind().pending() == 6
    assert not AuditEvent.objects.filter(event_type=AuditEventType.DISCOVERY).exists()  # nothing in the request
    assert write_behind_flush() == 6
    assert write_behind().pending() == 0
    events = AuditEvent.objects.filter(event_type=AuditEventType.DISCOVERY).order_by("id")
    assert [e.payload["n"] for e in events] == [0, 1, 2]  # in queue order
    assert all(e.human_subject == member.get_username() and e.user_id == member.pk for e in events)
    entries = QueryLogEntry.objects.order_by("id")
    assert [e.query for e in entries] == ["find tool 0", "find tool 1", "find tool 2"]
    assert entries[0].results == [{"tool_id": "srv::tool", "score": 0.5}]


@pytest.mark.django_db(transaction=True)
def test_the_writer_thread_writes_queued_records_without_a_flush(settings, member):
    settings.SCOUT_WRITE_BEHIND_SECONDS = 0.01
    _search_records(principal_for_user(member), 2)
    thread = write_behind()._thread
    assert thread is not None and thread.is_alive()
    for _ in range(6000):  # waits for the thread to take the batch (up to a minute on a loaded machine)
        if not write_behind().pending():
            break
        thread.join(0.01)
    # Read only once the thread's insert has committed: the test database is SQLite's shared-cache memory
    # database, where a read beside another thread's open write fails at once ("database table is locked";
    # it happened on a loaded machine) instead of waiting as a file database does.
    with write_behind()._flushing:
        assert write_behind().pending() == 0
    assert AuditEvent.objects.filter(event_type=AuditEventType.DISCOVERY).count() == 2


@pytest.mark.django_db(transaction=True)
def test_not_deferred_is_written_at_once(queued, member):
    audit_record(event_type=AuditEventType.EXECUTION, principal=principal_for_user(member), outcome="success")
    assert AuditEvent.objects.filter(event_type=AuditEventType.EXECUTION).count() == 1
    assert write_behind().pending() == 0


SCRIPT = """
import django, os
django.setup()
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
call_command("migrate", verbosity=0)
settings.SCOUT_WRITE_BEHIND_SECONDS = 600  # never by the thread: only the exit flush can write them
from governance.choices import AuditEventType
from governance.principals import principal_for_user
from governance.services.audit import audit_record
from governance.writebehind import write_behind
user = User.objects.create(username="exiting")
for i in range(5):
    audit_record(event_type=AuditEventType.DISCOVERY, principal=principal_for_user(user), outcome="success",
                 payload={"n": i}, deferred=True)
assert write_behind().pending() == 5
print("queued")
"""


def test_queued_discovery_events_survive_a_normal_exit(tmp_path: Path):
    database = tmp_path / "exit.sqlite3"
    env = {**os.environ, "SQLITE_PATH": str(database), "DJANGO_SETTINGS_MODULE": "scoutsite.settings"}
    env.pop("DATABASE_URL", None)
    env.setdefault("SECRET_KEY", "test-only")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=django_settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "queued" in done.stdout
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT payload FROM governance_auditevent WHERE event_type = 'discovery'").fetchall()
    assert len(rows) == 5
