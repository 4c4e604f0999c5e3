"""catalog_import and catalog_sync --all show their progress: a bar on a terminal (stderr), plain lines
otherwise, nothing but errors at --verbosity 0; a sync run records tools listed then applied."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from catalog.choices import SyncStatus
from catalog.models import SyncRun
from tests.catalog.servers.fixtures import BIN_DIR, good_tool
from tests.progress_streams import TTY, assert_bar_finished, assert_plain_lines


@pytest.fixture(autouse=True)
def no_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)


@pytest.fixture
def dump(tmp_path):
    """Seven tools on three servers, one tool per line."""
    rows = [{"server": f"s{i % 3}", **good_tool(f"tool_{i}")} for i in range(7)]
    path = tmp_path / "tools.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.django_db
def test_import_draws_a_bar_of_tools_on_a_terminal(dump):
    out, err = StringIO(), TTY()
    call_command("catalog_import", str(dump), "--no-index", stdout=out, stderr=err)
    assert_bar_finished(err.getvalue(), 7, "tools")
    assert "import tools.jsonl:" in err.getvalue()
    assert "tools added 7" in out.getvalue()


@pytest.mark.django_db
def test_import_plain_lines_off_a_terminal_and_with_no_progress(dump):
    err = StringIO()
    call_command("catalog_import", str(dump), "--no-index", stdout=StringIO(), stderr=err)
    assert_plain_lines(err.getvalue(), "import tools.jsonl", 7, "tools")
    err = TTY()
    call_command("catalog_import", str(dump), "--no-index", "--no-progress", stdout=StringIO(), stderr=err)
    assert_plain_lines(err.getvalue(), "import tools.jsonl", 7, "tools")


@pytest.mark.django_db
def test_import_verbosity_zero_prints_only_errors(dump, tmp_path):
    out, err = TTY(), TTY()
    call_command("catalog_import", str(dump), "--no-index", verbosity=0, stdout=out, stderr=err)
    assert out.getvalue() == err.getvalue() == ""
    assert SyncRun.objects.filter(status=SyncStatus.SUCCESS).count() == 3

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"server": "s9", "name": "ok", "inputSchema": {"type": "object"}}\nnot json\n')
    out, err = TTY(), TTY()
    call_command("catalog_import", str(bad), "--no-index", verbosity=0, stdout=out, stderr=err)
    assert out.getvalue() == ""
    assert "line 2" in err.getvalue() and "|" not in err.getvalue()


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_sync_all_counts_servers_and_records_tools_listed(make_server, scripted):
    make_server("time", command=str(BIN_DIR / "mcp-server-time"))
    scripted({"pages": [[good_tool("alpha"), good_tool("beta"), good_tool("gamma")]]})
    out, err = StringIO(), TTY()
    call_command("catalog_sync", "--all", stdout=out, stderr=err)
    assert_bar_finished(err.getvalue(), 2, "servers")
    assert [line.split()[0] for line in out.getvalue().splitlines()] == ["time", "scripted"]
    totals = dict(SyncRun.objects.values_list("server__slug", "progress_total"))
    assert totals == {"time": 2, "scripted": 3}
    assert all(run.progress_done == run.progress_total for run in SyncRun.objects.all())

    err = StringIO()
    call_command("catalog_sync", "--all", stdout=StringIO(), stderr=err)
    assert_plain_lines(err.getvalue(), "syncing", 2, "servers")


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_sync_all_verbosity_zero_prints_only_failures(make_server, scripted):
    make_server("time", command=str(BIN_DIR / "mcp-server-time"))
    make_server("broken", command=str(BIN_DIR / "no-such-server"))
    out, err = TTY(), TTY()
    with pytest.raises(CommandError, match="1 of 2 sync"):
        call_command("catalog_sync", "--all", verbosity=0, stdout=out, stderr=err)
    assert [line.split()[:2] for line in out.getvalue().splitlines()[:1]] == [["broken", "failed"]]
    # The server that synced is not printed (a failure's next step may name mcp-server-time as an example path).
    assert not [line for line in out.getvalue().splitlines() if line.split()[0] == "time"]
    assert err.getvalue() == ""
