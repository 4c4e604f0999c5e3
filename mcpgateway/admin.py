from django.contrib import admin

from catalog.admin.lookups import StrictLookupsMixin
from catalog.admin.titles import TitledAdminMixin
from catalog.models import Server, Tool
from governance.selectors import install_wide_visible_to, servers_shaped_by, servers_visible_to_operator, tool_shaped_by

from .models import IdempotencyRecord, PinnedTool


@admin.register(PinnedTool)
class PinnedToolAdmin(TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin):
    list_title = "Pinned tools — listed beside the meta-tools in tools/list, so the most-used tools need no search"
    list_display = ("tool", "position", "note", "created_at")
    list_editable = ("position",)
    list_select_related = ("tool", "tool__server")
    raw_id_fields = ("tool",)
    search_fields = ("tool__tool_id", "note")

    def object_title(self, request, obj) -> str:
        return f"Pinned tool {obj.tool.tool_id}"

    def _managed_tools(self, request):
        # Tools of the servers this admin may manage: shared ones and their tenants' (Z12).
        return Tool.objects.filter(server__in=Server.objects.filter(servers_visible_to_operator(user=request.user)))

    def get_queryset(self, request):
        return super().get_queryset(request).filter(tool__in=self._managed_tools(request))

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tool":
            # A pin is listed to every caller who may see the tool: a shared server's tool is pinned for every tenant,
            # so only by whom may shape what every tenant shares (``servers_shaped_by``), as its curation.
            kwargs["queryset"] = Tool.objects.filter(
                server__in=Server.objects.filter(servers_shaped_by(user=request.user))
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def _shapes(self, request, pin) -> bool:
        return pin is None or tool_shaped_by(user=request.user, tool=pin.tool)

    def has_change_permission(self, request, obj=None) -> bool:
        return super().has_change_permission(request, obj) and self._shapes(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:  # also each row of the delete action
        return super().has_delete_permission(request, obj) and self._shapes(request, obj)

    def get_changelist_formset(self, request, **kwargs):
        # The list's position boxes: read-only on a pin the reader may not move (its value, not what was sent).
        formset = super().get_changelist_formset(request, **kwargs)
        admin_ = self

        class PositionForm(formset.form):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **kwargs)
                if self.instance.pk and not admin_._shapes(request, self.instance):
                    self.fields["position"].disabled = True

        formset.form = PositionForm
        return formset


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin):
    """Read-only: records are written by execute_tool and expire on their own. Each keeps the result of a call it
    replays, whoever's and in whichever tenant: read only by whom may read the whole install (a superuser, or anyone
    with the permission while the install has no tenants)."""

    list_display = ("key", "tool_ref", "status", "created_at", "completed_at", "expires_at")
    list_filter = ("status",)
    search_fields = ("tool_ref",)
    readonly_fields = [field.name for field in IdempotencyRecord._meta.fields]
    show_full_result_count = False
    list_title = "Idempotency records — results of tool calls kept to replay a retried call"

    def object_title(self, request, obj) -> str:
        return f"Idempotency record of {obj.tool_ref}"

    def has_module_permission(self, request) -> bool:
        return super().has_module_permission(request) and install_wide_visible_to(user=request.user)

    def has_view_permission(self, request, obj=None) -> bool:
        return super().has_view_permission(request, obj) and install_wide_visible_to(user=request.user)

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and install_wide_visible_to(user=request.user)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
