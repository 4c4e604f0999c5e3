"""Governance admin: audit trail."""

from django.contrib import admin

from catalog.admin.lookups import StrictLookupsMixin

from ..models import AuditEvent
from ..principals import principal_for_user
from ..selectors import audit_events_visible_to
from .common import BoundedCountPaginator


class RecentToolFilter(admin.SimpleListFilter):
    """Filter by tool, offering the tools of the most recent events (a full tool list would be huge)."""

    title = "tool"
    parameter_name = "tool_ref"

    def lookups(self, request, model_admin):
        recent = model_admin.get_queryset(request).exclude(tool_ref="").values_list("tool_ref", flat=True)[:1000]
        return [(ref, ref) for ref in sorted(set(recent))[:50]]

    def queryset(self, request, queryset):
        return queryset.filter(tool_ref=self.value()) if self.value() else queryset


@admin.register(AuditEvent)
class AuditEventAdmin(StrictLookupsMixin, admin.ModelAdmin[AuditEvent]):
    list_display = (
        "created_at",
        "event_type",
        "outcome",
        "human_subject",
        "agent",
        "tenant",
        "tool_ref",
        "approval_ref",
        "policy_version",
    )
    list_filter = (
        "event_type",
        "outcome",
        ("user", admin.RelatedOnlyFieldListFilter),  # only the people in the rows this viewer may read
        RecentToolFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("human_subject", "agent", "tenant", "tool_ref", "approval_ref", "trace_id")
    paginator = BoundedCountPaginator
    show_full_result_count = False
    list_per_page = 100
    actions = None

    def get_queryset(self, request):
        # Shared events and those of the viewer's tenants; superusers read the whole trail (Z12).
        return audit_events_visible_to(principal=principal_for_user(request.user)).order_by("-created_at", "-id")

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in AuditEvent._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
