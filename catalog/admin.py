"""Catalog admin: where operators watch servers and syncs and curators make tools findable.

Upstream fields are read-only everywhere (only sync and import write them); curation goes through
``tool_curation_update``; SyncRuns and ToolRevisions are append-only records. Upstream text is untrusted:
everything rendered here goes through ``format_html``/``escape``, never ``mark_safe`` on raw input.
"""

import difflib
import json
from datetime import timedelta
from functools import cached_property
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import models
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from .choices import ServerStatus, SyncStatus, Transport
from .models import (
    Server,
    SyncRun,
    Tool,
    ToolAlias,
    ToolExample,
    ToolKeyword,
    ToolNegativeExample,
    ToolRevision,
)
from .services.curation import tool_curation_update

RECENT_RUNS_SHOWN = 10
RECENT_REVISIONS_SHOWN = 10
SERVER_FILTER_CHOICES = 100
LARGE_TABLE_COUNT_CAP = 10_000

STATUS_COLOURS = {
    ServerStatus.ACTIVE: "#2e7d32",
    ServerStatus.DEGRADED: "#ef6c00",
    ServerStatus.UNAVAILABLE: "#c62828",
    ServerStatus.DISABLED: "#757575",
    SyncStatus.SUCCESS: "#2e7d32",
    SyncStatus.PARTIAL: "#ef6c00",
    SyncStatus.FAILED: "#c62828",
    SyncStatus.RUNNING: "#1565c0",
    SyncStatus.SKIPPED: "#757575",
    "live": "#2e7d32",
    "removed": "#c62828",
    "disabled": "#757575",
}


def badge(value: str, label: str) -> str:
    colour = STATUS_COLOURS.get(value, "#757575")
    return format_html(
        '<span style="background:{};color:#fff;padding:2px 8px;border-radius:10px;white-space:nowrap">{}</span>',
        colour,
        label,
    )


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def json_block(value: Any) -> str:
    if value is None:
        return "—"
    return format_html('<pre style="white-space:pre-wrap;max-height:40em;overflow:auto">{}</pre>', pretty_json(value))


def text_block(value: str) -> str:
    if not value:
        return "—"
    return format_html('<pre style="white-space:pre-wrap">{}</pre>', value)


def admin_link(obj: Any, label: str | None = None) -> str:
    if obj is None:
        return "—"
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label if label is not None else str(obj))


class CappedCountPaginator(Paginator):
    """For append-only tables: counts at most LARGE_TABLE_COUNT_CAP rows instead of scanning the table."""

    @cached_property
    def count(self) -> int:
        return self.object_list[:LARGE_TABLE_COUNT_CAP].count()


# --- list filters ----------------------------------------------------------------------------------


class ServerFilter(admin.SimpleListFilter):
    """By server slug. Lists the first servers only (a catalog may hold thousands); any slug works in the URL."""

    title = "server"
    parameter_name = "server"
    server_path = "server"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        slugs = list(Server.objects.order_by("slug").values_list("slug", flat=True)[:SERVER_FILTER_CHOICES])
        selected = self.value()
        if selected and selected not in slugs:
            slugs.insert(0, selected)
        return [(slug, slug) for slug in slugs]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            return queryset.filter(**{f"{self.server_path}__slug": self.value()})
        return queryset


class RevisionServerFilter(ServerFilter):
    server_path = "tool__server"


class ToolStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("live", "Live"), ("removed", "Removed upstream"), ("disabled", "Disabled")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "live":
            return queryset.filter(removed_at__isnull=True, enabled=True)
        if self.value() == "removed":
            return queryset.filter(removed_at__isnull=False)
        if self.value() == "disabled":
            return queryset.filter(removed_at__isnull=True, enabled=False)
        return queryset


class ChangedRecentlyFilter(admin.SimpleListFilter):
    """Tools whose upstream definition got a new revision recently (first sight counts as a change)."""

    title = "definition changed"
    parameter_name = "changed"
    windows = {"day": timedelta(days=1), "week": timedelta(days=7), "month": timedelta(days=30)}

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("day", "In the last day"), ("week", "In the last week"), ("month", "In the last 30 days")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        window = self.windows.get(self.value() or "")
        if window is None:
            return queryset
        return queryset.filter(last_changed_at__gte=timezone.now() - window)


class TransportFilter(admin.SimpleListFilter):
    title = "transport"
    parameter_name = "transport"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return list(Transport.choices)

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            return queryset.filter(server__transport=self.value())
        return queryset


# --- servers ---------------------------------------------------------------------------------------


