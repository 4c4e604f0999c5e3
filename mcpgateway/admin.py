from django.contrib import admin

from catalog.admin.lookups import StrictLookupsMixin

from .models import IdempotencyRecord, PinnedTool


@admin.register(PinnedTool)
class PinnedToolAdmin(StrictLookupsMixin, admin.ModelAdmin):
    list_display = ("tool", "position", "note", "created_at")
    list_editable = ("position",)
    list_select_related = ("tool", "tool__server")
    raw_id_fields = ("tool",)
    search_fields = ("tool__tool_id", "note")


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(StrictLookupsMixin, admin.ModelAdmin):
    """Read-only: records are written by execute_tool and expire on their own."""

    list_display = ("key", "tool_ref", "status", "created_at", "completed_at", "expires_at")
    list_filter = ("status",)
    search_fields = ("tool_ref",)
    readonly_fields = [field.name for field in IdempotencyRecord._meta.fields]
    show_full_result_count = False

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
