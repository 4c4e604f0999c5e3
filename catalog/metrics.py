"""Catalog's Prometheus metrics (collected by scoutsite/metrics.py)."""

from prometheus_client import Counter, Histogram

SYNCS = Counter("scout_syncs", "Upstream server syncs by final status", ["status"])
SYNC_SECONDS = Histogram(
    "scout_sync_seconds", "Time to sync one upstream server", buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
)
