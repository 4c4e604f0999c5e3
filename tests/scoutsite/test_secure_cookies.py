"""Served over https, the admin's session and CSRF cookies are marked Secure: a browser never sends a staff session
(an approver's, an operator's) over plain http, where anyone on the network reads it. Served over http (a
laptop, the demo), they are not, or nobody could sign in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOW = "from django.conf import settings; print(settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE)"


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {name: value for name, value in os.environ.items() if name != "SCOUT_SECURE_COOKIES"}
    environment.update(SECRET_KEY="x", **env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("env", "flags"),
    [
        ({"SCOUT_PUBLIC_URL": "https://scout.example.com"}, "True True"),
        ({"SCOUT_PUBLIC_URL": "http://127.0.0.1:8000"}, "False False"),
        ({"SCOUT_PUBLIC_URL": "http://scout.internal", "SCOUT_SECURE_COOKIES": "1"}, "True True"),  # TLS ends before
        ({"SCOUT_PUBLIC_URL": "https://scout.example.com", "SCOUT_SECURE_COOKIES": "0"}, "False False"),
    ],
)
def test_the_admins_cookies_are_secure_when_scout_is_served_over_https(env, flags):
    answer = _manage("shell", "--no-imports", "-c", SHOW, **env)
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == flags


def test_a_deployment_check_over_https_finds_no_insecure_cookie():
    answer = _manage("check", "--deploy", SCOUT_PUBLIC_URL="https://scout.example.com")
    assert "security.W012" not in answer.stderr + answer.stdout  # SESSION_COOKIE_SECURE
    assert "security.W016" not in answer.stderr + answer.stdout  # CSRF_COOKIE_SECURE
