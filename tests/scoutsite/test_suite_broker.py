"""The suite's Celery broker is REDIS_URL's (or a test's own redis-server) whatever the shell running it exports:
Celery reads CELERY_BROKER_URL and its kin from the environment ahead of the settings, and a shell that exported
them (one Redis db for the broker as well as for REDIS_URL) made every gateway and worker a test starts use that
Redis instead of the test's own. The broker outage test then stopped a Redis nothing used, and kept no task."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What a test's process sees once tests/conftest.py is loaded, and which broker its Celery app would use.
SEEN = """
import django
django.setup()
import os
import tests.conftest
from django.conf import settings
from scoutsite import celery_app
print(os.environ.get("CELERY_BROKER_URL"), os.environ.get("CELERY_RESULT_BACKEND"))
print(celery_app.conf.broker_url == settings.CELERY_BROKER_URL == "redis://127.0.0.1:1/3")
"""


def test_a_broker_exported_by_the_shell_is_not_the_suites():
    environment = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "TESTING")}
    environment |= {
        "DJANGO_SETTINGS_MODULE": "scoutsite.settings",
        "DEBUG": "1",
        "SECRET_KEY": "x",
        "REDIS_URL": "redis://127.0.0.1:1/3",  # never connected to: only the configuration is read
        "CELERY_BROKER_URL": "redis://127.0.0.1:1/6",
        "CELERY_RESULT_BACKEND": "redis://127.0.0.1:1/6",
    }
    seen = subprocess.run(
        [sys.executable, "-c", SEEN], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert seen.returncode == 0, seen.stderr[-2000:]
    # Gone from the environment (the processes tests start inherit neither), and the app's broker is REDIS_URL's.
    assert seen.stdout.split("\n")[:2] == ["None None", "True"], seen.stdout