class RecentRunsFormSet(BaseInlineFormSet):
    """Only the latest runs; evaluated once, since the formset indexes its queryset row by row."""

    def get_queryset(self) -> QuerySet:
        if not hasattr(self, "_recent"):
            self._recent = super().get_queryset()[:RECENT_RUNS_SHOWN]
            len(self._recent)  # fills the result cache: later indexing reads it instead of querying
        return self._recent


class RecentSyncRunInline(admin.TabularInline):
    model = SyncRun
    formset = RecentRunsFormSet
    verbose_name_plural = f"Last {RECENT_RUNS_SHOWN} sync runs"
    fields = ("run_link", "kind", "status_badge", "source", "added", "changed", "unchanged", "removed", "rejected")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[SyncRun]:
        return super().get_queryset(request).select_related("server")  # each row's title names its server

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="started")
    def run_link(self, run: SyncRun) -> str:
        return admin_link(run, f"{run.started_at:%Y-%m-%d %H:%M:%S}")

    @admin.display(description="status")
    def status_badge(self, run: SyncRun) -> str:
        return badge(run.status, run.get_status_display())


@admin.register(Server)
class ServerAdmin(admin.ModelAdmin[Server]):
    list_display = (
        "slug",
        "name",
        "status_badge",
        "transport",
        "environment",
        "tool_count",
        "last_synced_at",
        "last_run",
    )
    list_filter = ("status", "transport", "environment")
    search_fields = ("slug", "name", "description", "category")
    ordering = ("slug",)
    actions = ("sync_now",)
    inlines = (RecentSyncRunInline,)
    change_form_template = "admin/catalog/server/change_form.html"
    readonly_fields = ("status_badge", "tool_count", "last_synced_at", "last_error_display", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("slug", "name", "description", "category", "environment")}),
        ("Connection", {"fields": ("transport", "command", "args", "env_vars", "url", "header_env")}),
        ("Health", {"fields": ("status", "status_badge", "tool_count", "last_synced_at", "last_error_display")}),
        ("Record", {"fields": ("created_at", "updated_at"), "classes": ("collapse",)}),
    )

    def formfield_for_dbfield(self, db_field: models.Field, request: HttpRequest, **kwargs: Any) -> Any:
        if isinstance(db_field, models.URLField):
            kwargs["assume_scheme"] = "https"  # a URL typed without a scheme is taken as https (Django 6 default)
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Server]:
        latest_run = SyncRun.objects.filter(server=OuterRef("pk")).order_by("-started_at", "-id")
        return (
            super()
            .get_queryset(request)
            .annotate(
                live_tool_count=Count("tools", filter=Q(tools__removed_at__isnull=True)),
                last_run_status=Subquery(latest_run.values("status")[:1]),
                last_run_pk=Subquery(latest_run.values("pk")[:1]),
            )
        )

    @admin.display(description="status", ordering="status")
    def status_badge(self, server: Server) -> str:
        return badge(server.status, server.get_status_display())

    @admin.display(description="live tools", ordering="live_tool_count")
    def tool_count(self, server: Server) -> str:
        count = getattr(server, "live_tool_count", None)
        if count is None:
            count = server.tools.live().count()
        url = reverse("admin:catalog_tool_changelist") + "?" + urlencode({"server": server.slug, "status": "live"})
        return format_html('<a href="{}">{}</a>', url, count)

    @admin.display(description="last run", ordering="last_run_status")
    def last_run(self, server: Server) -> str:
        status = getattr(server, "last_run_status", None)
        if not status:
            return "—"
        url = reverse("admin:catalog_syncrun_change", args=[server.last_run_pk])
        return format_html('<a href="{}">{}</a>', url, badge(status, SyncStatus(status).label))

    @admin.display(description="last error")
    def last_error_display(self, server: Server) -> str:
        return text_block(server.last_error)

    @admin.action(description="Sync now", permissions=["change"])
    def sync_now(self, request: HttpRequest, queryset: QuerySet[Server]) -> None:
        queued, skipped = self._queue_sync(request, list(queryset))
        if queued:
            self.message_user(request, f"Sync queued for {queued} server(s).", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"Not synced (imported, no live connection): {', '.join(skipped)}.")

    def _queue_sync(self, request: HttpRequest, servers: list[Server]) -> tuple[int, list[str]]:
        try:
            from catalog.tasks import sync_server
        except ImportError as exc:  # the sync task may not be deployed yet; say so instead of failing
            self.message_user(request, f"Sync is not available: {exc}", messages.ERROR)
            return 0, []
        queued, skipped = 0, []
        for server in servers:
            if server.transport == Transport.IMPORTED:
                skipped.append(server.slug)
                continue
            sync_server.delay(server.pk, "admin")
            queued += 1
        return queued, skipped

    def get_urls(self) -> list:
        sync_view = self.admin_site.admin_view(require_POST(self.sync_view))
        return [path("<int:object_id>/sync/", sync_view, name="catalog_server_sync"), *super().get_urls()]

    def sync_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        server = get_object_or_404(Server, pk=object_id)
        if not self.has_change_permission(request, server):
            raise PermissionDenied
        queued, skipped = self._queue_sync(request, [server])
        if queued:
            self.message_user(request, f"Sync of {server.slug} queued.", messages.SUCCESS)
        elif skipped:
            self.message_user(request, f"Imported server {server.slug} has no live connection: re-import its file.")
        return HttpResponseRedirect(reverse("admin:catalog_server_change", args=[server.pk]))


