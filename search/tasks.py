"""Celery tasks: reindex changed tools, rebuild everything. They take primary keys and call one service."""

from celery import shared_task

from .services import index_rebuild, index_reconcile, index_update
from .usage import learned_index_flush, learned_index_flush_stale, learned_teachers_recount, query_log_purge


@shared_task(name="search.tasks.reindex_tools", acks_late=True, autoretry_for=(OSError,), retry_backoff=True)
def reindex_tools(tool_pks: list[int]) -> int:
    """Reindex the given tools; returns the new generation's id."""
    return index_update(tool_pks=tool_pks).pk


@shared_task(name="search.tasks.rebuild_index", acks_late=True)
def rebuild_index() -> int:
    return index_rebuild().pk


@shared_task(name="search.tasks.reconcile_weaviate", acks_late=True)
def reconcile_weaviate() -> dict[str, int]:
    """Compare the Weaviate index with the database and repair drift (nothing to do on other backends)."""
    return index_reconcile()


@shared_task(name="search.tasks.flush_learned_index", acks_late=True)
def flush_learned_index() -> int:
    """Reindex, in one batch, the tools whose learned requests changed; returns how many."""
    return learned_index_flush()


@shared_task(name="search.tasks.flush_stale_learned_index", acks_late=True)
def flush_stale_learned_index() -> int:
    """Beat safety net: flush learned requests that waited past SCOUT_LEARNED_INDEX_INTERVAL; returns how many
    tools were reindexed (0 when every batched flush arrived)."""
    return learned_index_flush_stale()


@shared_task(name="search.tasks.purge_query_log")
def purge_query_log() -> int:
    """Delete query log entries past SCOUT_QUERY_LOG_RETENTION_DAYS; returns how many."""
    return query_log_purge()


@shared_task(name="search.tasks.recount_learned_teachers", acks_late=True)
def recount_learned_teachers() -> int:
    """Count only the teachers who may execute their tools now, after a visibility change; returns how many
    confirmations changed."""
    return learned_teachers_recount()
