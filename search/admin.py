"""Search in the admin: index generations and fallback events, read-only (operators' view).

The curator preview (``search.preview``) is mounted at ``/admin/search/preview/`` by scoutsite/urls.py;
the generations list links to it (templates/admin/search/indexgeneration/change_list.html), and so does
every Tool page (templates/admin/catalog/tool/change_form.html). The approver inbox is governance's, re-registered
here so its decide page shows the request the agent searched with (``ApprovalRequestAdmin.asked``).
"""

import json
from dataclasses import replace

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Exists, OuterRef, QuerySet, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.text import Truncator

from catalog.admin.display import compact_time
from catalog.admin.history import tool_history_note
from catalog.admin.lookups import StrictLookupsMixin
from catalog.admin.progress import ProgressAdminMixin
from catalog.admin.readonly import ReadOnlyMixin, fields_shown
from catalog.admin.titles import TitledAdminMixin
from catalog.models import Server, Tool, ToolExample
from catalog.progress import progress_snapshot
from governance.admin.access import ToolAdmin as GovernanceToolAdmin
from governance.admin.approvals import ApprovalRequestAdmin as GovernanceApprovalRequestAdmin
from governance.admin.common import PageBoundSearchMixin, admin_urls_for, breakable_id
from governance.models import ApprovalRequest
from governance.sanitize import reveal_deceptive
from governance.selectors import (
    install_wide_visible_to,
    person_shown,
    person_visible_to,
    servers_shaped_by,
    servers_visible_to_operator,
)

from .backends import BACKENDS
from .choices import GenerationKind, GenerationStatus, LearnedStatus
from .models import IndexGeneration, LearnedRequest, QueryLogEntry, SearchEvent
from .selectors import learned_to_decide
from .usage import (
    AskedSearches,
    approval_request_asked,
    learned_request_promote,
    learned_request_reject,
    query_log_visible_to,
)


class ReadOnlyAdmin(ReadOnlyMixin, TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin):
    """Rows written by search itself; nobody edits them by hand."""

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return super().has_view_permission(request, obj) and self.readable_by(request)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return super().has_module_permission(request) and self.readable_by(request)

    def readable_by(self, request: HttpRequest) -> bool:
        return True


class InstallWideAdmin(ReadOnlyAdmin):
    """The index's own rows count and name tools across every tenant: read by those who may see the whole
    install (``install_wide_visible_to``), not by one tenant's curator."""

    def readable_by(self, request: HttpRequest) -> bool:
        return install_wide_visible_to(user=request.user)


TOOLS_REINDEXED_SHOWN = 50  # a generation's page names this many of the tools it reindexed, then counts the rest


