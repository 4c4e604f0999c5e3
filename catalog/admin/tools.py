"""Tools: upstream text read-only, curation editable (saved through tool_curation_update)."""

from typing import Any

from celery import current_app
from django import forms
from django.contrib import admin, messages
from django.db.models import BooleanField, ExpressionWrapper, F, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import url_has_allowed_host_and_scheme, urlencode

from catalog.models import Tool, ToolAlias, ToolExample, ToolKeyword, ToolNegativeExample, ToolRevision
from catalog.services.curation import tool_curation_update

from .display import admin_link, badge, breakable_column, compact_time, json_block, text_block
from .filters import (
    ChangedRecentlyFilter,
    ExampleRequestsFilter,
    ServerFilter,
    ToolStatusFilter,
    TransportFilter,
    held_q,
)
from .lookups import StrictLookupsMixin
from .titles import TitledAdminMixin

RECENT_REVISIONS_SHOWN = 10


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


CURATION_HELP = {
    "title": "A short plain name people and agents see instead of the upstream name.",
    "purpose": "What agents read: one or two sentences on what a user would want this tool for. It is indexed "
    "for search and shown with the tool's description in tool_search and tool_inspect.",
    "related_tools": "Tools often used with this one; search can suggest them together.",
    "enabled": "Off hides the tool from every client (search and calls) without touching the upstream.",
}


class ToolCurationForm(forms.ModelForm):
    entity_types = CommaSeparatedListField(
        required=False, help_text="The things it works on, comma-separated, e.g. issue, repository"
    )
    operation_verbs = CommaSeparatedListField(
        required=False, help_text="What it does to them, comma-separated, e.g. create, list"
    )

    class Meta:
        model = Tool
        fields = ("title", "purpose", "entity_types", "operation_verbs", "related_tools", "enabled")
        help_texts = CURATION_HELP


class PhraseFormSet(forms.BaseInlineFormSet):
    """Refuses a phrase listed twice for one tool (same words, case and spacing aside): the second adds nothing
    to search and reads like a mistake."""

    def clean(self) -> None:
        super().clean()
        seen: set[str] = set()
        for form in self.forms:
            data = getattr(form, "cleaned_data", None) or {}
            text = data.get("text") or ""
            if not text or data.get("DELETE"):
                continue
            key = " ".join(text.split()).casefold()
            if key in seen:
                form.add_error("text", f"“{text}” is already listed above.")
            seen.add(key)


class PhraseInline(admin.TabularInline):
    extra = 1
    fields = ("text",)
    help: str = ""
    template = "admin/edit_inline/scout_tabular.html"  # with the help line
    formset = PhraseFormSet

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        kwargs["help_texts"] = {"text": self.help}
        return super().get_formset(request, obj, **kwargs)


class ToolAliasInline(PhraseInline):
    model = ToolAlias
    verbose_name = "alias"  # "Add another alias", not the model's "Add another Tool alias"
    verbose_name_plural = "Aliases"
    help = "Other names people use for this tool; matched like its title."


class ToolKeywordInline(PhraseInline):
    model = ToolKeyword
    verbose_name = "keyword"
    verbose_name_plural = "Keywords"
    help = "Words that should find this tool even when its description lacks them."


class ToolExampleInline(PhraseInline):
    model = ToolExample
    verbose_name = "example request"
    verbose_name_plural = "Example requests"
    help = "A request a user would make that this tool answers, e.g. 'remember that alice works at acme'."


class ToolNegativeExampleInline(PhraseInline):
    model = ToolNegativeExample
    verbose_name = "negative query"
    verbose_name_plural = "Negative queries"
    help = "A request this tool must not answer: the tool is pushed down the ranking for matching requests."


def return_path(request: HttpRequest) -> str:
    """The admin page a tool page was opened from (its ``?next=``, as the search workbench links it), to go back to
    after Save; "" for anything but a path of this site's admin (never another host: no open redirect)."""
    target = request.GET.get("next", "")
    if not target.startswith(reverse("admin:index")) or not target.isprintable() or " " in target:
        return ""
    return target if url_has_allowed_host_and_scheme(target, allowed_hosts=None) else ""


