"""One log record, one line (T15): also the traceback logged with a record, whose exception lines quote upstreams."""

import io
import logging

import pytest
from mcp.shared.exceptions import MCPError

from catalog.models import Server
from catalog.services.sync import server_sync
from catalog.upstream import _translate
from tests.mcpgateway.conftest import free_port

FORGED = "2026-01-01 00:00:00,000 INFO governance.audit FORGED approval granted"


def test_a_tracebacks_exception_lines_never_forge_a_log_line_or_reach_a_terminal_raw():
    """An upstream's error message is raised as the SDK's error and translated to an UpstreamError raised from it;
    logged with its traceback (``logger.exception``, as the watcher and the API's last-resort handler do), the
    exception's last line quoted the upstream's words as written: a line break began a log line of the upstream's
    making and a terminal escape reached whoever read the log. The frames keep their lines; each exception's own
    line is escaped like a message, also inside an exception group."""
    server = Server(slug="evil", name="evil", transport="http", url="https://evil.example/mcp")
    console = next(handler for handler in logging.getLogger().handlers if handler.get_name() == "console")
    written = io.StringIO()
    stream = console.setStream(written)  # the log as Scout writes it (settings.LOGGING's console handler)
    try:
        try:
            error = MCPError(-32603, f"disk full\n{FORGED}\x1b[2J\u2028{FORGED}")
            try:
                raise error
            except MCPError as exc:
                translated = _translate(server, exc, doing="listing tools", timeout=None, stderr="")
                try:
                    raise translated from exc
                except Exception as raised:  # as the SDK's task groups raise it
                    raise ExceptionGroup("unhandled errors in a TaskGroup", [raised]) from None
        except Exception:
            logging.getLogger("catalog.management.commands.catalog_watch").exception("evil: watcher failed")
    finally:
        console.setStream(stream)
    log = written.getvalue()
    lines = log.splitlines()
    assert lines[0].endswith("evil: watcher failed") and "Exception Group Traceback" in lines[1]
    assert "    | The above exception was the direct cause of the following exception:" in lines
    quoted = [line for line in lines if "FORGED" in line]
    assert len(quoted) == 2  # the SDK's error and the UpstreamError raised from it, each one line
    assert quoted[0].startswith("    | mcp.shared.exceptions.MCPError: disk full\\n2026-01-01")
    assert quoted[1].startswith("    | catalog.upstream.UpstreamError: evil: protocol error while listing tools")
    assert all("\\x1b[2J\\u2028" in line for line in quoted)
    assert not [char for char in ("\x1b", "\u2028", "\r") if char in log]


@pytest.mark.django_db
def test_a_failed_syncs_log_line_and_a_logged_traceback_cut_the_servers_url_to_its_origin(settings):
    """opsux7: a hosted server's URL carries its key in the path; a failed sync logged "connection refused or
    unreachable: http://host/s/<key>/mcp" whole, in the log every operator and log shipper reads (the admin cuts it
    for curators already). The log keeps the origin; the run, which the admin shows to who may see the URL, keeps
    all of it."""
    origin = f"http://127.0.0.1:{free_port()}"  # nothing listens: the hosted server is down
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["127.0.0.1/32"]
    server = Server.objects.create(slug="hosted", name="hosted", transport="http", url=f"{origin}/s/KEY-4f9a2c/mcp")
    console = next(handler for handler in logging.getLogger().handlers if handler.get_name() == "console")
    written = io.StringIO()
    stream = console.setStream(written)
    try:
        run = server_sync(server_pk=server.pk, trigger="test")
        try:
            raise RuntimeError(f"watch failed: {run.error}")
        except RuntimeError:
            logging.getLogger("catalog.management.commands.catalog_watch").exception("hosted: watcher failed")
        # The worker's connect line names the Redis database, which an operator checks: a number, no secret.
        logging.getLogger("celery.worker.consumer.connection").info("Connected to %s", "redis://:**@127.0.0.1:6379/11")
    finally:
        console.setStream(stream)
    log = written.getvalue()
    assert "Connected to redis://:**@127.0.0.1:6379/11\n" in log
    assert f"{origin}/s/KEY-4f9a2c/mcp" in run.error  # kept whole where the admin reads it
    assert f"sync of hosted failed: hosted: connection refused or unreachable: {origin}/… (" in log, log
    assert f"RuntimeError: watch failed: hosted: connection refused or unreachable: {origin}/… (" in log, log
    assert "KEY-4f9a2c" not in log