@admin.register(IndexGeneration)
class IndexGenerationAdmin(ProgressAdminMixin, InstallWideAdmin, admin.ModelAdmin[IndexGeneration]):
    # When each build started comes second, the date over the time: last and on one line, it was scrolled out of
    # view at 1280 px (the sync runs and tool revisions show theirs the same way).
    list_display = ("id", "when", "kind", "status", "model_key", "tool_count", "encoded", "reused", "degraded_column")
    list_filter = ("kind", "status", "degraded")
    list_title = "Index generations — each build of the search index, full or incremental"
    # A build in words: whether it ran degraded as "no" (Django's red cross on every build read as ten errors), the
    # tools it reindexed by name, not "Tool pks: [1, 10]"; the progress line says the texts encoded, the title its id.
    readonly_fields = [
        "progress_panel",
        *fields_shown(
            IndexGeneration,
            {
                "id": [],
                "degraded": ["degraded_answer"],
                "tool_pks": ["tools_reindexed"],
                "progress_done": [],
                "progress_total": [],
            },
        ),  # fmt: skip
    ]
    fields = readonly_fields

    def get_object(self, request: HttpRequest, object_id: str, from_field=None):
        generation = super().get_object(request, object_id, from_field)
        if generation is not None:
            generation.reader = request  # whose page it is: ``tools_reindexed`` links the tools they may open
        return generation

    @admin.display(description="started", ordering="started_at")
    def when(self, generation: IndexGeneration) -> str:
        return compact_time(generation.started_at)

    @admin.display(description="degraded", ordering="degraded", empty_value="")
    def degraded_column(self, generation: IndexGeneration) -> str:
        return "degraded" if generation.degraded else ""  # said where it was; a full build is the normal case

    @admin.display(description="degraded")
    def degraded_answer(self, generation: IndexGeneration) -> str:
        if generation.degraded:
            return "yes: the model was unavailable, so no new vectors were computed"
        return "no"

    @admin.display(description="tools reindexed")
    def tools_reindexed(self, generation: IndexGeneration) -> str:
        """The tools an incremental build reindexed (changed, added or removed), each linked where the reader may open
        it; a full rebuild's are every tool."""
        if generation.tool_pks is None:
            if generation.kind == GenerationKind.FULL:
                return "every tool (a full rebuild)"
            return "—" if generation.status == GenerationStatus.BUILDING else "not recorded"
        found = list(Tool.objects.filter(pk__in=generation.tool_pks[:TOOLS_REINDEXED_SHOWN]).order_by("tool_id"))
        # Named only where the reader may open the tool (its admin's permission and rows): the others are counted.
        urls = admin_urls_for(generation.reader, found) if hasattr(generation, "reader") else {}
        tools = [tool for tool in found if tool in urls]
        gone = min(len(generation.tool_pks), TOOLS_REINDEXED_SHOWN) - len(found)
        more = len(generation.tool_pks) - TOOLS_REINDEXED_SHOWN
        parts = [format_html('<a href="{}">{}</a>', urls[tool], tool.tool_id) for tool in tools]
        if len(found) > len(tools):
            parts.append(f"{len(found) - len(tools)} you may not open")
        if gone > 0:
            parts.append(f"{gone} no longer in the catalog")
        return format_html(
            "{}{}", format_html_join(", ", "{}", ((part,) for part in parts)), f" and {more} more" if more > 0 else ""
        )

    def object_title(self, request: HttpRequest, obj: IndexGeneration) -> str:
        return f"Index generation {obj.pk} ({obj.get_kind_display().lower()}, {obj.get_status_display().lower()})"

    def progress_snapshot_for(self, obj: IndexGeneration) -> dict:
        running = obj.status == GenerationStatus.BUILDING
        return progress_snapshot(
            obj,
            running=running,
            stage="encoding" if obj.progress_total else "loading tools",
            unit="texts",
            error=obj.error,
        )


@admin.register(SearchEvent)
class SearchEventAdmin(InstallWideAdmin, admin.ModelAdmin[SearchEvent]):
    list_display = ("created_at", "kind", "detail_short")
    list_filter = ("kind",)
    list_title = "Search events — each time search fell back (model down, index not ready, …)"
    search_fields = ("detail",)
    readonly_fields = ("created_at", "kind", "detail")
    date_hierarchy = "created_at"

    def object_title(self, request: HttpRequest, obj: SearchEvent) -> str:
        return f"Search event: {obj.get_kind_display()}, {timezone.localtime(obj.created_at):%Y-%m-%d %H:%M:%S}"

    @admin.display(description="detail")
    def detail_short(self, obj: SearchEvent) -> str:
        return obj.detail[:120]


class KnownValuesFilter(admin.SimpleListFilter):
    """A text column whose values are a known few (``values``), offered as they are: Django's filter of such a column
    reads its choices from every row (a SELECT DISTINCT over the whole log on each visit, 60 ms at 100k searches)."""

    values: tuple[str, ...] = ()

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(value, value) for value in self.values]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(**{self.parameter_name: self.value()}) if self.value() else queryset


class BackendFilter(KnownValuesFilter):
    title = parameter_name = "backend"
    values = tuple(sorted(BACKENDS))


class ClientFilter(KnownValuesFilter):
    title = parameter_name = "client"
    values = ("mcp", "api")  # tool_search over /mcp, POST /api/v1/search/ (mcpgateway's gateway_search callers)


class ReturnedToolFilter(admin.SimpleListFilter):
    """The searches that returned one tool (``?returned=<tool id>``, linked from the tool's page). Offers no list
    of tools to pick from: a catalog may hold thousands."""

    title = "returned tool"
    parameter_name = "returned"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(self.value(), self.value())] if self.value() else []

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if not self.value():
            return queryset
        # The logged results as JSON text holding the quoted tool id: the same on SQLite and PostgreSQL, where JSON
        # lookups into a list of objects differ.
        text = Cast("results", TextField())
        return queryset.annotate(results_text=text).filter(results_text__contains=json.dumps(self.value()))


