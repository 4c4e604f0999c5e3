"""Search's Prometheus metrics (collected by scoutsite/metrics.py)."""

from prometheus_client import Counter, Histogram

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

SEARCHES = Counter(
    "scout_searches",
    "Client searches (tool_search, the REST API) by the confidence of the answer: high, low or withheld",
    ["confidence", "degraded", "backend"],
)
SEARCH_SECONDS = Histogram("scout_search_seconds", "Time to answer a client search", buckets=LATENCY_BUCKETS)
