"""What an operator reads of agents' searches (the dashboard's "Searches by backend and server"): how many, how fast,
how many came back withheld or low-confidence per search backend, why answers were empty, and per server how often
its tools were listed, then called, and how its calls ended and how long they took.

Counts only: a request's words are the curators' to read (the query log). Read from the query log and the audit
trail as the person may read them (Z12), and only servers they manage are named."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from django.db.models import Count, QuerySet

from catalog.models import Server
from governance.principals import principal_for_user
from governance.selectors import audit_events_visible_to, install_wide_visible_to, servers_visible_to_operator

from .choices import EmptyAnswerReason, SearchEventKind, SearchOutcomeKind
from .models import QueryLogEntry, SearchEvent, SearchOutcome
from .usage import query_log_visible_to

MAX_ROWS = 50_000  # searches and calls read per page: enough for percentiles, bounded for a busy month
UNRECORDED_BACKEND = "(not recorded)"  # a row logged before the backend was kept


def percentiles(values: list[float]) -> dict[str, float | None]:
    """p50, p95 and p99 of ``values`` in ms, to one decimal (None when there are none)."""
    if not values:
        return {"p50": None, "p95": None, "p99": None}
    p50, p95, p99 = np.percentile(np.asarray(values, dtype=float), [50, 95, 99])
    return {"p50": round(float(p50), 1), "p95": round(float(p95), 1), "p99": round(float(p99), 1)}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


@dataclass(kw_only=True)
class Timed:
    latency: list[float] = field(default_factory=list, repr=False)  # ms, one per search or call

    @property
    def latency_ms(self) -> dict[str, float | None]:
        return percentiles(self.latency)


@dataclass(kw_only=True)
class BackendTraffic(Timed):
    """The searches one backend answered: how many, how sure, and how fast."""

    backend: str
    searches: int = 0
    withheld: int = 0
    low: int = 0
    degraded: int = 0

    @property
    def withheld_share(self) -> float | None:
        return _share(self.withheld, self.searches)

    @property
    def low_share(self) -> float | None:
        return _share(self.low, self.searches)


@dataclass(kw_only=True)
class ServerTraffic(Timed):
    """One managed server's part in the searches (answers listing its tools) and in the calls that followed."""

    server: Server
    listed: int = 0  # searches whose answer listed one of its tools
    first: int = 0  # ... as the best match
    listed_low: int = 0  # ... in a low-confidence answer
    after_search: Counter = field(default_factory=Counter)  # calls linked to a search, by outcome
    calls: int = 0  # every call of its tools (the audit trail)
    failed: int = 0

    @property
    def low_share(self) -> float | None:
        return _share(self.listed_low, self.listed)

    @property
    def called_after_search(self) -> int:
        return sum(self.after_search.values())

    @property
    def after_search_shown(self) -> str:
        """How those calls ended, in words: "2 succeeded, 1 waiting for approval"."""
        labels = dict(SearchOutcomeKind.choices)
        return ", ".join(f"{n} {labels.get(kind, kind).lower()}" for kind, n in self.after_search.most_common())


@dataclass
class SearchTraffic:
    searches: int
    latency_ms: dict[str, float | None]
    backends: list[BackendTraffic]
    empty: list[tuple[str, int]]  # (reason's label, count) of answers with no tool, most first
    servers: list[ServerTraffic]
    fallbacks: list[tuple[str, int]] | None  # (kind's label, count); None: install-wide, not this person's to read
    truncated: bool  # more searches or calls than MAX_ROWS in the window: the figures are of the newest


