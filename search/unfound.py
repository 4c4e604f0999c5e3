"""The workbench's "Tools agents did not find": the tools a curator may curate that no logged search returned (cold
start: nothing was ever called, so nothing was learned; bench/NOTES-rank8.md counts 65 of MetaTool's 246 learned
misses of this kind), and those returned but never called.

Read from the same window as the workbench's requests: the newest ``MAX_ENTRIES`` searches that returned a tool in
the last ``WORKBENCH_DAYS`` days, among those the curator may read (``query_log_visible_to``), so the page costs the
same few queries at any volume. It shows no request's words: only the curator's own tools and counts over the
searches they may read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path, reverse
from django.utils.http import urlencode

from catalog.models import Server, Tool
from governance.selectors import servers_shaped_by, tool_discover_granted, tools_servable

from .models import QueryLogEntry, SearchOutcome
from .workbench import MAX_ENTRIES, WORKBENCH_DAYS, _check_permission, _recent

MAX_TOOLS = 100  # tools listed per section; the page says how many more
# Search capture (bench/NOTES-capture.md): a tool returned by at least this share of the scanned searches (and at
# least WIDE_MIN_SEARCHES of them), whose searches' best other matches are on WIDE_SERVERS or more servers, is
# returned across unrelated requests: its text may be written to be found for everything. Listed for review.
# Measured on LiveMCPBench + MCPVerse as served (bench/capture.py): the eight-topic tool is returned by 28-29 of
# 141 searches beside 17-19 servers; the most returned honest tool by 17 beside 12.
WIDE_SHARE = 0.15
WIDE_MIN_SEARCHES = 20
WIDE_SERVERS = 15


@dataclass
class UnfoundTool:
    """A tool of the curator's that the scanned searches did not return (``returned`` 0) or returned uncalled."""

    pk: int
    tool_id: str
    server_id: int
    added: datetime
    returned: int = 0  # times the scanned searches returned it
    server_returned: int = 0  # times they returned any tool of its server
    granted: bool = True  # someone may be shown it; False: no agent can find it, the fix is a grant
    alongside: int = 0  # servers of the best other match in the searches that returned it
    title: str = ""
    server_name: str = ""


@dataclass
class Unfound:
    """The scanned searches (how many, the oldest one's time) and the two lists, cut to ``MAX_TOOLS`` each."""

    scanned: int
    oldest: datetime | None
    curated: int  # tools the user may curate that some client may get
    never_returned: list[UnfoundTool] = field(default_factory=list)
    never_returned_total: int = 0
    never_called: list[UnfoundTool] = field(default_factory=list)
    never_called_total: int = 0
    wide: list[UnfoundTool] = field(default_factory=list)  # returned across unrelated requests (search capture)

    @property
    def few_searches(self) -> bool:
        """Fewer searches read than tools curated: a tool not returned yet may simply not have been asked for, so
        the page says the list is early rather than let it read as 33 of 36 tools unfindable after one search."""
        return self.scanned < self.curated


def _scanned(*, user) -> QuerySet[QueryLogEntry]:
    """The newest ``MAX_ENTRIES`` searches ``user`` may read that returned a tool, in the workbench's window."""
    return _recent(days=WORKBENCH_DAYS, user=user).filter(empty_reason="").order_by("-created_at", "-id")[:MAX_ENTRIES]


def curatable_tools(*, user) -> QuerySet[Tool]:
    """Tools ``user`` may curate (``servers_shaped_by``) that some client may get: a disabled, held or removed tool
    is returned to nobody, whatever its words, so it is no curator's gap here."""
    return tools_servable().filter(server__in=Server.objects.filter(servers_shaped_by(user=user)).values("pk"))


