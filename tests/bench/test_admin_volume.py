"""bench/admin_volume.py's fill leaves a database the admin is measured on as it would be in use: servers synced
(never-synced ones are flagged and sorted first) and the planner's statistics current (autovacuum analyzes only
after a while: pages measured right after the fill were planned for empty tables)."""

import importlib.util
from pathlib import Path

import pytest
from django.db import connection

from catalog.models import Server

pytestmark = pytest.mark.django_db
SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "admin_volume.py"


@pytest.fixture
def admin_volume(monkeypatch):
    """The script as a module, at a volume a test can fill."""
    spec = importlib.util.spec_from_file_location("admin_volume", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sizes = {"SERVERS": 2, "TOOLS_PER_SERVER": 3, "AUDIT_EVENTS": 10, "QUERY_LOG": 10, "APPROVALS": 10}
    for name, value in {**sizes, "LEARNED": 4, "BATCH": 10}.items():
        monkeypatch.setattr(module, name, value)
    return module


def _analyzed(table: str) -> bool:
    """Whether the planner's statistics of ``table`` count the rows it holds now."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Set by ANALYZE in its own transaction (this test's), counting the rows it inserted.
            cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
            estimated = cursor.fetchone()[0]
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
            return estimated == cursor.fetchone()[0]
        cursor.execute("SELECT name FROM sqlite_master WHERE name = 'sqlite_stat1'")
        if cursor.fetchone() is None:
            return False
        cursor.execute("SELECT count(*) FROM sqlite_stat1 WHERE tbl = %s", [table])
        return cursor.fetchone()[0] > 0


def test_fill_syncs_its_servers_and_analyzes_the_tables(admin_volume, capsys):
    admin_volume.fill()
    assert Server.objects.count() == 2 and not Server.objects.filter(last_synced_at__isnull=True).exists()
    for table in ("governance_auditevent", "governance_approvalrequest", "search_querylogentry", "catalog_tool"):
        assert _analyzed(table), table
    assert "filled: 2 servers, 6 tools" in capsys.readouterr().out


def test_pending_adds_a_backlog_waiting_in_the_approvers_inbox(admin_volume, monkeypatch, capsys):
    """``pending N``: N more pending, unexpired requests by the fill's people, in the approver's inbox when shared (the
    approver holds approve on every server and acts in no tenant), counted by the planner's statistics."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from governance.choices import ApprovalStatus
    from governance.models import ApprovalRequest
    from governance.selectors import approval_requests_for_approver

    admin_volume.fill()
    approver = get_user_model().objects.get(username="approver")
    before = approval_requests_for_approver(user=approver).filter(status=ApprovalStatus.PENDING).count()
    monkeypatch.setattr(admin_volume.sys, "argv", ["admin_volume.py", "pending", "12"])
    admin_volume.pending()
    backlog = ApprovalRequest.objects.filter(approval_id__startswith="apr_backlog_")
    assert backlog.count() == 12 and not backlog.exclude(status=ApprovalStatus.PENDING).exists()
    shared = backlog.filter(tenant__isnull=True, expires_at__gt=timezone.now()).count()
    assert shared and approval_requests_for_approver(user=approver).filter(status=ApprovalStatus.PENDING).count() == (
        before + shared
    )
    assert _analyzed("governance_approvalrequest")
    assert "added 12 pending requests" in capsys.readouterr().out
