"""A mistyped request rate (SCOUT_MCP_RATE, SCOUT_API_RATE, SCOUT_API_ANON_RATE, SCOUT_ADMIN_LOGIN_RATE,
SCOUT_REFUSED_TOKEN_RATE) stops
start-up with a clear error naming the setting, instead of failing every request that reads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _check(**env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "DEBUG": "1", "SECRET_KEY": "x", **env}
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "name",
    ["SCOUT_MCP_RATE", "SCOUT_API_RATE", "SCOUT_API_ANON_RATE", "SCOUT_ADMIN_LOGIN_RATE", "SCOUT_REFUSED_TOKEN_RATE"],
)
def test_a_mistyped_rate_stops_start_up_naming_the_setting(name):
    answer = _check(**{name: "1200 per minute"})
    assert answer.returncode != 0
    assert f"{name} must be a rate such as 600/minute" in answer.stderr
    assert "'1200 per minute'" in answer.stderr


def test_rates_in_drfs_syntax_and_an_empty_mcp_rate_start():
    answer = _check(SCOUT_MCP_RATE="", SCOUT_API_RATE="30/second", SCOUT_API_ANON_RATE="5/hour")
    assert answer.returncode == 0, answer.stderr
