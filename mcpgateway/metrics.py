"""The gateway's Prometheus metrics (collected by scoutsite/metrics.py)."""

from prometheus_client import Counter, Histogram

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

EXECUTIONS = Counter(
    "scout_executions",
    "execute_tool calls by outcome: success, error (the tool or its server failed), unknown (cut off after it "
    "was sent), denied, pending_approval, invalid (arguments), unknown_tool",
    ["outcome"],
)
EXECUTE_SECONDS = Histogram("scout_execute_seconds", "Time to answer an execute_tool call", buckets=LATENCY_BUCKETS)
UPSTREAM_SECONDS = Histogram(
    "scout_upstream_call_seconds", "Time of the upstream tools/call", ["server"], buckets=LATENCY_BUCKETS
)
