"""The operators' dashboard in the admin: searches and executions over time, latency percentiles, withheld and
low-confidence rates, top tools, failures by server, sync health and pending approvals, for 1 h / 24 h / 7 d and
the curator workbench's 30 days.

Read from the query log and the audit trail (the same events /metrics counts), so it needs no Prometheus.
Charts are drawn by Chart.js, served as a static file by Scout (no CDN).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.http import urlencode

from search.traffic import percentiles, search_traffic_for
from search.workbench import WORKBENCH_DAYS

DASHBOARD_PERMISSION = "catalog.view_server"  # operators (and anyone who may read the server list)
# The pending requests listed (who asked for which tool): what the audit trail tells its readers already.
WAITING_APPROVALS_PERMISSION = "governance.view_auditevent"
SERVERS_NOTE = (
    "Only an Active server's tools reach clients: a Degraded (its last sync failed), Unavailable, Disabled or "
    "Archived server's tools are hidden from search, inspect and execute."
)
MAX_ROWS = 50_000  # rows read per figure: enough for percentiles, bounded for a busy week


@dataclass(frozen=True)
class Window:
    key: str
    label: str
    span: timedelta
    bucket: timedelta


WINDOWS = {
    "1h": Window("1h", "last hour", timedelta(hours=1), timedelta(minutes=5)),
    "24h": Window("24h", "last 24 hours", timedelta(hours=24), timedelta(hours=1)),
    "7d": Window("7d", "last 7 days", timedelta(days=7), timedelta(hours=6)),
    # The curator workbench's window: the withheld and low-confidence searches counted here are those it lists.
    "30d": Window("30d", f"last {WORKBENCH_DAYS} days", timedelta(days=WORKBENCH_DAYS), timedelta(days=1)),
}


def _buckets(window: Window, now: datetime) -> list[datetime]:
    count = int(window.span / window.bucket)
    start = now - window.span
    return [start + window.bucket * i for i in range(count)]


# A bucket's start on the time axis, in the admin's time zone (every other time in the admin is) and on a 24-hour
# clock like them: the browser's locale drew "03:28 PM" beside "2026-12-06 15:27" everywhere else.
_TICK_FORMATS = {"1h": "%H:%M", "24h": "%H:%M", "7d": "%m-%d %H:%M", "30d": "%Y-%m-%d"}


def _tick(window: Window, moment: datetime) -> str:
    return timezone.localtime(moment).strftime(_TICK_FORMATS[window.key])


def _bucket_index(moment: datetime, start: datetime, window: Window, count: int) -> int:
    return min(count - 1, max(0, int((moment - start) / window.bucket)))


def dashboard_figures(*, window: Window, now: datetime | None = None, user=None) -> dict:
    """Every figure of the dashboard for ``window``, as plain JSON-ready data.

    ``user``: whose view (Z12): searches, executions, servers, syncs and approvals that are shared or of the
    person's tenants; without a ``user``, or for a superuser, the whole install."""
    from catalog.models import Server, SyncRun
    from governance.models import AuditEvent
    from governance.principals import principal_for_user
    from governance.selectors import audit_events_visible_to, servers_visible_to_operator
    from search.models import QueryLogEntry
    from search.usage import query_log_visible_to

    servers_q, audit, approvals = Q(), AuditEvent.objects.all(), _approvals_seen_by(user)
    logged = QueryLogEntry.objects.all()
    if user is not None and not user.is_superuser:
        principal = principal_for_user(user)
        servers_q = servers_visible_to_operator(user=user)
        audit = audit_events_visible_to(principal=principal)
        logged = query_log_visible_to(user=user)
    managed = Server.objects.filter(servers_q)
    now = now or timezone.now()
    start = now - window.span
    buckets = _buckets(window, now)
    searches = [0] * len(buckets)
    executions = [0] * len(buckets)
    failures_over_time = [0] * len(buckets)
    search_latency: list[float] = []
    confidence = Counter()
    rows = logged.filter(created_at__gte=start).order_by("-created_at")
    for created, latency, level in rows.values_list("created_at", "latency_ms", "confidence")[:MAX_ROWS]:
        searches[_bucket_index(created, start, window, len(buckets))] += 1
        search_latency.append(latency)
        confidence[level] += 1
    execute_latency: list[float] = []
    tools, failures_by_server = Counter(), Counter()
    events = audit.filter(event_type="execution", created_at__gte=start).order_by("-created_at")
    for created, outcome, tool_ref, payload in events.values_list("created_at", "outcome", "tool_ref", "payload")[
        :MAX_ROWS
    ]:
        index = _bucket_index(created, start, window, len(buckets))
        executions[index] += 1
        if isinstance(payload, dict) and isinstance(payload.get("duration_ms"), int | float):
            execute_latency.append(float(payload["duration_ms"]))
        if tool_ref and outcome == "success":
            tools[tool_ref] += 1
        if outcome in ("error", "unknown"):
            failures_over_time[index] += 1
            failures_by_server[tool_ref.split("::", 1)[0] if tool_ref else "(unknown)"] += 1
    total_searches = sum(confidence.values())
    runs = SyncRun.objects.filter(started_at__gte=start, server__in=managed.values("pk"))
    syncs = Counter(runs.values_list("status", flat=True))
    return {
        "window": window.key,
        "window_label": window.label,  # the bar charts' axis: calls in the last hour
        "labels": [moment.isoformat() for moment in buckets],
        "ticks": [_tick(window, moment) for moment in buckets],
        "time_zone": timezone.get_current_timezone_name(),
        "searches": searches,
        "executions": executions,
        "execution_failures": failures_over_time,
        "search_latency_ms": percentiles(search_latency),
        "execute_latency_ms": percentiles(execute_latency),
        "search_total": total_searches,
        "withheld_rate": round(confidence["none"] / total_searches, 3) if total_searches else None,
        "low_rate": round(confidence["low"] / total_searches, 3) if total_searches else None,
        "top_tools": tools.most_common(10),
        "failures_by_server": failures_by_server.most_common(10),
        "syncs": dict(sorted(syncs.items())),
        "servers": dict(Counter(managed.values_list("status", flat=True))),
        "pending_approvals": _waiting_approval_count(approvals, now),
    }


