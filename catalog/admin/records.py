"""Sync runs and tool revisions: append-only records, viewable and never edited here."""

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from catalog.advice import sync_failed_next
from catalog.choices import ServerStatus, SyncStatus
from catalog.models import SyncRun, Tool, ToolRevision
from catalog.progress import progress_snapshot
from catalog.urltext import url_paths_cut

from .display import (
    CappedCountPaginator,
    admin_link,
    breakable_column,
    breakable_id,
    compact_time,
    json_block,
    pretty_json,
    render_unified_diff,
    run_status_badge,
    run_tool_counts,
    text_block,
)
from .filters import RevisionServerFilter, ServerFilter
from .lookups import StrictLookupsMixin
from .progress import ProgressAdminMixin
from .readonly import ReadOnlyMixin
from .servers import connection_hidden
from .titles import TitledAdminMixin

RUN_TOOLS_SHOWN = 200


def errors_cut_for(request: HttpRequest) -> Callable[[int], bool]:
    """Whether the reader reads the errors of a server's runs with their URLs cut to the origin, by server pk
    (asked once per server and request): who may not read the server's connection (``connection_hidden``: a shared
    server's, to a tenant's operator), since a run's error repeats its URL's path, where a hosted server's secret
    often is (redteam42; redteam40 cut it on the server's page only)."""
    from catalog.models import Server

    @cache
    def cut(server_pk: int) -> bool:
        return bool(connection_hidden(request, Server.objects.filter(pk=server_pk).first()))

    return cut


def error_shown(run: SyncRun, cut: Callable[[int], bool]) -> str:
    """``run``'s error as the reader of ``cut`` may read it."""
    return url_paths_cut(run.error) if run.server_id and run.error and cut(run.server_id) else run.error


def error_cell(error: str) -> str:
    """A run's error in the list's narrow column."""
    # Wrapped between words, and a path or a setting's name after its / and _: in the narrow column at 800 px it
    # broke anywhere ("SCOUT_UPSTRE|AM_ALL|OWED", "comman|d").
    if not error:  # no line of its own under the row at 800 px (admin.css)
        return mark_safe('<span class="scout-no-error">—</span>')
    return breakable_id((error[:120] + "…") if len(error) > 120 else error, text=True)


# A run not ended yet: its page shows its progress and polls it.
UNDER_WAY = (SyncStatus.QUEUED, SyncStatus.RUNNING)


class ReadOnlyAdmin(ReadOnlyMixin, TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin):
    """Records written by services only: viewable, never added, changed or deleted here."""

    paginator = CappedCountPaginator
    show_full_result_count = False