@admin.register(Tool)
class ToolAdmin(TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin[Tool]):
    form = ToolCurationForm
    list_display = (
        "tool_id_column",
        "display_title_column",
        "server_column",
        "status_badge",
        "last_changed",
        "curated",
    )
    list_select_related = ("server",)
    list_filter = (ServerFilter, ToolStatusFilter, ExampleRequestsFilter, ChangedRecentlyFilter, TransportFilter)
    search_fields = ("tool_id", "name", "description", "title", "upstream_title", "aliases__text")
    ordering = ("tool_id",)
    autocomplete_fields = ("related_tools",)
    inlines = (ToolAliasInline, ToolKeywordInline, ToolExampleInline, ToolNegativeExampleInline)
    upstream_fields = ("tool_id", "server_link", "name", "upstream_title", "description_block", "deprecated_flag")
    # Long and rarely read while curating: folded under the description, one click away.
    definition_fields = (
        "input_schema_block",
        "output_schema_block",
        "annotations_block",
        "definition_hash",
        "first_seen_at",
        "last_seen_at",
        "removed_at",
        "recent_revisions",
    )
    readonly_fields = (*upstream_fields, *definition_fields, "status_badge", "curated_at")
    fieldsets = (
        ("Upstream (written by sync and import only)", {"fields": upstream_fields}),
        (
            "Upstream definition: schemas, annotations, hash, revisions",
            {"fields": definition_fields, "classes": ("collapse",)},
        ),
        ("Curation", {"fields": ("title", "purpose", "entity_types", "operation_verbs", "related_tools")}),
        ("Operations", {"fields": ("enabled", "status_badge", "curated_at")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tool]:
        latest = ToolRevision.objects.filter(tool=OuterRef("pk")).order_by("-created_at", "-id")
        return (
            super()
            .get_queryset(request)
            .annotate(
                last_changed_at=Subquery(latest.values("created_at")[:1]),
                is_held=ExpressionWrapper(held_q(), output_field=BooleanField()),
                hold_reason_text=F("policy__hold_reason"),
            )
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # tools come from sync and import only

    list_title = "Tools — open one to curate how agents find it"

    def object_title(self, request: HttpRequest, obj: Tool) -> str:
        # What its reader does here: curate it, where its curation is editable for them, else read it (an
        # operator's access-only page, a shared tool).
        curates = "purpose" not in self.get_readonly_fields(request, obj) and self.has_change_permission(request, obj)
        return f"Curate {obj.tool_id}" if curates else f"Tool {obj.tool_id}"

    def response_change(self, request: HttpRequest, obj: Tool) -> Any:
        response = super().response_change(request, obj)
        # Replace Django's generic "was changed successfully" with what matters: when search sees it.
        storage = messages.get_messages(request)
        kept = [m for m in storage if "was changed successfully" not in m.message]
        for message in kept:
            messages.add_message(request, message.level, message.message, extra_tags=message.extra_tags)
        when = "now" if current_app.conf.task_always_eager else "within seconds (re-indexed by a worker)"
        saved = format_html(
            "Saved {}: searchable with these changes {}.{}", obj.tool_id, when, self.saved_next_step(obj)
        )
        self.message_user(request, saved, messages.SUCCESS)
        return response

    def saved_next_step(self, obj: Tool) -> str:
        """Safe HTML after "Saved ...": where to check the change. Search supplies it (search/admin.py re-registers
        this admin); the catalog knows no search."""
        return ""

    def response_post_save_change(self, request: HttpRequest, obj: Tool) -> Any:
        # Back to the page the curator came from (the workbench), not the tool list ("Save and continue editing"
        # keeps the page's query string, so its ``next`` too).
        return_to = return_path(request)
        return HttpResponseRedirect(return_to) if return_to else super().response_post_save_change(request, obj)

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

    # Both break after "::" and "_", and a long run of letters anywhere: one long name hid every column after it.
    tool_id_column = breakable_column("tool_id", description="tool id")
    display_title_column = breakable_column("display_title", description="title", ordering="title")
    server_column = breakable_column("server.slug", description="server")

    @admin.display(description="status")
    def status_badge(self, tool: Tool) -> str:
        if tool.removed_at is not None:
            return badge("removed", "removed")
        if not tool.enabled:
            return badge("disabled", "disabled")
        held = getattr(tool, "is_held", None)
        if held is None:
            held = Tool.objects.filter(pk=tool.pk).filter(held_q()).exists()
        if held:
            # No client gets a held tool: say so, why, and where the review is.
            pending = tool.reviews.filter(status="pending").order_by("-pk").values_list("pk", flat=True).first()
            if pending is not None:
                review = reverse("admin:governance_toolreview_change", args=[pending])
            else:
                review = reverse("admin:governance_toolreview_changelist") + "?" + urlencode({"q": tool.tool_id})
            reason = getattr(tool, "hold_reason_text", None) or "not accepted yet"
            return format_html(
                '{} <span class="scout-held-text">{}</span> · <a href="{}">review</a>',
                badge("held", "held — hidden from clients"),
                reason,
                review,
            )
        return badge("live", "live")

    @admin.display(description="changed", ordering="last_changed_at")
    def last_changed(self, tool: Tool) -> Any:
        return compact_time(getattr(tool, "last_changed_at", None))

    @admin.display(description="curated", boolean=True, ordering="curated_at")
    def curated(self, tool: Tool) -> bool:
        return tool.curated_at is not None

    @admin.display(description="server")
    def server_link(self, tool: Tool) -> str:
        return admin_link(tool.server)

    @admin.display(description="description")
    def description_block(self, tool: Tool) -> str:
        return text_block(tool.description)

    @admin.display(description="deprecated", boolean=True)
    def deprecated_flag(self, tool: Tool) -> bool:
        # As search and the gateway read it: the upstream's flag (OpenAPI) or its own words (an MCP server's).
        return tool.deprecated

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
                '<li><a href="{}">{} · {}</a>{}</li>',
                (
                    (
                        reverse("admin:catalog_toolrevision_change", args=[r.pk]),
                        f"{r.created_at:%Y-%m-%d %H:%M:%S}",
                        r.definition_hash[:12],
                        # A tool that returns to an earlier definition reuses that revision: mark the live one.
                        " (current)" if r.definition_hash == tool.definition_hash else "",
                    )
                    for r in revisions
                ),
            ),
        )