def _waiting_approval_pks(approvals: QuerySet, now: datetime) -> tuple[list[int], int]:
    """The pks of ``approvals`` that wait for a decision, oldest first: pending, unexpired and still usable
    (``approval_requests_usable``: the approvers' inbox counts the same), and how many other pending ones wait for
    no one (expired, or their requester lost access: an approval could never run). Counted as all pending, the
    tile said 224 waiting, naming the approver, while that approver's inbox said 0 (a year's volume)."""
    from governance.choices import ApprovalStatus
    from governance.selectors import approval_request_groups_usable

    pending = approvals.filter(status=ApprovalStatus.PENDING)
    unexpired = pending.filter(expires_at__gt=now)
    usable = approval_request_groups_usable(requests=unexpired)
    # Judged per asker and tool, then each pending row read as four numbers: a model instance and its requester per
    # row took 3.5-4 s for the superuser at a backlog of 31k (bench/admin_volume.py pending 30000).
    rows = unexpired.order_by("created_at", "pk").values_list("pk", "token_id", "requester_id", "tool_id")
    waiting = [pk for pk, *group in rows if tuple(group) in usable] if usable else []
    return waiting, pending.count() - len(waiting)


def _waiting_approval_count(approvals: QuerySet, now: datetime) -> int:
    """``len(_waiting_approval_pks(approvals, now)[0])`` (the dashboard's tile), without reading each request."""
    from governance.choices import ApprovalStatus
    from governance.selectors import approval_request_groups_usable

    unexpired = approvals.filter(status=ApprovalStatus.PENDING, expires_at__gt=now)
    return sum(approval_request_groups_usable(requests=unexpired).values())


