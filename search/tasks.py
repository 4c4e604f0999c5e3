"""Celery tasks: reindex changed tools, rebuild everything. They take primary keys and call one service."""

from celery import shared_task

from .services import index_rebuild, index_update


@shared_task(name="search.tasks.reindex_tools", acks_late=True, autoretry_for=(OSError,), retry_backoff=True)
def reindex_tools(tool_pks: list[int]) -> int:
    """Reindex the given tools; returns the new generation's id."""
    return index_update(tool_pks=tool_pks).pk


@shared_task(name="search.tasks.rebuild_index", acks_late=True)
def rebuild_index() -> int:
    return index_rebuild().pk
