"""Celery tasks of the gateway: they call one service."""

from celery import shared_task

from .services.execution import idempotency_records_purge


@shared_task(name="mcpgateway.tasks.purge_idempotency_records")
def purge_idempotency_records() -> int:
    """Delete idempotency records past SCOUT_MCP_IDEMPOTENCY_TTL; returns how many."""
    return idempotency_records_purge()