def _approvals_seen_by(user):
    """The approval requests the dashboard counts for ``user``: shared ones and those of their tenants (every one
    without a ``user``, or for a superuser)."""
    from governance.models import ApprovalRequest
    from governance.principals import principal_for_user
    from governance.selectors import tenant_q

    if user is None or user.is_superuser:
        return ApprovalRequest.objects.all()
    return ApprovalRequest.objects.filter(tenant_q(principal_for_user(user), "tenant"))


def dashboard_charts(figures: dict, window: Window) -> list[dict]:
    """Each chart's id and heading, and, when the window holds nothing for it, the sentence shown instead of
    empty axes: what is missing and what would fill it."""
    span = window.label
    latency = figures["search_latency_ms"]["p50"] is not None or figures["execute_latency_ms"]["p50"] is not None
    charts = [
        ("chart-traffic", "Searches and executions", any(figures["searches"]) or any(figures["executions"]),
         f"No searches or tool calls in the {span}. MCP clients' tool_search and execute_tool calls through "
         "Scout fill this chart."),
        ("chart-latency", "Latency (ms): p50 / p95 / p99", latency,
         f"No latency to show for the {span}: it is measured on each search and tool call."),
        ("chart-tools", "Top tools (successful calls)", bool(figures["top_tools"]),
         f"No successful tool calls in the {span}. Each execute_tool call that succeeds counts here."),
        ("chart-failures", "Failed calls by server", bool(figures["failures_by_server"]),
         f"No failed tool calls in the {span}."),
        ("chart-syncs", "Sync runs by status", bool(figures["syncs"]),
         f"No sync runs in the {span}. A server is synced when it is added, on “Sync now” and by "
         "the periodic reconciliation."),
        ("chart-servers", "Servers by status", bool(figures["servers"]),
         "No servers yet. A server registered under Servers → Add shows here with its status."),
    ]  # fmt: skip
    notes = {"chart-servers": SERVERS_NOTE}
    return [
        {"id": id, "title": title, "empty": "" if has_data else empty, "note": notes.get(id, "")}
        for id, title, has_data, empty in charts
    ]


def _window(request: HttpRequest) -> Window:
    return WINDOWS.get(request.GET.get("window", "24h"), WINDOWS["24h"])


def _check(request: HttpRequest) -> None:
    if not request.user.has_perm(DASHBOARD_PERMISSION):
        raise PermissionDenied


def _approvals_url(request: HttpRequest) -> str | None:
    """Where the pending-approvals count leads: the approval inbox for those who may open it (approvers), else
    the list of the requests counted with who may decide each, for readers of the audit trail, which names the
    same requests (operators: a request no one may decide waits for a grant only they give). Curators get the
    number alone: a link to a 403 page would be a dead end."""
    from governance.models import ApprovalRequest

    if admin.site.get_model_admin(ApprovalRequest).has_view_permission(request):
        return reverse("admin:governance_approvalrequest_changelist")
    if request.user.has_perm(WAITING_APPROVALS_PERMISSION):
        return reverse("dashboard_approvals")
    return None


def _query_log_urls(request: HttpRequest, since: datetime) -> dict[str, str]:
    """The searches behind the search tiles (all, withheld, low confidence) in the query log, for those who may
    open it (curators; operators may not: no link to a 403 page)."""
    from search.models import QueryLogEntry

    if not admin.site.get_model_admin(QueryLogEntry).has_view_permission(request):
        return {}
    base = f"{reverse('admin:search_querylogentry_changelist')}?{urlencode({'created_at__gte': since.isoformat()})}"
    return {"searches": base, "withheld": f"{base}&confidence__exact=none", "low": f"{base}&confidence__exact=low"}


def dashboard_view(request: HttpRequest) -> HttpResponse:
    _check(request)
    window = _window(request)
    now = timezone.now()
    figures = dashboard_figures(window=window, now=now, user=request.user)
    context = {
        "approvals_url": _approvals_url(request),
        "log_urls": _query_log_urls(request, now - window.span),
        "searches_url": f"{reverse('dashboard_searches')}?{urlencode({'window': window.key})}",
        **admin.site.each_context(request),
        "title": "Operations dashboard",
        "window": window,
        "windows": WINDOWS.values(),
        "figures": figures,
        "charts": dashboard_charts(figures, window),
        "status_names": _status_names(),
    }
    since = now - window.span
    links = {**_status_links(request, figures, since), **_failure_links(request, figures, since)}
    for chart in context["charts"]:
        chart["links"] = links.get(chart["id"], [])
    return render(request, "admin/dashboard.html", context)


