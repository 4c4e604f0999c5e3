"""Tracing is off by default and switched on by the standard OTEL_* variables, with no collector needed."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import django, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
django.setup()
from scoutsite.tracing import tracer, tracing_configure
from opentelemetry import trace
print("configured", tracing_configure())
with tracer.start_as_current_span("scout.test-span") as span:
    print("recording", span.is_recording())
trace.get_tracer_provider().shutdown() if hasattr(trace.get_tracer_provider(), "shutdown") else None
"""


def _run(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=REPO,
        env={**clean, "DEBUG": "1", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout


def test_off_by_default_spans_are_not_recorded():
    out = _run()
    assert "configured False" in out and "recording False" in out


def test_console_exporter_from_the_standard_variable():
    out = _run(OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="scout-test")
    assert "configured True" in out and "recording True" in out
    assert '"name": "scout.test-span"' in out and "scout-test" in out  # exported on shutdown, no collector


def test_disabled_wins():
    out = _run(OTEL_TRACES_EXPORTER="console", OTEL_SDK_DISABLED="true")
    assert "configured False" in out and "recording False" in out
