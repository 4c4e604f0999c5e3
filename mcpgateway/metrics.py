"""The gateway's Prometheus metrics (collected by scoutsite/metrics.py)."""

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

EXECUTIONS = Counter(
    "scout_executions",
    "execute_tool calls by outcome: success, error (the tool or its server failed), unknown (cut off after it "
    "was sent), denied, pending_approval, invalid (arguments), busy, unknown_tool, repeat (an idempotency key's "
    "stored result answered again)",
    ["outcome"],
)
EXECUTE_SECONDS = Histogram("scout_execute_seconds", "Time to answer an execute_tool call", buckets=LATENCY_BUCKETS)
UPSTREAM_SECONDS = Histogram(
    "scout_upstream_call_seconds", "Time of the upstream tools/call", ["server"], buckets=LATENCY_BUCKETS
)
# What an operator alerts on before the breaker opens (5 failures in a row): which server fails calls, and how. The
# kinds are fixed words (mcpgateway.upstreams, catalog.upstream), never upstream text.
UPSTREAM_CALL_FAILURES = Counter(
    "scout_upstream_call_failures",
    "Upstream calls that returned no result, by server and kind: timeout, closed (the server stopped), protocol, "
    "not_found or config (the server could not be started), refused, too_large, busy and caller_busy (no slot), "
    "backoff and circuit_open (failed fast, not sent), error",
    ["server", "kind"],
)
# Per process (catalog/breaker.py); in multiprocess mode a scrape shows the worst state over live workers.
UPSTREAM_BREAKER_STATE = Gauge(
    "scout_upstream_breaker_state",
    "Circuit breaker of each upstream server: 0 closed, 1 half-open (probing), 2 open (calls fail fast)",
    ["server"],
    multiprocess_mode="livemax",
)
UPSTREAM_BREAKER_OPENED = Counter(
    "scout_upstream_breaker_opened", "Times an upstream server's circuit breaker opened", ["server"]
)
UPSTREAM_BREAKER_REJECTED = Counter(
    "scout_upstream_breaker_rejected",
    "Calls failed fast, without reaching the server, while its breaker was open",
    ["server"],
)