def _status_links(request: HttpRequest, figures: dict, since: datetime) -> dict[str, list[dict]]:
    """Each slice of the two status doughnuts as a link to those runs (of the window) or servers in their list, for
    those who may open it: a red slice said something was wrong and led nowhere, the servers and their errors (and
    what to do, on each server's page) two lists away."""
    from catalog.models import Server, SyncRun

    names = _status_names()
    lists = {
        "chart-syncs": (SyncRun, "syncs", {"started_at__gte": since.isoformat()}),
        "chart-servers": (Server, "servers", {}),
    }
    links = {}
    for chart, (model, figure, narrowed) in lists.items():
        if not admin.site.get_model_admin(model).has_view_permission(request):
            continue
        url = reverse(f"admin:catalog_{model._meta.model_name}_changelist")
        links[chart] = [
            {"label": names.get(status, status), "count": count,
             "url": f"{url}?{urlencode({'status__exact': status, **narrowed})}"}
            for status, count in figures[figure].items()
        ]  # fmt: skip
    return links


def _failure_links(request: HttpRequest, figures: dict, since: datetime) -> dict[str, list[dict]]:
    """Each bar of "Failed calls by server" as a link to those calls (of the window) in the audit trail, for those who
    may read it: the chart said a server's calls were failing and led nowhere, each call's error one search away."""
    from governance.models import AuditEvent

    if not admin.site.get_model_admin(AuditEvent).has_view_permission(request):
        return {}
    url = reverse("admin:governance_auditevent_changelist")
    narrowed = {"event_type__exact": "execution", "outcome__in": "error,unknown", "created_at__gte": since.isoformat()}
    links = []
    for server, count in figures["failures_by_server"]:
        # "(unknown)": calls recorded without a tool (dashboard_figures)
        tool = {"tool_ref__exact": ""} if server == "(unknown)" else {"tool_ref__startswith": f"{server}::"}
        links.append({"label": server, "count": count, "url": f"{url}?{urlencode({**narrowed, **tool})}"})
    return {"chart-failures": links}


def _status_names() -> dict[str, str]:
    """The doughnuts' labels: a server's or sync run's status as its badge names it ("Succeeded", not "success")."""
    from catalog.choices import ServerStatus, SyncStatus

    return {**dict(ServerStatus.choices), **dict(SyncStatus.choices)}


# Rows per page of the waiting approvals: a backlog of thousands would otherwise render (and look up who may decide)
# all at once, seconds per visit at a year's volume (bench/admin_volume.py).
WAITING_PAGE_SIZE = 100


def pending_approvals(request: HttpRequest, pks: list[int]) -> list:
    """The requests ``pks`` (of those the dashboard counts), oldest first, with their people as this person may
    see them."""
    from governance.selectors import with_approval_people_shown

    requests = _approvals_seen_by(request.user).filter(pk__in=pks)
    shown = with_approval_people_shown(requests, viewer=request.user).select_related("tool__server__tenancy")
    return list(shown.order_by("created_at", "pk"))