@admin.register(QueryLogEntry)
class QueryLogEntryAdmin(PageBoundSearchMixin, ReadOnlyAdmin, admin.ModelAdmin[QueryLogEntry]):
    """Clients' searches (SCOUT_QUERY_LOG); the workbench groups the ones that need a curator."""

    # Short cells (time over two lines, latency with its unit, "degraded" only when it was): every column in view
    # beside both sidebars at 1280 px (the backend is a filter and on the entry's page).
    list_display = ("when", "query_short", "confidence", "returned", "degraded_column", "latency", "asker")
    list_display_links = ("when",)
    # When, as the audit trail offers it (today, past 7 days, ...): a date hierarchy read the first and last time and
    # every year of the whole search on each visit (two scans of 100k searches that all matched, 0.2 s).
    list_filter = (
        "confidence",
        "degraded",
        BackendFilter,
        ClientFilter,
        ReturnedToolFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("query",)
    # Who asked is read masked, the keys not at all: no lookups (Z12). A token reference groups one person's searches.
    hidden_lookups = ("user", "principal_key", "token_ref")
    show_full_result_count = False
    list_max_show_all = 100  # a search is counted only up to its page: "Show all" could be every search of the log
    # Who asked is named only where the reader may see them: a tenant-less token's search is shared, its person
    # may be another tenant's (Z12). The principal key (user id, token, agent name) is for linking, never shown.
    # The returned tools as a ranked table (each linked where the reader may open it, with the calls that followed),
    # not the logged JSON.
    readonly_fields = fields_shown(
        QueryLogEntry,
        {
            "principal_key": [],
            "user": ["asker"],
            "token_ref": ["token"],
            # What the agent called next, beside the returned tools: one found by rephrasing is "not called" there.
            "results": ["ranked_tools", "then_called"],
            "degraded": ["degraded_answer"],
            # Its unit in the value ("80 ms"), not "Latency ms: 79.66"; the row id is the page's address, not a fact
            # about the search; why nothing was returned is said in the returned tools' place ("none: …").
            "latency_ms": ["latency"],
            "id": [],
            "empty_reason": [],
        },
    )
    fields = readonly_fields
    change_form_template = "admin/search/querylogentry/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[QueryLogEntry]:
        visible = query_log_visible_to(user=request.user)  # other tenants' requests are theirs (Z12)
        return visible.annotate(
            asker=person_shown(viewer=request.user, field="user", name="user__username"),
            asker_visible=person_visible_to(viewer=request.user, field="user", empty=True),
        )

    list_title = "Query log — what agents searched for (the search workbench groups those that need a curator)"

    def object_title(self, request: HttpRequest, obj: QueryLogEntry) -> str:
        return f"Search “{Truncator(obj.query).chars(80)}”"

    def get_object(self, request: HttpRequest, object_id: str, from_field=None):
        entry = super().get_object(request, object_id, from_field)
        if entry is not None:
            entry.reader = request  # whose page it is: ``ranked_tools`` links only the tools they may open
        return entry

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        context["entry_links"] = self._next_steps(request, obj) if obj is not None else []
        return super().render_change_form(request, context, add, change, form_url, obj)

    def _next_steps(self, request: HttpRequest, entry: QueryLogEntry) -> list[tuple[str, str, str]]:
        """(label, url, id): where a curator acts on this search, each for who may open it: the preview ranks it
        now; a search that needs a curator (withheld, low confidence, not followed) is attached in the workbench."""
        from .preview import PREVIEW_PERMISSION
        from .workbench import WORKBENCH_PERMISSIONS, workbench_reason

        if not entry.query:  # the log kept no words (SCOUT_QUERY_LOG off)
            return []
        links = []
        if request.user.has_perm(PREVIEW_PERMISSION):
            query = urlencode({"query": entry.query, "top_k": 10, "scope": "every"})
            links.append(("Try it in the preview", f"{reverse('search_preview')}?{query}", "entry-preview"))
        reason = workbench_reason(entry, user=request.user)
        if reason and request.user.has_perms(WORKBENCH_PERMISSIONS):
            url = f"{reverse('search_workbench')}?{urlencode({'reason': reason})}"
            links.append(("Attach it to a tool in the workbench", url, "entry-workbench"))
        return links

    @admin.display(description="tools returned, best first")
    def ranked_tools(self, obj: QueryLogEntry) -> str:
        """Each returned tool with its rank and score, linked to its page, and what became of it: the calls of it
        that followed this search (``SearchOutcome``), or none; for a tool the reader may not open, neither."""
        if not obj.results:
            return format_html("— (none{})", f": {obj.get_empty_reason_display().lower()}" if obj.empty_reason else "")
        tool_ids = [result.get("tool_id", "") for result in obj.results]
        tools = {tool.tool_id: tool for tool in Tool.objects.filter(tool_id__in=tool_ids).select_related("server")}
        urls = admin_urls_for(obj.reader, tools.values()) if hasattr(obj, "reader") else {}  # one query for all
        calls: dict[int, list[str]] = {}
        for outcome in obj.outcomes.order_by("created_at", "id"):
            calls.setdefault(outcome.tool_id, []).append(outcome.get_outcome_display())
        rows = []
        for rank, result in enumerate(obj.results, start=1):
            tool_id, tool = result.get("tool_id", ""), tools.get(result.get("tool_id", ""))
            url = urls.get(tool)
            name = format_html('<a class="tool-link" href="{}">{}</a>', url, tool_id) if url else tool_id
            # How its calls ended only where the reader may open the tool: not another tenant's tool's (Z12).
            called = calls.get(tool.pk, []) if url else []
            outcome = (f"called: {', '.join(called)}" if called else "not called") if url else "—"
            state = ("called" if called else "not-called") if url else "not-shown"
            rows.append((rank, name, f"{result.get('score', 0):.3f}", state, outcome))
        body = format_html_join(
            "", '<tr class="ranked-tool"><td>{}</td><td>{}</td><td>{}</td><td class="{}">{}</td></tr>', rows
        )
        # The logged score is the calibrated fit, not what ordered the rows (the rank score, which also weighs the
        # words, the operation and the server): a lower fit above a higher one is no error, and the table says so.
        return format_html(
            '<table id="ranked-tools"><tr><th>rank</th><th>tool</th><th>fit</th><th>what followed</th></tr>'
            '{}</table><div class="help" id="ranked-tools-help">In the order the gateway returned them. Fit is each '
            "tool's calibrated relevance (0 to 1), which the confidence comes from; the order also weighs the words, "
            "the operation and the server (the search preview shows each part).</div>",
            body,
        )

    @admin.display(description="what the agent called next")
    def then_called(self, obj: QueryLogEntry) -> str:
        """The tool the same caller called next, from this search or from its next one, its rephrasing
        (``search_then_called``): only a tool the reader may manage, linked where they may open it."""
        from .workbench import search_then_called

        reader = getattr(obj, "reader", None)
        if reader is None:
            return "—"
        calls = search_then_called(obj, user=reader.user)
        if not calls:
            return "— (no call of a tool you manage followed it, nor its next search)"
        urls = admin_urls_for(reader, Tool.objects.filter(tool_id__in=[call.tool_id for call in calls]))
        urls = {tool.tool_id: url for tool, url in urls.items()}
        return format_html_join(
            "",
            '<div class="then-called">{}: {}{}</div>',
            (
                (
                    format_html('<a class="then-called-tool" href="{}">{}</a>', urls[call.tool_id], call.tool_id)
                    if urls.get(call.tool_id)
                    else call.tool_id,
                    call.outcomes_shown,
                    format_html(", after searching “{}”", call.after) if call.after else "",
                )
                for call in calls
            ),
        )

    @admin.display(description="when", ordering="created_at")
    def when(self, obj: QueryLogEntry) -> str:
        return compact_time(obj.created_at)

    @admin.display(description="degraded")
    def degraded_answer(self, obj: QueryLogEntry) -> str:
        # In words, not Django's red cross: a search that ran in full is the normal case, not an error.
        return "yes: ranked by words only (the meaning model or the index was unavailable)" if obj.degraded else "no"

    @admin.display(description="degraded", ordering="degraded")
    def degraded_column(self, obj: QueryLogEntry) -> str:
        # Not Django's red cross for "no": a search that was not degraded is the normal case, not an error.
        return "degraded" if obj.degraded else ""

    @admin.display(description="latency", ordering="latency_ms")
    def latency(self, obj: QueryLogEntry) -> str:
        return f"{obj.latency_ms:.0f} ms"

    @admin.display(description="user", ordering="asker")
    def asker(self, obj: QueryLogEntry) -> str:
        return obj.asker or "-"

    @admin.display(description="token")
    def token(self, obj: QueryLogEntry) -> str:
        return (obj.token_ref if obj.asker_visible else "") or "-"  # a masked person's token is named nowhere (Z12)

    @admin.display(description="request")
    def query_short(self, obj: QueryLogEntry) -> str:
        return obj.query[:120]

    @admin.display(description="returned")
    def returned(self, obj: QueryLogEntry) -> int:
        return len(obj.results)


LEARNED_ON_TOOL_PAGE = 10  # the tool's page lists this many waiting learned requests, then links the rest
FROM_TOOL_PAGE = "_from_tool"  # a learned request opened from its tool's page: decided, back to that page
SHARED_LEARNED_NOTE = "This tool's server is shared by every tenant: a superuser promotes or rejects what it learned."


class ToDecideFilter(admin.SimpleListFilter):
    """The learned requests a curator is asked to decide (``learned_to_decide``): the home page's and the tool page's
    "to decide" counts lead here and count these same rows. "Learned" alone also lists those whose words are already
    an example request of their tool, so the home's 1 opened a list of 2 (adminux32)."""

    title = "decision"
    parameter_name = "to_decide"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("yes", "To decide (not already an example request)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return learned_to_decide(queryset) if self.value() == "yes" else queryset


@admin.register(LearnedRequest)
class LearnedRequestAdmin(TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin[LearnedRequest]):
    """Requests that led to successful calls. Promote one to a curated example request, or reject it (it is
    then never learned again for that tool). Only curators see these texts: they are other users' words."""

    list_display = ("text", "tool_link", "callers", "calls", "status_column", "last_seen")
    list_filter = (ToDecideFilter, "status")
    search_fields = ("text", "tool__tool_id")
    list_select_related = ("tool",)
    # What a curator decides on first; the key (a hash) and the row id say nothing to them.
    # Who decided is named only where the reader may see them (``decider``), as the query log names who asked: a
    # curator since moved to another tenant is not named to this one's curators (Z12), nor found by id in a lookup.
    fields = ("text", "tool", "status", "principal_count", "confirmations", "last_seen", "first_seen", "decider",
              "in_search")  # fmt: skip
    hidden_lookups = ("decided_by",)
    readonly_fields = fields
    actions = ["promote", "reject"]
    change_form_template = "admin/search/learnedrequest/change_form.html"  # promote / reject buttons

    def get_queryset(self, request: HttpRequest) -> QuerySet[LearnedRequest]:
        # Learned on the servers this curator may manage only (Z12: learning stays inside one tenant's space).
        managed = Server.objects.filter(servers_visible_to_operator(user=request.user)).values("pk")
        shown = person_shown(viewer=request.user, field="decided_by", name="decided_by__username")
        # Words a curator already made an example request of the tool: nothing left to decide (its status says so).
        curated = ToolExample.objects.filter(tool=OuterRef("tool"), text__iexact=OuterRef("text"))
        queryset = super().get_queryset(request).filter(tool__server__in=managed)
        return queryset.annotate(decider=shown, already_example=Exists(curated))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    list_title = "Learned requests — promote the right ones to example requests, reject the wrong ones"

    def changelist_view(self, request: HttpRequest, extra_context=None):
        # An empty list says how requests come to be learned, or that learning is off here.
        return super().changelist_view(request, {"learning": settings.SCOUT_LEARNING, **(extra_context or {})})

    def object_title(self, request: HttpRequest, obj: LearnedRequest) -> str:
        return f"Learned request for {obj.tool.tool_id}"

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None):
        # Every field is read-only: the page is where one learned request is read and decided, not edited.
        learned = self.get_object(request, object_id)
        if learned is not None:
            may_change = self.has_change_permission(request, learned)
            curatable = self._shaped(request).filter(pk=learned.tool.server_id).exists()
            extra_context = {
                "subtitle": learned.text,
                "hide_history": True,  # a decision is written on its tool's history (``log_change``), never here
                "breadcrumb": str(learned),  # its words (the heading names its tool), as the curator read it listed
                "may_decide": may_change and curatable,
                "shared_note": "" if curatable else SHARED_LEARNED_NOTE,
                "show_save": False,
                "show_save_and_continue": False,
                "show_save_and_add_another": False,
                **(extra_context or {}),
            }
        if request.GET.get(FROM_TOOL_PAGE):  # the form posts to the filters Django keeps, with this mark
            form_url = f"?{urlencode({FROM_TOOL_PAGE: 1})}"
        return super().change_view(request, object_id, form_url, extra_context)

    def save_model(self, request: HttpRequest, obj: LearnedRequest, form, change: bool) -> None:
        # Nothing to save from the form (all read-only); a full save could undo a concurrent confirmation.
        pass

    def log_change(self, request: HttpRequest, obj: LearnedRequest, message) -> None:
        # The page saves nothing ("No fields changed."): a decision is written on its tool's history instead.
        return None

    def response_change(self, request: HttpRequest, obj: LearnedRequest):
        if "_promote" in request.POST or "_reject" in request.POST:
            rows = LearnedRequest.objects.filter(pk=obj.pk)
            if "_promote" in request.POST:
                self.promote(request, rows)
            else:
                self.reject(request, rows)
            # Back to where it was opened from, where the next one is: the tool's page (its list of what waits), the
            # list (the home's "to decide", a search); opened by its address, to what the tool learned.
            if request.GET.get(FROM_TOOL_PAGE):
                tool_page = reverse("admin:catalog_tool_change", args=[obj.tool_id])
                return HttpResponseRedirect(f"{tool_page}#tool-learned-waiting")
            url = reverse("admin:search_learnedrequest_changelist")
            came_from = request.GET.get("_changelist_filters")
            return HttpResponseRedirect(f"{url}?{came_from or f'tool__id__exact={obj.tool_id}'}")
        return super().response_change(request, obj)

    def _shaped(self, request: HttpRequest) -> QuerySet[Server]:
        return Server.objects.filter(servers_shaped_by(user=request.user))

    @admin.display(description="tool", ordering="tool__tool_id")
    def tool_link(self, obj: LearnedRequest) -> str:
        # The tool's page, to read what it does before promoting words to it (rows are of tools the curator manages).
        url = reverse("admin:catalog_tool_change", args=[obj.tool_id])
        return format_html('<a href="{}">{}</a>', url, breakable_id(obj.tool.tool_id))

    @admin.display(description="status", ordering="status")
    def status_column(self, obj: LearnedRequest) -> str:
        if obj.status == LearnedStatus.LEARNED and getattr(obj, "already_example", False):
            return format_html('{} <span class="quiet">· already an example request</span>', obj.get_status_display())
        return obj.get_status_display()

    @admin.display(description="decided by")
    def decider(self, obj: LearnedRequest) -> str:
        return obj.decider or "-"

    @admin.display(description="in search")
    def in_search(self, obj: LearnedRequest) -> str:
        # One answer for a curator, not a red cross over "its current weight is in the search index" and a timestamp.
        if obj.indexed:
            return "yes: searches use its current weight"
        since = f" since {timezone.localtime(obj.pending_since):%Y-%m-%d %H:%M}" if obj.pending_since else ""
        return (
            f"waiting for the next index update{since} (learned requests' changes are batched, "
            f"{settings.SCOUT_LEARNED_INDEX_INTERVAL} s at most)"
        )

    @admin.display(description="callers", ordering="principal_count")
    def callers(self, obj: LearnedRequest) -> int:
        return obj.principal_count

    @admin.display(description="successful calls", ordering="confirmations")
    def calls(self, obj: LearnedRequest) -> int:
        return obj.confirmations

    def _curatable(self, request: HttpRequest, queryset: QuerySet[LearnedRequest]) -> QuerySet[LearnedRequest]:
        """Rows of tools the curator may curate: a shared server's are every tenant's, curated by a superuser
        (``servers_shaped_by``); the others are named in a message and left as they are."""
        shaped = self._shaped(request).values("pk")
        kept = queryset.exclude(tool__server__in=shaped)
        if kept.exists():
            names = ", ".join(sorted({row.tool.tool_id for row in kept.select_related("tool")}))
            self.message_user(request, f"Left as they are (a server every tenant shares: a superuser's): {names}.")
        return queryset.filter(tool__server__in=shaped)

    @admin.action(description="Promote to curated example requests", permissions=["change"])
    def promote(self, request: HttpRequest, queryset: QuerySet[LearnedRequest]) -> None:
        rows = list(self._curatable(request, queryset).exclude(status=LearnedStatus.PROMOTED).select_related("tool"))
        for learned in rows:
            learned_request_promote(learned=learned, actor=request.user)
            tool_history_note(
                user=request.user, tool=learned.tool, message=f"Promoted learned request “{learned.text}” to an example"
            )
        self.message_user(
            request, f"{len(rows)} promoted to example requests; the tools are reindexed.", messages.SUCCESS
        )

    @admin.action(description="Reject (never learn again for this tool)", permissions=["change"])
    def reject(self, request: HttpRequest, queryset: QuerySet[LearnedRequest]) -> None:
        rows = list(self._curatable(request, queryset).exclude(status=LearnedStatus.REJECTED).select_related("tool"))
        for learned in rows:
            learned_request_reject(learned=learned, actor=request.user)
            # Without its words: a rejected request's text is blanked once the query log would no longer keep it
            # (``learned_requests_expire``), and the tool's history is kept for good.
            tool_history_note(user=request.user, tool=learned.tool, message="Rejected a learned request")
        self.message_user(request, f"{len(rows)} rejected.", messages.SUCCESS)


class ApprovalRequestAdmin(GovernanceApprovalRequestAdmin):
    """The approver's decide page with what the agent was asked, where the query log linked the call to a search:
    governance keeps no query log, and imports nothing from search (dependencies point search -> governance), so
    search re-registers the inbox, as governance does the catalog's server admin."""

    def asked(self, request: HttpRequest, obj: ApprovalRequest) -> AskedSearches | None:
        # The requester's own words, for those who read who asked: a tenant-less request of another tenant's
        # person names neither them nor what they asked (Z12, ``with_approval_people_shown``).
        asked = approval_request_asked(approval=obj) if obj.requester_visible else None
        if asked is None:
            return None
        # As the arguments beside them: the log keeps what the agent sent, and a right-to-left override or an
        # invisible character in it made the approver read other words than were asked (redteam52).
        return replace(asked, query=reveal_deceptive(asked.query), later=reveal_deceptive(asked.later))


admin.site.unregister(ApprovalRequest)
admin.site.register(ApprovalRequest, ApprovalRequestAdmin)


class ToolAdmin(GovernanceToolAdmin):
    """The tool's page, whose save leads to where the tool's example requests rank now: the curator checks the change
    where agents meet it (the catalog's admin knows no search, so search re-registers it, as the inbox above)."""

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None):
        # What agents' calls taught the tool and no curator has decided yet, on the page where its example requests are
        # curated: behind a bare "Learned requests" button, a wrong one ("order a pizza" for get_current_time) already
        # ranked searches while the page looked like a tool that learned nothing.
        if request.user.has_perm("search.view_learnedrequest") and str(object_id).isdigit():
            learned = self.admin_site.get_model_admin(LearnedRequest).get_queryset(request)
            waiting = learned_to_decide(learned.filter(tool_id=int(object_id)))
            rows = list(waiting[:LEARNED_ON_TOOL_PAGE])
            back = urlencode({"_changelist_filters": f"tool__id__exact={object_id}", FROM_TOOL_PAGE: 1})
            for row in rows:  # decided there, then back here
                row.decide_url = f"{reverse('admin:search_learnedrequest_change', args=[row.pk])}?{back}"
            extra_context = {"learned_waiting": rows, "learned_waiting_count": waiting.count(), **(extra_context or {})}
        return super().change_view(request, object_id, form_url, extra_context)

    def saved_next_step(self, obj: Tool) -> str:
        url = reverse("search_preview_tool", args=[obj.pk])
        return format_html(' <a id="saved-preview" href="{}">See where its example requests rank now</a>.', url)


admin.site.unregister(Tool)
admin.site.register(Tool, ToolAdmin)