def tools_unfound(*, user) -> Unfound:
    """The tools ``user`` may curate that the scanned searches never returned, those on the servers whose other
    tools they returned most first (the requests meant for such a tool likely went to a sibling: that is where a
    curator's example request or a sibling's negative query helps), then the newest additions, those granted to
    nobody last (marked: no agent can find them, the fix is a grant); those returned but never called, the most
    returned first (agents saw them and passed them over: their words mislead); and those returned across
    unrelated requests (``WIDE_SHARE``: search capture). Four queries whatever the volume."""
    scanned = _scanned(user=user)
    rows = list(scanned.values_list("created_at", "results"))
    returned = Counter(
        result.get("tool_id") for _, results in rows for result in results if isinstance(result, dict)
    )  # fmt: skip
    called = set(SearchOutcome.objects.filter(entry__in=scanned.values("pk")).values_list("tool_id", flat=True))
    curatable = curatable_tools(user=user).annotate(granted=tool_discover_granted())
    tools = [
        UnfoundTool(
            pk=pk, tool_id=tool_id, server_id=server_id, added=added, returned=returned.get(tool_id, 0), granted=granted
        )
        for pk, tool_id, server_id, added, granted in curatable.values_list(
            "pk", "tool_id", "server_id", "first_seen_at", "granted"
        )
    ]
    per_server: Counter[int] = Counter()
    for tool in tools:
        per_server[tool.server_id] += tool.returned
    for tool in tools:
        tool.server_returned = per_server[tool.server_id]
    never_returned = [tool for tool in tools if not tool.returned]
    # Those granted to nobody last: no example request makes an agent find them.
    never_returned.sort(
        key=lambda tool: (not tool.granted, -tool.server_returned, -tool.added.timestamp(), tool.tool_id)
    )
    alongside = alongside_servers([results for _, results in rows])
    for tool in tools:
        tool.alongside = len(alongside.get(tool.tool_id, ()))
    wide_bound = max(WIDE_MIN_SEARCHES, WIDE_SHARE * len(rows))
    wide = [tool for tool in tools if tool.returned >= wide_bound and tool.alongside >= WIDE_SERVERS]
    wide.sort(key=lambda tool: (-tool.returned, tool.tool_id))
    never_called = [tool for tool in tools if tool.returned and tool.pk not in called]
    never_called.sort(key=lambda tool: (-tool.returned, tool.tool_id))
    unfound = Unfound(
        scanned=len(rows),
        oldest=rows[-1][0] if rows else None,
        curated=len(tools),
        never_returned=never_returned[:MAX_TOOLS],
        never_returned_total=len(never_returned),
        never_called=never_called[:MAX_TOOLS],
        never_called_total=len(never_called),
        wide=wide[:MAX_TOOLS],
    )
    _describe([*unfound.never_returned, *unfound.never_called, *unfound.wide])
    return unfound


def alongside_servers(searches: list[list]) -> dict[str, set[str]]:
    """Per tool id, the servers of the best other match in each search that returned it (ids are
    ``server::tool``): one server for a tool returned beside its own kind, many for one returned for everything."""
    servers: dict[str, set[str]] = {}
    for results in searches:
        ids = [result.get("tool_id") for result in results if isinstance(result, dict) and result.get("tool_id")]
        for tool_id in ids:
            other = next((other for other in ids if other != tool_id), None)
            if other is not None:
                servers.setdefault(tool_id, set()).add(other.split("::", 1)[0])
    return servers


def _describe(tools: list[UnfoundTool]) -> None:
    """The listed tools' titles (when other than their names) and servers' names, in one query."""
    shown = Tool.objects.filter(pk__in=[tool.pk for tool in tools]).select_related("server")
    by_pk = {tool.pk: tool for tool in shown.only("title", "upstream_title", "name", "server__name")}
    for tool in tools:
        if tool.pk in by_pk:
            shown = by_pk[tool.pk]
            tool.server_name = shown.server.name
            tool.title = shown.display_title if shown.display_title != shown.name else ""  # its id says the name


def unfound_view(request: HttpRequest) -> HttpResponse:
    """The two lists, each tool with links to its example requests (on its page) and to the preview."""
    _check_permission(request)
    context = {
        **admin.site.each_context(request),
        "opts": QueryLogEntry._meta,
        "title": "Tools agents did not find",
        "days": WORKBENCH_DAYS,
        "max_entries": MAX_ENTRIES,
        "unfound": tools_unfound(user=request.user),
        "wide_share": round(WIDE_SHARE * 100),
        "wide_servers": WIDE_SERVERS,
        "preview_url": reverse("search_preview"),
        # The tool page's example requests are read-only without it: the link then says so.
        "may_add_example": request.user.has_perm("catalog.add_toolexample"),
        "return_query": urlencode({"next": request.get_full_path()}),  # Save on a tool's page comes back here
    }
    return render(request, "admin/search/workbench_tools.html", context)


def urls() -> list:
    """Mounted by scoutsite/urls.py before ``admin/`` (admin_view: staff login, CSRF, no cache)."""
    return [path("admin/search/workbench/tools/", admin.site.admin_view(unfound_view), name="search_workbench_tools")]
