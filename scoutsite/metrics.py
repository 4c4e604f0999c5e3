"""``/metrics``: Prometheus text for every counter and histogram Scout defines, plus figures read from the
database at scrape time (index size, pending approvals, server health, recent sync failures).

Counters and histograms are defined next to the code that observes them (``search/metrics.py``,
``mcpgateway/metrics.py``, ``catalog/metrics.py``, Celery task outcomes in ``scoutsite/celery.py``). With
PROMETHEUS_MULTIPROC_DIR set, every process writes its values to files there and a scrape of any worker
sums them (prometheus-client's multiprocess mode), so several uvicorn workers and Celery agree.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector
from rest_framework.throttling import BaseThrottle

logger = logging.getLogger(__name__)


class DatabaseCollector(Collector):
    """Figures that live in the database, read at scrape time (the same in every process), after ``scout_database_up``.
    A database that does not answer leaves them out and the scrape goes on: it was a 500 for the whole of /metrics,
    the process's counters with it, just when an operator needs them (opsux3)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("scout_database_up", "Whether the database answered this scrape's reads: 1 or 0")
        try:
            figures = list(self._figures())
        except DatabaseError:
            logger.warning("metrics: the database did not answer; its figures are left out", exc_info=True)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from figures

    def _figures(self) -> Iterator[GaugeMetricFamily]:
        from catalog.models import Server, SyncRun
        from governance.choices import ApprovalStatus
        from governance.models import ApprovalRequest
        from search.choices import GenerationStatus
        from search.models import IndexGeneration

        latest = IndexGeneration.objects.filter(status=GenerationStatus.READY).order_by("-id").first()
        index = GaugeMetricFamily("scout_index_generation", "Id of the latest ready search index generation")
        index.add_metric([], latest.pk if latest else 0)
        yield index
        size = GaugeMetricFamily("scout_index_tools", "Tools in the latest ready full index build")
        full = IndexGeneration.objects.filter(status=GenerationStatus.READY, kind="full").order_by("-id").first()
        size.add_metric([], full.tool_count if full else 0)
        yield size
        pending = GaugeMetricFamily("scout_approvals_pending", "Approval requests waiting for a decision")
        pending.add_metric([], ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).count())
        yield pending
        servers = GaugeMetricFamily("scout_upstream_servers", "Upstream servers by status", labels=["status"])
        counts: dict[str, int] = {}
        for status in Server.objects.values_list("status", flat=True):
            counts[status] = counts.get(status, 0) + 1
        for status, count in sorted(counts.items()):
            servers.add_metric([status], count)
        yield servers
        failures = GaugeMetricFamily("scout_sync_failures_24h", "Failed sync runs in the last 24 hours")
        since = timezone.now() - timedelta(hours=24)
        failures.add_metric([], SyncRun.objects.filter(status="failed", started_at__gte=since).count())
        yield failures


class BackgroundCollector(Collector):
    """The broker, the worker's heartbeat and the waiting tasks (scoutsite/background.py); none without REDIS_URL."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from scoutsite.background import background_status

        try:
            status = background_status()
        except DatabaseError:  # the tasks kept in the database are not to be counted: scout_database_up says why
            return
        if status is None:
            return
        broker = GaugeMetricFamily("scout_broker_up", "Whether the Celery broker (Redis) answers: 1 or 0")
        broker.add_metric([], 1 if status.broker_up else 0)
        yield broker
        waiting = GaugeMetricFamily(
            "scout_tasks_waiting",
            "Background tasks waiting: in the broker's queue, or kept in the database while the broker was down",
            labels=["place"],
        )
        if status.queued is not None:
            waiting.add_metric(["broker"], status.queued)
        waiting.add_metric(["outbox"], status.kept)
        yield waiting
        if status.worker_silent_for is not None:
            seen = GaugeMetricFamily(
                "scout_worker_heartbeat_age_seconds",
                "Seconds since a Celery worker's latest heartbeat (every 10 s while one runs)",
            )
            seen.add_metric([], status.worker_silent_for)
            yield seen


def _allowed(request: HttpRequest) -> bool:
    token = settings.SCOUT_METRICS_TOKEN
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if token and header.startswith("Bearer ") and hmac.compare_digest(header[7:].strip(), token):
        return True
    try:
        # The client's address as the rate limits read it: REMOTE_ADDR, or behind SCOUT_API_NUM_PROXIES proxies the
        # one the proxy wrote in X-Forwarded-For. The proxy's own address (loopback on the same host) is everyone's.
        address = ipaddress.ip_address(BaseThrottle().get_ident(request))
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(net, strict=False) for net in settings.SCOUT_METRICS_ALLOWED_NETWORKS)


def _dead_processes_gauges_dropped(directory: str) -> None:
    """Remove the "live" gauges (a breaker's state) of processes no longer running: a uvicorn worker that died or was
    replaced never said so (prometheus-client's ``mark_process_dead``), and its last state, an open breaker, was
    shown as the worst over "live" workers for as long as the others ran (opsux7). Counters stay: they are summed."""
    for path in Path(directory).glob("gauge_live*_*.db"):
        pid = path.stem.rsplit("_", 1)[1]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            mark_process_dead(int(pid), directory)
        except (PermissionError, OverflowError):  # another user's process (alive), or no pid at all
            continue


def metrics_text() -> bytes:
    """Counters and histograms (of every process in multiprocess mode, else of this one), then the
    database figures."""
    if settings.PROMETHEUS_MULTIPROC_DIR:
        _dead_processes_gauges_dropped(settings.PROMETHEUS_MULTIPROC_DIR)
        counters = CollectorRegistry()
        MultiProcessCollector(counters, path=settings.PROMETHEUS_MULTIPROC_DIR)
    else:
        counters = REGISTRY
    database = CollectorRegistry()
    database.register(DatabaseCollector())
    database.register(BackgroundCollector())
    return generate_latest(counters) + generate_latest(database)


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text; 403 unless the bearer token (SCOUT_METRICS_TOKEN) or an allowed network matches."""
    if not _allowed(request):
        return HttpResponse("forbidden\n", status=403, content_type="text/plain")
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_LATEST)