@admin.register(SyncRun)
class SyncRunAdmin(ProgressAdminMixin, ReadOnlyAdmin, admin.ModelAdmin[SyncRun]):
    # The time over two lines, what triggered the run under its status, the five counts in one cell (kind and
    # duration are a filter and the run's page): every column in view beside both sidebars at 1280 px.
    list_display = ("when", "server_column", "status_column", "tool_counts", "short_error")
    list_display_links = ("when",)
    filters_below = True  # at 768-1024 px, under the rows (scoutsite/static/scout/admin.css), as on the server list
    list_title = "Sync runs — each sync or import: what it added, changed, removed and rejected"

    def object_title(self, request: HttpRequest, obj: SyncRun) -> str:
        return f"Sync run of {obj.server or obj.source}, {timezone.localtime(obj.started_at):%Y-%m-%d %H:%M:%S}"

    list_select_related = ("server",)
    list_filter = ("status", "kind", ServerFilter)
    search_fields = ("server__slug", "source", "error")
    date_hierarchy = "started_at"
    fields = (
        "server",
        "kind",
        "source",
        "started_by_name",
        "status_badge",
        "progress_panel",
        "started_at",
        "finished_at",
        "duration",
        "added",
        "changed",
        "unchanged",
        "removed",
        "rejected",
        "error_block",
        "tool_changes",
        "rejections_table",
    )
    readonly_fields = (*fields, "what_next")

    def get_fields(self, request: HttpRequest, obj: SyncRun | None = None) -> Sequence[str]:
        fields = self.fields
        if obj is not None and obj.status not in UNDER_WAY:
            # Progress is for a run under way: a finished one's said "success in 2 s" above "Duration: 1.67s"
            # (adminux33), its status, duration and error each on their own row already.
            fields = tuple(name for name in fields if name != "progress_panel")
        # A failed run of a server still down says what to do next, under its status.
        if obj is None or obj.status != SyncStatus.FAILED or obj.server is None:
            return fields
        if obj.server.status not in (ServerStatus.DEGRADED, ServerStatus.UNAVAILABLE):
            return fields  # a later sync succeeded (or the server was stopped): nothing to do here
        at = fields.index("status_badge") + 1
        return (*fields[:at], "what_next", *fields[at:])

    @admin.display(description="what to do")
    def what_next(self, run: SyncRun) -> str:
        server = run.server
        return format_html(
            'Server <a href="{}">{}</a> is {}: its tools are hidden from clients until a sync succeeds. {}',
            reverse("admin:catalog_server_change", args=[server.pk]),
            server.slug,
            server.get_status_display(),
            sync_failed_next(run.error),
        )

    def progress_snapshot_for(self, obj: SyncRun) -> dict:
        running = obj.status in UNDER_WAY  # queued too: its page follows it until it ends
        typical = None
        if obj.status == SyncStatus.RUNNING and obj.server_id:
            # A sync waits on one upstream call: the last good run of the same server is the best guess.
            last = (
                SyncRun.objects.filter(server_id=obj.server_id, status=SyncStatus.SUCCESS, finished_at__isnull=False)
                .exclude(pk=obj.pk)
                .only("started_at", "finished_at")
                .first()
            )
            typical = last.duration_seconds if last else None
        return progress_snapshot(
            obj,
            running=running,
            stage=self._stage(obj),
            unit="tools",
            error=obj.error if obj.status == SyncStatus.FAILED else "",
            typical_seconds=typical,
        )

    @staticmethod
    def _stage(run: SyncRun) -> str:
        if run.status == SyncStatus.QUEUED:
            return "queued: waiting for a worker"
        return "applying tools" if run.progress_total else "listing tools upstream"

    @admin.display(description="status", ordering="status")
    def status_badge(self, run: SyncRun) -> str:
        return run_status_badge(run.status)

    def get_list_display(self, request: HttpRequest) -> Sequence[str]:
        # The server's name opens the server's page (its status, tools, Sync now) for whoever may open servers.
        linked = request.user.has_perm("catalog.view_server")
        cut = errors_cut_for(request)

        @admin.display(description="server", ordering="server__slug")
        def server_column(run: SyncRun) -> str:
            return self.server_column(run, linked=linked)

        @admin.display(description="error")
        def short_error(run: SyncRun) -> str:
            return error_cell(error_shown(run, cut))

        columns = {"server_column": server_column, "short_error": short_error}
        return tuple(columns.get(name, name) for name in self.list_display)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> SyncRun | None:
        run = super().get_object(request, object_id, from_field)
        if run is not None:
            run.error = error_shown(run, errors_cut_for(request))  # shown only: a read-only page never saves it
        return run

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> tuple[Any, bool]:
        """Errors are searched only where the reader reads them whole: a run of a server whose connection they may
        not read matches by its server and source alone, or ``?q=/s/a`` would spell its URL's path out by the row
        count (redteam42)."""
        cut = errors_cut_for(request)
        hidden = [pk for pk in queryset.order_by().values_list("server_id", flat=True).distinct() if pk and cut(pk)]
        if not search_term or not hidden:
            return super().get_search_results(request, queryset, search_term)
        found, duplicates = super().get_search_results(request, queryset.exclude(server__in=hidden), search_term)
        # Django's search reads its fields from get_search_fields(request): the flag leaves "error" out of this one.
        request.scout_search_without_error = True
        try:
            others, more = super().get_search_results(request, queryset.filter(server__in=hidden), search_term)
        finally:
            del request.scout_search_without_error
        return found | others, duplicates or more

    def get_search_fields(self, request: HttpRequest) -> Sequence[str]:
        fields = super().get_search_fields(request)
        return [f for f in fields if f != "error"] if getattr(request, "scout_search_without_error", False) else fields

    def server_column(self, run: SyncRun, *, linked: bool = False) -> str:
        # A long slug ("github-enterprise-production") wraps after its hyphens and "_" in the narrow column, one
        # without any ("financereportingwarehouseconnector") anywhere.
        parts = str(run.server or "—").split("-")
        name = format_html_join(mark_safe("-<wbr>"), "{}", ((breakable_id(part),) for part in parts))
        if not (linked and run.server_id):
            return name
        return format_html('<a href="{}">{}</a>', reverse("admin:catalog_server_change", args=[run.server_id]), name)

    @admin.display(description="status", ordering="status")
    def status_column(self, run: SyncRun) -> str:
        status = run_status_badge(run.status, wrap=True)
        return format_html("{}<br><small>{}</small>", status, self.short_source(run))

    @admin.display(description="started", ordering="started_at")
    def when(self, run: SyncRun) -> str:
        return compact_time(run.started_at)

    @admin.display(description="tools")
    def tool_counts(self, run: SyncRun) -> str:
        return run_tool_counts(run) or "—"

    @admin.display(description="duration")
    def duration(self, run: SyncRun) -> str:
        seconds = run.duration_seconds
        return "—" if seconds is None else f"{seconds:.2f}s"

    @admin.display(description="started by")
    def started_by_name(self, run: SyncRun) -> str:
        # Who asked for it (Sync now, Retry sync, a new server, the API): "—" for the schedule, a command or a notice.
        person = run.started_by
        return "—" if person is None else (person.get_full_name() or person.get_username())

    @admin.display(description="source")
    def short_source(self, run: SyncRun) -> str:
        return run.source if len(run.source) <= 60 else "…" + run.source[-59:]

    @admin.display(description="error")
    def short_error(self, run: SyncRun) -> str:
        # ``get_list_display`` shows each reader the error as they may read it; cut wherever this one is used.
        return error_cell(url_paths_cut(run.error))

    @admin.display(description="error")
    def error_block(self, run: SyncRun) -> str:
        return text_block(run.error)

    @admin.display(description="tools added, changed and removed")
    def tool_changes(self, run: SyncRun) -> str:
        """Which tools this run changed, each linked to the revision it wrote (removed ones to the tool)."""
        revisions = list(
            ToolRevision.objects.filter(sync_run=run).select_related("tool").order_by("tool__tool_id")[:RUN_TOOLS_SHOWN]
        )
        earlier = set(
            ToolRevision.objects.filter(tool__in=[r.tool_id for r in revisions], created_at__lt=run.started_at)
            .values_list("tool_id", flat=True)
            .distinct()
        )
        removed = []
        if run.server_id is not None:
            removed = list(
                Tool.objects.filter(
                    server_id=run.server_id,
                    removed_at__gte=run.started_at,
                    removed_at__lte=run.finished_at or timezone.now(),
                ).order_by("tool_id")[:RUN_TOOLS_SHOWN]
            )
        rows = [
            ("changed" if r.tool_id in earlier else "added", admin_link(r, r.tool.tool_id), r.definition_hash[:12])
            for r in revisions
        ] + [("removed", admin_link(tool, tool.tool_id), "—") for tool in removed]
        if not rows:
            return "— (no tool changed)"
        body = format_html_join(
            "",
            '<tr class="run-tool run-{}"><td>{}</td><td>{}</td><td>{}</td></tr>',
            ((kind, kind, link, digest) for kind, link, digest in rows),
        )
        return format_html(
            '<table id="run-tools"><tr><th>change</th><th>tool (revision)</th><th>hash</th></tr>{}</table>', body
        )

    @admin.display(description="rejected tools")
    def rejections_table(self, run: SyncRun) -> str:
        if not run.rejections:
            return "—"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((r.get("name", ""), r.get("line", ""), r.get("reason", "")) for r in run.rejections),
        )
        return format_html("<table><tr><th>tool</th><th>line</th><th>reason</th></tr>{}</table>", rows)


