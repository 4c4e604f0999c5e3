"""Tracing is off by default and switched on by the standard OTEL_* variables, with no collector needed. The
gateway's MCP requests get the SDK's spans when tracing is on, and pay nothing for them when it is off."""

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

GATEWAY_SCRIPT = """
import asyncio, django, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
django.setup()
from scoutsite.tracing import tracing_configure
tracing_configure()  # as scoutsite.asgi does, before the gateway is built
from mcp import Client
from mcp.server._otel import OpenTelemetryMiddleware
from opentelemetry import trace
from mcpgateway.server import build_mcp_server

server = build_mcp_server()
print("sdk span middleware", any(isinstance(m, OpenTelemetryMiddleware) for m in server.middleware))

async def main():
    async with Client(server) as client:
        print("listed", len((await client.list_tools()).tools))

asyncio.run(main())
trace.get_tracer_provider().shutdown() if hasattr(trace.get_tracer_provider(), "shutdown") else None
"""


def _run(script: str = SCRIPT, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    result = subprocess.run(
        [sys.executable, "-c", script],
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


def test_gateway_requests_are_traced_when_tracing_is_on():
    out = _run(GATEWAY_SCRIPT, OTEL_TRACES_EXPORTER="console")
    assert "sdk span middleware True" in out and "listed 0" in out
    assert '"name": "tools/list"' in out  # the SDK's span for the request, exported on shutdown


def test_gateway_requests_skip_the_sdk_span_middleware_when_tracing_is_off():
    out = _run(GATEWAY_SCRIPT)
    assert "sdk span middleware False" in out and "listed 0" in out
