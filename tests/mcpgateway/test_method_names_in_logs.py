"""T15: the method name a caller sends (answered "Method not found" with the name quoted back to the caller) never
reaches Scout's log as written: a line break in it would start a log line of the caller's making."""

import io
import logging
import time

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
    # The SDK's own loggers as another test of the run may have left them: a logging re-configuration (dictConfig)
    # disables the loggers that existed before it, and a test may have set one's level.
    sdk = [logger for name, logger in logging.root.manager.loggerDict.items() if name.startswith("mcp.")]
    sdk = [logger for logger in sdk if isinstance(logger, logging.Logger)]
    levels = [logger.level for logger in loggers]
    sdk_states = [(logger.level, logger.disabled) for logger in sdk]
    written = io.StringIO()
    stream = console.setStream(written)
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
    for logger in sdk:
        logger.setLevel(logging.NOTSET)
        logger.disabled = False
    try:
        yield written
    finally:
        console.setStream(stream)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
        for logger, (level, disabled) in zip(sdk, sdk_states, strict=True):
            logger.setLevel(level)
            logger.disabled = disabled


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


def _lines_once_logged(written: io.StringIO, text: str, wait: float = 30.0) -> list[str]:
    """The lines holding ``text``, once there are any: the 202 for a notification can reach the client before the
    server has handled (and logged) it, which a busy machine shows."""
    deadline = time.monotonic() + wait
    while True:
        lines = [line for line in written.getvalue().splitlines() if text in line]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_a_method_name_with_a_line_break_never_starts_a_log_line(gateway, log_everything):
    """The SDK quotes an unknown method back to the caller (JSON-escaped) and, for a notification, logs it at DEBUG
    as written (``no handler for notification %s``); the console's one-line filter escapes it. A 2026-07-28 request
    must repeat its method in the Mcp-Method header, which cannot hold a line break: only 2025-11-25 gets here."""
    token = make_token(make_user("gw_prober"))

    requested = _legacy_post(gateway, token, {"jsonrpc": "2.0", "id": 1, "method": METHOD})
    notified = _legacy_post(gateway, token, {"jsonrpc": "2.0", "method": METHOD})

    assert rpc_result(requested)["error"] == {"code": -32601, "message": "Method not found", "data": METHOD}
    assert notified.status_code == 202
    [logged] = _lines_once_logged(log_everything, "no handler for notification")
    lines = log_everything.getvalue().splitlines()
    assert logged.endswith(f"no handler for notification tools/nope\\r\\n{FORGED}\\x1b[2J")
    assert not [line for line in lines if line.startswith("2026-01-01")]
    assert not [char for char in ("\r", "\x1b") if char in log_everything.getvalue()]