@admin.register(ToolRevision)
class ToolRevisionAdmin(ReadOnlyAdmin, admin.ModelAdmin[ToolRevision]):
    list_title = "Tool revisions — every upstream definition a tool has had"

    def object_title(self, request: HttpRequest, obj: ToolRevision) -> str:
        return f"Revision {obj.definition_hash[:12]} of {obj.tool.tool_id}"

    # Moments in two short lines, as the other lists show them: Django's "Dec. 4, 2026, 3:38 p.m." and the run's
    # name ("sync everything 2026-12-04 15:38:17") pushed the sync run out of view at 1400 px.
    list_display = ("when", "tool_column", "short_hash", "sync_run_column")
    list_select_related = ("tool", "tool__server", "sync_run", "sync_run__server")
    list_filter = (RevisionServerFilter,)
    search_fields = ("tool__tool_id", "definition_hash")
    date_hierarchy = "created_at"
    fields = ("tool_link", "definition_hash", "created_at", "sync_run", "previous_link", "diff", "definition_block")
    readonly_fields = fields

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Sequence[str]:
        # The run's page only for those who may read sync runs (curators may not): its name, not a link to a 403.
        if request.user.has_perm("catalog.view_syncrun"):
            return self.fields
        return tuple("sync_run_name" if name == "sync_run" else name for name in self.fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Sequence[str]:
        return self.get_fields(request, obj)

    @admin.display(description="sync run")
    def sync_run_name(self, revision: ToolRevision) -> str:
        return str(revision.sync_run) if revision.sync_run else "—"

    @admin.display(description="created at", ordering="created_at")
    def when(self, revision: ToolRevision) -> str:
        return compact_time(revision.created_at)

    tool_column = breakable_column("tool.tool_id", description="tool")

    @admin.display(description="sync run", ordering="sync_run__started_at")
    def sync_run_column(self, revision: ToolRevision) -> str:
        run = revision.sync_run
        return format_html("{}<br>{}", run.get_kind_display(), compact_time(run.started_at)) if run else "—"

    @admin.display(description="hash")
    def short_hash(self, revision: ToolRevision) -> str:
        return revision.definition_hash[:12]

    @admin.display(description="tool")
    def tool_link(self, revision: ToolRevision) -> str:
        return admin_link(revision.tool)

    @admin.display(description="previous revision")
    def previous_link(self, revision: ToolRevision) -> str:
        previous = revision.previous()
        return admin_link(previous, previous.definition_hash[:12]) if previous else "— (first sight)"

    @admin.display(description="definition")
    def definition_block(self, revision: ToolRevision) -> str:
        return json_block(revision.definition)

    @admin.display(description="changes from the previous revision")
    def diff(self, revision: ToolRevision) -> str:
        previous = revision.previous()
        if previous is None:
            return "— (first sight: nothing to compare)"
        return render_unified_diff(pretty_json(previous.definition), pretty_json(revision.definition))
