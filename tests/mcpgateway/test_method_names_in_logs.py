"""T15: the method name a caller sends (answered "Method not found" with the name quoted back to the caller) never
reaches Scout's log as written: a line break in it would start a log line of the caller's making."""

import io
import logging

import httpx
import pytest

from .conftest import gateway_db, make_token, make_user, rpc_result

pytestmark = gateway_db

FORGED = "2026-01-01 00:00:00,000 INFO governance.audit FORGED approval granted"
METHOD = f"tools/nope\r\n{FORGED}\x1b[2J"


@pytest.fixture
def log_everything():
    """The console handler's output (settings.LOGGING's, with its filter) with every logger at DEBUG, the SDK's too:
    the worst an operator may configure."""
    console = next(handler for handler in logging.getLogger().handlers if handler.get_name() == "console")
    loggers = [logging.getLogger(), logging.getLogger("mcp"), logging.getLogger("uvicorn")]
    levels = [logger.level for logger in loggers]
    written = io.StringIO()
    stream = console.setStream(written)
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    try:
        yield written
    finally:
        console.setStream(stream)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _legacy_post(gateway, token: str, body: dict) -> httpx.Response:
    """A 2025-11-25 POST (no Mcp-Method header, which a 2026-07-28 one must match with its body's, and a header
    cannot hold a line break)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
        "Authorization": f"Bearer {token}",
    }
    return httpx.post(f"{gateway.url}/mcp", json=body, headers=headers, timeout=60)


def test_a_method_name_with_a_line_break_never_starts_a_log_line(gateway, log_everything):
    """The SDK quotes an unknown method back to the caller (JSON-escaped) and, for a notification, logs it at DEBUG
    as written (``no handler for notification %s``); the console's one-line filter escapes it. A 2026-07-28 request
    must repeat its method in the Mcp-Method header, which cannot hold a line break: only 2025-11-25 gets here."""
    token = make_token(make_user("gw_prober"))

    requested = _legacy_post(gateway, token, {"jsonrpc": "2.0", "id": 1, "method": METHOD})
    notified = _legacy_post(gateway, token, {"jsonrpc": "2.0", "method": METHOD})

    assert rpc_result(requested)["error"] == {"code": -32601, "message": "Method not found", "data": METHOD}
    assert notified.status_code == 202
    lines = log_everything.getvalue().splitlines()
    [logged] = [line for line in lines if "no handler for notification" in line]
    assert logged.endswith(f"no handler for notification tools/nope\\r\\n{FORGED}\\x1b[2J")
    assert not [line for line in lines if line.startswith("2026-01-01")]
    assert not [char for char in ("\r", "\x1b") if char in log_everything.getvalue()]
