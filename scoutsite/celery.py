"""The Celery app. Shared tasks bind to it through ``scoutsite/__init__.py``."""

import logging
import os

from celery import Celery
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    task_failure,
    task_retry,
    task_success,
    worker_init,
    worker_process_init,
    worker_ready,
)
from kombu.transport import TRANSPORT_ALIASES
from prometheus_client import Counter

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
# The broker's transport is kombu's Redis one with a fix (catalog/broker.py), under kombu's own names: the worker's
# banner and reconnect lines read redis://host:port/db as operators expect; named by its class path in the settings,
# they read catalog.broker:Transport://... (opsux4).
TRANSPORT_ALIASES.update(redis="catalog.broker:Transport", rediss="catalog.broker:Transport")

# Every task's apply_async keeps a task the broker refused and sends it again later (catalog/outbox.py, F4).
app = Celery("scoutsite", task_cls="catalog.outbox:OutboxTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
@after_setup_task_logger.connect
def _one_line_messages(logger: logging.Logger, **kwargs: object) -> None:
    """The worker logs through Celery's own handlers, not settings.LOGGING's: they escape an upstream's text too
    (a sync's failure quotes the server's stderr), one record per line (T15, scoutsite/logfilters.py)."""
    from scoutsite.logfilters import OneLineMessages, SdkRecordsPerSite

    for handler in logger.handlers:
        handler.addFilter(SdkRecordsPerSite())  # an upstream's malformed messages, at most ten a minute a place
        handler.addFilter(OneLineMessages())


@worker_init.connect
def _refuse_a_configuration_that_cannot_work(**kwargs: object) -> None:
    """Scout's system checks (scoutsite/checks.py), which the worker does not run otherwise: a broker other than
    REDIS_URL's stops it at start, saying why. SystemExit, as Celery's signals log and swallow an Exception."""
    from scoutsite.checks import scout_check_errors

    if errors := scout_check_errors():
        raise SystemExit("\n".join(errors))


@worker_process_init.connect
def _tracing(**kwargs: object) -> None:
    from scoutsite.tracing import tracing_configure

    tracing_configure()  # off unless OTEL_* variables ask for it


@worker_ready.connect
def _send_kept_tasks(**kwargs: object) -> None:
    from catalog.outbox import outbox_sender_start

    outbox_sender_start()  # tasks a stopped process kept while the broker was down (F4)


@worker_ready.connect
def _heartbeat(**kwargs: object) -> None:
    from scoutsite.background import worker_heartbeat_start

    worker_heartbeat_start()  # the operator's home page and /metrics tell whether a worker runs


TASKS = Counter("scout_celery_tasks", "Celery task outcomes by task name", ["task", "outcome"])


@task_success.connect
def _count_success(sender=None, **kwargs: object) -> None:
    TASKS.labels(task=getattr(sender, "name", "unknown"), outcome="success").inc()


@task_failure.connect
def _count_failure(sender=None, **kwargs: object) -> None:
    TASKS.labels(task=getattr(sender, "name", "unknown"), outcome="failure").inc()


@task_retry.connect
def _count_retry(sender=None, request=None, **kwargs: object) -> None:
    TASKS.labels(task=getattr(request, "task", None) or "unknown", outcome="retry").inc()


@app.on_after_finalize.connect
def setup_periodic_tasks(sender: Celery, **kwargs: object) -> None:
    """Every beat schedule lives here: (every so many seconds, task, name), each with why and how often."""
    from django.conf import settings

    schedule = [
        # Reconcile every upstream server's catalog every SCOUT_SYNC_INTERVAL seconds (default 15 minutes).
        (settings.SCOUT_SYNC_INTERVAL, "catalog.tasks.sync_all_servers", "catalog: reconcile all servers"),
        # Mark approvals past their expiry as expired every 5 minutes, so the approver inbox stays current.
        # (An expired approval is refused when used whether or not this has run.)
        (300, "governance.tasks.expire_approvals", "governance: expire approvals"),
        # Close the sync runs whose worker died once their lock has run out (SCOUT_SYNC_LOCK_SECONDS), checked that
        # often, so pages stop calling them running: a page or an API read never writes (mend3). And the runs queued
        # past the visibility timeout that no worker took, their task lost by the broker (mend4).
        (max(3, settings.SCOUT_SYNC_LOCK_SECONDS), "catalog.tasks.close_dead_sync_runs", "catalog: close dead runs"),
        # Send tasks kept while the broker was down that no running process is sending (catalog/outbox.py, F4).
        (60, "catalog.tasks.outbox_send", "catalog: send kept tasks"),
        # Recount learned requests' teachers once an hour: each visibility change queues a recount, and one the
        # broker lost (or a count left off by a confirmation racing a recount) stayed wrong until a later change.
        (3600, "search.tasks.recount_learned_teachers", "search: recount learned teachers"),
        # Purge the query log past its retention once an hour (SCOUT_QUERY_LOG_RETENTION_DAYS).
        (3600, "search.tasks.purge_query_log", "search: purge query log"),
        # Delete idempotency records past SCOUT_MCP_IDEMPOTENCY_TTL once an hour (each may hold a call's whole result).
        (3600, "mcpgateway.tasks.purge_idempotency_records", "mcpgateway: purge expired idempotency records"),
    ]
    # Compare the Weaviate index with the database and repair drift (SCOUT_WEAVIATE_RECONCILE_INTERVAL).
    if settings.SCOUT_SEARCH_BACKEND == "weaviate" and settings.SCOUT_WEAVIATE_RECONCILE_INTERVAL > 0:
        every = settings.SCOUT_WEAVIATE_RECONCILE_INTERVAL
        schedule.append((every, "search.tasks.reconcile_weaviate", "search: reconcile the Weaviate index"))
    # Flush learned requests whose batched reindex was lost (queued with a countdown, so only a broker that lost
    # it leaves them waiting): any that waited longer than SCOUT_LEARNED_INDEX_INTERVAL, checked that often.
    if settings.SCOUT_LEARNED_INDEX_INTERVAL > 0:
        every = settings.SCOUT_LEARNED_INDEX_INTERVAL
        schedule.append((every, "search.tasks.flush_stale_learned_index", "search: flush waiting learned requests"))
    for seconds, task, name in schedule:
        sender.add_periodic_task(float(seconds), sender.signature(task), name=name)
