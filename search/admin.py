"""Search in the admin: index generations and fallback events, read-only (operators' view).

The curator preview (``search.preview``) is mounted at ``/admin/search/preview/`` by scoutsite/urls.py;
the generations list links to it (templates/admin/search/indexgeneration/change_list.html), and so does
every Tool page (templates/admin/catalog/tool/change_form.html).
"""

from django.contrib import admin
from django.http import HttpRequest

from catalog.admin.lookups import StrictLookupsMixin

from .models import IndexGeneration, SearchEvent


class ReadOnlyAdmin(StrictLookupsMixin, admin.ModelAdmin):
    """Rows written by search itself; nobody edits them by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(IndexGeneration)
class IndexGenerationAdmin(ReadOnlyAdmin, admin.ModelAdmin[IndexGeneration]):
    list_display = ("id", "kind", "status", "model_key", "tool_count", "encoded", "reused", "degraded", "started_at")
    list_filter = ("kind", "status", "degraded")
    readonly_fields = [f.name for f in IndexGeneration._meta.fields]


@admin.register(SearchEvent)
class SearchEventAdmin(ReadOnlyAdmin, admin.ModelAdmin[SearchEvent]):
    list_display = ("created_at", "kind", "detail_short")
    list_filter = ("kind",)
    search_fields = ("detail",)
    readonly_fields = ("created_at", "kind", "detail")
    date_hierarchy = "created_at"

    @admin.display(description="detail")
    def detail_short(self, obj: SearchEvent) -> str:
        return obj.detail[:120]