def search_traffic_for(*, user, since: datetime) -> SearchTraffic:
    """The searches and calls since ``since`` that ``user`` may read, counted per backend and per managed server."""
    logged, audit = QueryLogEntry.objects.all(), None
    if not user.is_superuser:
        logged = query_log_visible_to(user=user)
        audit = audit_events_visible_to(principal=principal_for_user(user))
    managed = {server.slug: server for server in Server.objects.filter(servers_visible_to_operator(user=user))}
    rows = logged.filter(created_at__gte=since).order_by("-created_at", "-id")  # one newest MAX_ROWS for every read
    backends: dict[str, BackendTraffic] = {}
    servers = {slug: ServerTraffic(server=server) for slug, server in managed.items()}
    empty: Counter = Counter()
    latency: list[float] = []
    # One row past the bound says whether any were left out (a window of exactly MAX_ROWS is whole).
    read = rows.values_list("backend", "confidence", "degraded", "latency_ms", "empty_reason", "results")
    count = 0
    for backend, confidence, degraded, latency_ms, empty_reason, results in read[: MAX_ROWS + 1]:
        count += 1
        if count > MAX_ROWS:
            break
        name = backend or UNRECORDED_BACKEND
        row = backends.setdefault(name, BackendTraffic(backend=name))
        row.searches += 1
        row.withheld += confidence == "none"
        row.low += confidence == "low"
        row.degraded += bool(degraded)
        row.latency.append(latency_ms)
        latency.append(latency_ms)
        if not results:
            empty[empty_reason or EmptyAnswerReason.WITHHELD] += 1
        _count_listed(servers, results, low=confidence == "low")
    _count_outcomes(servers, rows, managed)
    calls_truncated = _count_calls(servers, audit, since)
    labels = dict(EmptyAnswerReason.choices)
    return SearchTraffic(
        searches=min(count, MAX_ROWS),
        latency_ms=percentiles(latency),
        backends=sorted(backends.values(), key=lambda row: -row.searches),
        empty=[(labels.get(reason, reason), n) for reason, n in empty.most_common()],
        servers=sorted(servers.values(), key=lambda row: (-row.listed, -row.calls, row.server.slug)),
        fallbacks=_fallbacks(user, since),
        truncated=count > MAX_ROWS or calls_truncated,
    )


def _count_listed(servers: dict[str, ServerTraffic], results: list, *, low: bool) -> None:
    """Credit each server once per answer that listed its tools (``results`` is the log's, best first)."""
    seen = set()
    for rank, result in enumerate(results if isinstance(results, list) else []):
        slug = str(result.get("tool_id", "")).split("::", 1)[0] if isinstance(result, dict) else ""
        if slug in servers and slug not in seen:
            seen.add(slug)
            servers[slug].listed += 1
            servers[slug].first += rank == 0
            servers[slug].listed_low += low


def _count_outcomes(servers: dict[str, ServerTraffic], rows: QuerySet, managed: dict[str, Server]) -> None:
    """How the calls the gateway linked to these searches ended, per server of the tool called: of the newest
    ``MAX_ROWS``, those the other figures count (past them, a server was "called after a search" more often than any
    search read listed it, redteam60)."""
    by_pk = {server.pk: server.slug for server in managed.values()}
    outcomes = (
        SearchOutcome.objects.filter(entry__in=rows.values("pk")[:MAX_ROWS], tool__server_id__in=list(by_pk))
        .values_list("tool__server_id", "outcome")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for server_id, outcome, n in outcomes:
        servers[by_pk[server_id]].after_search[outcome] += n


def _count_calls(servers: dict[str, ServerTraffic], audit: QuerySet | None, since: datetime) -> bool:
    """Every call of the servers' tools in the audit trail: how many, failed, and their duration. Returns whether
    more calls than MAX_ROWS were made (the figures are then of the newest)."""
    from governance.models import AuditEvent

    events = (audit if audit is not None else AuditEvent.objects.all()).filter(
        event_type="execution", created_at__gte=since
    )
    read = events.order_by("-created_at").values_list("tool_ref", "outcome", "payload")[: MAX_ROWS + 1]
    count = 0
    for tool_ref, outcome, payload in read:
        count += 1
        if count > MAX_ROWS:
            break
        row = servers.get((tool_ref or "").split("::", 1)[0])
        if row is None:
            continue
        row.calls += 1
        row.failed += outcome in ("error", "unknown")
        if isinstance(payload, dict) and isinstance(payload.get("duration_ms"), int | float):
            row.latency.append(float(payload["duration_ms"]))
    return count > MAX_ROWS


def _fallbacks(user, since: datetime) -> list[tuple[str, int]] | None:
    """How often search fell back (model down, index not ready) since ``since``, by kind: the index is the whole
    install's, read by those who may read install-wide figures (``install_wide_visible_to``)."""
    if not install_wide_visible_to(user=user):
        return None
    labels = dict(SearchEventKind.choices)
    counts = SearchEvent.objects.filter(created_at__gte=since).values_list("kind").annotate(n=Count("pk")).order_by()
    return sorted(((labels.get(kind, kind), n) for kind, n in counts), key=lambda pair: -pair[1])
