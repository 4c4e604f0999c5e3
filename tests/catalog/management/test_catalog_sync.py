"""manage.py catalog_sync: what operators (and the demo) run."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from catalog.choices import ServerStatus, SyncStatus, Transport
from catalog.models import SyncRun, Tool
from tests.catalog.servers.fixtures import BIN_DIR, good_tool

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


def test_syncs_named_servers_and_prints_counts(make_server, scripted):
    make_server("time", command=str(BIN_DIR / "mcp-server-time"))
    scripted({"pages": [[good_tool("alpha"), {"name": "bad", "inputSchema": {"type": "string"}}]]})
    out = StringIO()

    call_command("catalog_sync", "time", "scripted", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0].split()[:2] == ["time", "success"]
    assert "added=2 changed=0 unchanged=0 removed=0 rejected=0" in lines[0]
    assert lines[1].split()[:2] == ["scripted", "partial"]
    assert "added=1" in lines[1] and "rejected=1" in lines[1]
    assert "bad: inputSchema must describe an object" in lines[2]
    assert set(Tool.objects.values_list("tool_id", flat=True)) == {
        "time::get_current_time",
        "time::convert_time",
        "scripted::alpha",
    }


def test_all_syncs_every_live_enabled_server_and_a_rerun_changes_nothing(make_server):
    make_server("time", command=str(BIN_DIR / "mcp-server-time"))
    make_server("off", command="unused", status=ServerStatus.DISABLED)
    make_server("dump", transport=Transport.IMPORTED)
    call_command("catalog_sync", "--all", stdout=StringIO())
    out = StringIO()

    call_command("catalog_sync", "--all", stdout=out)

    assert out.getvalue().split()[:2] == ["time", "success"]
    assert "added=0 changed=0 unchanged=2 removed=0" in out.getvalue()
    assert SyncRun.objects.filter(server__slug__in=["off", "dump"]).count() == 0


def test_failed_sync_prints_the_error_and_exits_nonzero(make_server):
    make_server("ghost", command="scout-no-such-command-xyz")
    out = StringIO()

    with pytest.raises(CommandError, match="1 of 1 sync"):
        call_command("catalog_sync", "ghost", stdout=out)

    assert "ghost" in out.getvalue() and "failed" in out.getvalue()
    assert "command not found" in out.getvalue()
    assert SyncRun.objects.get().status == SyncStatus.FAILED


def test_unknown_slug_and_missing_arguments_are_clear_errors(db):
    with pytest.raises(CommandError, match="unknown server"):
        call_command("catalog_sync", "nope", stdout=StringIO())
    with pytest.raises(CommandError, match="--all"):
        call_command("catalog_sync", stdout=StringIO())


@pytest.mark.django_db(transaction=True)  # autocommit, as the command runs: each write stands or fails on its own
def test_all_reports_a_server_deleted_while_it_synced_and_syncs_the_others(scripted, make_server, monkeypatch):
    """A server deleted mid-sync ends its sync with Server.DoesNotExist; --all stopped there, the servers after it
    unsynced and a traceback for the operator."""
    from catalog import upstream
    from catalog.models import Server

    gone, _ = scripted({"pages": [[good_tool("alpha")]]}, slug="gone")
    make_server("time", command=str(BIN_DIR / "mcp-server-time"))
    real_list_tools = upstream.list_tools

    def deleting_gone(server, *args, **kwargs):
        if server.pk == gone.pk:
            Server.objects.filter(pk=gone.pk).delete()
        return real_list_tools(server, *args, **kwargs)

    monkeypatch.setattr(upstream, "list_tools", deleting_gone)
    out = StringIO()

    call_command("catalog_sync", "--all", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0] == "gone                 gone: deleted meanwhile"
    assert lines[1].split()[:2] == ["time", "success"]
    assert set(Tool.objects.values_list("tool_id", flat=True)) == {"time::get_current_time", "time::convert_time"}