# --- tools -----------------------------------------------------------------------------------------


class CommaSeparatedListField(forms.CharField):
    """A JSON list of short strings edited as ``issue, repository``."""

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, list):
            return ", ".join(str(item) for item in value)
        return value or ""

    def to_python(self, value: Any) -> list[str]:
        text = super().to_python(value)
        items = [item.strip() for item in text.split(",") if item.strip()]
        return list(dict.fromkeys(items))


class ToolCurationForm(forms.ModelForm):
    entity_types = CommaSeparatedListField(required=False, help_text="Comma-separated, e.g. issue, repository")
    operation_verbs = CommaSeparatedListField(required=False, help_text="Comma-separated, e.g. create, list")

    class Meta:
        model = Tool
        fields = ("title", "purpose", "entity_types", "operation_verbs", "related_tools", "enabled")


class PhraseInline(admin.TabularInline):
    extra = 1
    fields = ("text",)


class ToolAliasInline(PhraseInline):
    model = ToolAlias


class ToolKeywordInline(PhraseInline):
    model = ToolKeyword


class ToolExampleInline(PhraseInline):
    model = ToolExample


class ToolNegativeExampleInline(PhraseInline):
    model = ToolNegativeExample


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin[Tool]):
    form = ToolCurationForm
    list_display = ("tool_id", "display_title_column", "server", "status_badge", "last_changed", "curated")
    list_select_related = ("server",)
    list_filter = (ServerFilter, ToolStatusFilter, ChangedRecentlyFilter, TransportFilter)
    search_fields = ("tool_id", "name", "description", "title", "upstream_title", "aliases__text")
    ordering = ("tool_id",)
    autocomplete_fields = ("related_tools",)
    inlines = (ToolAliasInline, ToolKeywordInline, ToolExampleInline, ToolNegativeExampleInline)
    upstream_fields = (
        "tool_id",
        "server_link",
        "name",
        "upstream_title",
        "description_block",
        "input_schema_block",
        "output_schema_block",
        "annotations_block",
        "definition_hash",
        "first_seen_at",
        "last_seen_at",
        "removed_at",
        "recent_revisions",
    )
    readonly_fields = (*upstream_fields, "status_badge", "curated_at")
    fieldsets = (
        ("Upstream (written by sync and import only)", {"fields": upstream_fields}),
        ("Curation", {"fields": ("title", "purpose", "entity_types", "operation_verbs", "related_tools")}),
        ("Operations", {"fields": ("enabled", "status_badge", "curated_at")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tool]:
        latest = ToolRevision.objects.filter(tool=OuterRef("pk")).order_by("-created_at", "-id")
        return super().get_queryset(request).annotate(last_changed_at=Subquery(latest.values("created_at")[:1]))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tools come from sync and import only

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # removed tools are tombstoned by sync, never deleted

    def save_model(self, request: HttpRequest, obj: Tool, form: forms.ModelForm, change: bool) -> None:
        # Nothing here: curation is written in save_related through tool_curation_update, with the inlines,
        # and only curated columns are saved (a full save could overwrite a concurrent sync's upstream text).
        pass

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets: list, change: bool) -> None:
        for formset in formsets:
            self.save_formset(request, form, formset, change=change)
        data = form.cleaned_data
        tool_curation_update(
            tool=form.instance,
            title=data["title"],
            purpose=data["purpose"],
            entity_types=data["entity_types"],
            operation_verbs=data["operation_verbs"],
            enabled=data["enabled"],
            related_tools=data["related_tools"],
            phrases_changed=any(formset.has_changed() for formset in formsets),
        )

    @admin.display(description="title", ordering="title")
    def display_title_column(self, tool: Tool) -> str:
        return tool.display_title

    @admin.display(description="status")
    def status_badge(self, tool: Tool) -> str:
        if tool.removed_at is not None:
            return badge("removed", "removed")
        if not tool.enabled:
            return badge("disabled", "disabled")
        return badge("live", "live")

    @admin.display(description="definition changed", ordering="last_changed_at")
    def last_changed(self, tool: Tool) -> Any:
        return getattr(tool, "last_changed_at", None)

    @admin.display(description="curated", boolean=True, ordering="curated_at")
    def curated(self, tool: Tool) -> bool:
        return tool.curated_at is not None

    @admin.display(description="server")
    def server_link(self, tool: Tool) -> str:
        return admin_link(tool.server)

    @admin.display(description="description")
    def description_block(self, tool: Tool) -> str:
        return text_block(tool.description)

    @admin.display(description="inputSchema")
    def input_schema_block(self, tool: Tool) -> str:
        return json_block(tool.input_schema)

    @admin.display(description="outputSchema")
    def output_schema_block(self, tool: Tool) -> str:
        return json_block(tool.output_schema)

    @admin.display(description="annotations")
    def annotations_block(self, tool: Tool) -> str:
        return json_block(tool.annotations)

    @admin.display(description="revisions")
    def recent_revisions(self, tool: Tool) -> str:
        revisions = tool.revisions.order_by("-created_at", "-id")[:RECENT_REVISIONS_SHOWN]
        if not revisions:
            return "—"
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                '<li><a href="{}">{} · {}</a></li>',
                (
                    (
                        reverse("admin:catalog_toolrevision_change", args=[r.pk]),
                        f"{r.created_at:%Y-%m-%d %H:%M:%S}",
                        r.definition_hash[:12],
                    )
                    for r in revisions
                ),
            ),
        )