def pending_approval_rows(request: HttpRequest, requests: list) -> list[dict]:
    """Rows for ``requests`` (of ``pending_approvals``), without their arguments (the approvers' to read): the tool,
    its risk, who asked, until when, and who may decide it, named as this person may see them (Z12: an approver
    this operator may not see is counted, not named)."""
    from catalog.models import Tool
    from governance.admin.common import admin_urls_for
    from governance.models import ApprovalRequest
    from governance.selectors import users_visible_to_operator
    from governance.services.notifications import approvers_for_many

    user = request.user
    tool_urls = admin_urls_for(request, [approval.tool for approval in requests])
    # Who may decide depends on the tool, the requester, the tenant and the token (whoever issued it may not) only:
    # one look-up for each (an agent's repeated calls share one), and one query naming everyone found, not one per row.
    first: dict[tuple, ApprovalRequest] = {}
    for approval in requests:
        first.setdefault((approval.tool_id, approval.requester_id, approval.tenant_id, approval.token_id), approval)
    found = approvers_for_many(requests=list(first.values()))
    deciders = {key: found[approval.pk] for key, approval in first.items()}
    everyone = {person.pk for people in deciders.values() for person in people}
    visible = get_user_model().objects.filter(users_visible_to_operator(user=user)).filter(pk__in=everyone)
    names = dict(visible.values_list("pk", "username"))
    rows = []
    for approval in requests:
        people = deciders[(approval.tool_id, approval.requester_id, approval.tenant_id, approval.token_id)]
        named = sorted(names[person.pk] for person in people if person.pk in names)
        tool: Tool = approval.tool
        rows.append({
            "approval": approval,
            "tool_url": tool_urls.get(tool),
            "server_url": reverse("admin:catalog_server_change", args=[tool.server_id]),
            "deciders": named,
            "unnamed": len(people) - len(named),
        })  # fmt: skip
    return rows


def dashboard_approvals_view(request: HttpRequest) -> HttpResponse:
    """The dashboard's pending approvals, one row each: what waits, since when, and whether anyone may decide it."""
    _check(request)
    if not request.user.has_perm(WAITING_APPROVALS_PERMISSION):
        raise PermissionDenied
    now = timezone.now()
    waiting, waiting_for_no_one = _waiting_approval_pks(_approvals_seen_by(request.user), now)
    page = Paginator(waiting, WAITING_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        **admin.site.each_context(request),
        "title": "Approvals waiting",
        "rows": pending_approval_rows(request, pending_approvals(request, list(page.object_list))),
        "page": page,
        "waiting_for_no_one": waiting_for_no_one,
    }
    return render(request, "admin/dashboard_approvals.html", context)


def dashboard_searches_view(request: HttpRequest) -> HttpResponse:
    """The searches of the window per backend and per server the person manages: counts, latency, withheld and
    low-confidence shares, and the calls that followed (search.traffic). Operators may not read the query log (other
    people's words); this page is how they see what searching costs and returns."""
    _check(request)
    window = _window(request)
    since = timezone.now() - window.span
    context = {
        **admin.site.each_context(request),
        "title": "Searches by backend and server",
        "window": window,
        "windows": WINDOWS.values(),
        "traffic": search_traffic_for(user=request.user, since=since),
        "log_urls": _query_log_urls(request, since),
        "calls_url": _calls_url(request, since),
    }
    return render(request, "admin/dashboard_searches.html", context)


def _calls_url(request: HttpRequest, since: datetime) -> str | None:
    """The window's calls in the audit trail (a server's: add ``tool_ref__startswith``), for those who may read it."""
    from governance.models import AuditEvent

    if not admin.site.get_model_admin(AuditEvent).has_view_permission(request):
        return None
    narrowed = {"event_type__exact": "execution", "created_at__gte": since.isoformat()}
    return f"{reverse('admin:governance_auditevent_changelist')}?{urlencode(narrowed)}"


def dashboard_data_view(request: HttpRequest) -> JsonResponse:
    _check(request)
    return JsonResponse(dashboard_figures(window=_window(request), user=request.user))


def urls() -> list:
    """Mounted by scoutsite/urls.py before ``admin/`` (admin_view: staff login, no cache)."""
    return [
        path("admin/dashboard/", admin.site.admin_view(dashboard_view), name="dashboard"),
        path("admin/dashboard/approvals/", admin.site.admin_view(dashboard_approvals_view), name="dashboard_approvals"),
        # Not under dashboard/: the navigation marks an entry current when its address starts the page's (both were).
        path("admin/searches/", admin.site.admin_view(dashboard_searches_view), name="dashboard_searches"),
        path("admin/dashboard/data.json", admin.site.admin_view(dashboard_data_view), name="dashboard_data"),
    ]
