"""OpenTelemetry tracing: spans for a search and an execution (gateway → search → upstream).

Off by default. The standard OpenTelemetry variables switch it on: ``OTEL_TRACES_EXPORTER`` (``otlp`` or
``console``) or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``,
with ``OTEL_EXPORTER_OTLP_HEADERS`` etc. read by the exporter itself); ``OTEL_SDK_DISABLED=true`` or
``OTEL_TRACES_EXPORTER=none`` keeps it off; ``OTEL_SERVICE_NAME`` names the service (default ``scout``).
Nothing is needed to run without a collector: until configured, ``tracer`` is OpenTelemetry's no-op.

Spans carry identifiers and sizes, never request text or arguments (they are the caller's data).
"""

from __future__ import annotations

import logging
import os

from opentelemetry import trace

logger = logging.getLogger(__name__)
tracer = trace.get_tracer("scout")
_configured = False


def tracing_wanted() -> bool:
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return bool(exporter or endpoint)


def tracing_configure() -> bool:
    """Install a tracer provider with the exporter the environment names (once per process).
    Returns whether tracing is on."""
    global _configured
    if _configured:
        return True
    if not tracing_wanted():
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if exporter_name == "console":
        exporter = ConsoleSpanExporter()
    elif exporter_name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    else:
        logger.warning("tracing: OTEL_TRACES_EXPORTER=%s is not supported (otlp, console); tracing off", exporter_name)
        return False
    service = os.environ.get("OTEL_SERVICE_NAME") or "scout"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    _configured = True
    logger.info("tracing: on, exporting with %s", exporter_name)
    return True
