"""Search in the admin: index generations and fallback events (read-only), and the curator preview.

The preview lives under the index-generation admin (``/admin/search/indexgeneration/preview/``) so it
gets the admin's login, CSRF and layout; a "Search preview" button sits on the generations list.
"""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils.html import format_html

from catalog.models import Tool

from .models import IndexGeneration, SearchEvent
from .preview import (
    AS_USER_PERMISSION,
    PREVIEW_PERMISSION,
    PreviewForm,
    preview_run,
    tool_examples_check,
    visible_tool_pks,
    why_lines,
)


class ReadOnlyAdmin(admin.ModelAdmin):  # shared by both read-only tables below
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(IndexGeneration)
class IndexGenerationAdmin(ReadOnlyAdmin):
    list_display = ("id", "kind", "status", "model_key", "tool_count", "encoded", "reused", "degraded", "started_at")
    list_filter = ("kind", "status", "degraded")
    readonly_fields = [f.name for f in IndexGeneration._meta.fields]
    change_list_template = "admin/search/indexgeneration/change_list.html"

    def get_urls(self):
        custom = [
            path("preview/", self.admin_site.admin_view(self.preview_view), name="search_preview"),
            path(
                "preview/tool/<int:tool_pk>/",
                self.admin_site.admin_view(self.tool_examples_view),
                name="search_preview_tool",
            ),
        ]
        return custom + super().get_urls()

    # -- curator preview ---------------------------------------------------------------------------------
    @staticmethod
    def _check_preview_permission(request: HttpRequest) -> None:
        if not request.user.has_perm(PREVIEW_PERMISSION):
            raise PermissionDenied

    def _form(self, request: HttpRequest) -> PreviewForm:
        may_choose_user = request.user.has_perm(AS_USER_PERMISSION)
        return PreviewForm(request.GET or None, may_choose_user=may_choose_user)

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        """Type a request, see the ranked tools with BM25, dense and fused rank, score and why."""
        self._check_preview_permission(request)
        form = self._form(request)
        outcome, rows, as_user = None, [], None
        if form.is_valid():
            as_user = form.cleaned_data.get("as_user")
            outcome = preview_run(
                query=form.cleaned_data["query"],
                visible=visible_tool_pks(as_user=as_user),
                top_k=form.cleaned_data["top_k"],
                fusion=form.cleaned_data.get("fusion"),
            )
            if outcome.result is not None:
                rows = [(match, why_lines(match)) for match in outcome.result.matches]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Search preview",
            "form": form,
            "outcome": outcome,
            "rows": rows,
            "as_user": as_user,
        }
        return render(request, "admin/search/preview.html", context)

    def tool_examples_view(self, request: HttpRequest, tool_pk: int) -> HttpResponse:
        """Run a tool's example requests (and negative examples) and show where the tool lands."""
        self._check_preview_permission(request)
        tool = get_object_or_404(Tool.objects.select_related("server"), pk=tool_pk)
        as_user = None
        username = request.GET.get("as_user", "")
        if username and request.user.has_perm(AS_USER_PERMISSION):
            as_user = get_object_or_404(get_user_model(), username=username)
        checks = tool_examples_check(tool=tool, visible=visible_tool_pks(as_user=as_user))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Example requests of {tool.tool_id}",
            "tool": tool,
            "checks": checks,
            "as_user": as_user,
        }
        return render(request, "admin/search/preview_tool.html", context)


@admin.register(SearchEvent)
class SearchEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "kind", "detail_short")
    list_filter = ("kind",)
    readonly_fields = ("created_at", "kind", "detail")
    date_hierarchy = "created_at"

    @admin.display(description="detail")
    def detail_short(self, obj: SearchEvent) -> str:
        return obj.detail[:120]


def preview_link(tool: Tool) -> str:
    """An admin link to a tool's example-request check (for the catalog's Tool page)."""
    return format_html(
        '<a href="{}">Where its example requests land</a>', reverse("admin:search_preview_tool", args=[tool.pk])
    )