# --- sync runs and revisions: append-only records --------------------------------------------------


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records written by services only: viewable, never added, changed or deleted here."""

    paginator = CappedCountPaginator
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(SyncRun)
class SyncRunAdmin(ReadOnlyAdmin, admin.ModelAdmin[SyncRun]):
    list_display = (
        "started_at",
        "server",
        "kind",
        "status_badge",
        "added",
        "changed",
        "unchanged",
        "removed",
        "rejected",
        "duration",
        "short_error",
    )
    list_select_related = ("server",)
    list_filter = ("status", "kind", ServerFilter)
    search_fields = ("server__slug", "source", "error")
    date_hierarchy = "started_at"
    fields = (
        "server",
        "kind",
        "source",
        "status_badge",
        "started_at",
        "finished_at",
        "duration",
        "added",
        "changed",
        "unchanged",
        "removed",
        "rejected",
        "error_block",
        "rejections_table",
    )
    readonly_fields = fields

    @admin.display(description="status", ordering="status")
    def status_badge(self, run: SyncRun) -> str:
        return badge(run.status, run.get_status_display())

    @admin.display(description="duration")
    def duration(self, run: SyncRun) -> str:
        seconds = run.duration_seconds
        return "—" if seconds is None else f"{seconds:.2f}s"

    @admin.display(description="error")
    def short_error(self, run: SyncRun) -> str:
        return (run.error[:120] + "…") if len(run.error) > 120 else run.error

    @admin.display(description="error")
    def error_block(self, run: SyncRun) -> str:
        return text_block(run.error)

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
    list_display = ("created_at", "tool", "short_hash", "sync_run")
    list_select_related = ("tool", "tool__server", "sync_run", "sync_run__server")
    list_filter = (RevisionServerFilter,)
    search_fields = ("tool__tool_id", "definition_hash")
    date_hierarchy = "created_at"
    fields = ("tool_link", "definition_hash", "created_at", "sync_run", "previous_link", "diff", "definition_block")
    readonly_fields = fields

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


DIFF_LINE_STYLES = {"+": "background:#e6ffec", "-": "background:#ffebe9", "@": "color:#6e7781"}


def render_unified_diff(before: str, after: str) -> str:
    """A unified diff of two texts as escaped HTML; every line of upstream text goes through format_html."""
    lines = list(
        difflib.unified_diff(before.splitlines(), after.splitlines(), "previous", "this revision", n=3, lineterm="")
    )
    if not lines:
        return "— (identical)"
    rendered = format_html_join(
        "\n", '<span style="{}">{}</span>', ((DIFF_LINE_STYLES.get(line[:1], ""), line) for line in lines)
    )
    return format_html('<pre class="scout-diff" style="white-space:pre-wrap">{}</pre>', rendered)
