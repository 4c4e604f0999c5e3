"""Governance admin: the log of notifications sent to approvers (e-mails and webhook calls), read-only.

Operators read it to see whether approvers were reached; failures first in their own filter."""

from django.contrib import admin
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from catalog.admin.lookups import StrictLookupsMixin
from catalog.admin.readonly import ReadOnlyMixin
from catalog.admin.titles import TitledAdminMixin

from ..choices import NotificationOutcome
from ..models import ApprovalRequest, NotificationAttempt
from ..selectors import notification_attempts_visible_to


@admin.register(NotificationAttempt)
class NotificationAttemptAdmin(
    ReadOnlyMixin, TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin[NotificationAttempt]
):
    # Four wrapping columns: the log fits beside both sidebars at 1280 px.
    list_display = ("when", "outcome_badge", "approval_link", "result")
    list_display_links = ("when",)
    list_filter = ("outcome", "channel")
    search_fields = ("approval__approval_id", "target", "detail")
    list_select_related = ("approval",)
    date_hierarchy = "created_at"
    readonly_fields = ("created_at", "outcome", "channel", "approval_link", "target", "status_code", "detail",
                       "attempt")  # fmt: skip
    fields = readonly_fields

    def get_queryset(self, request):
        # Attempts for requests of shared tenants and the viewer's (Z12); superusers read every one.
        return super().get_queryset(request) & notification_attempts_visible_to(user=request.user)

    def _may_open_requests(self, request) -> bool:
        """Whether the request's decide page would open for this reader (operators read the log, approvers decide)."""
        return self.admin_site._registry[ApprovalRequest].has_view_permission(request)

    def get_list_display(self, request):
        if self._may_open_requests(request):
            return self.list_display
        return tuple("approval_text" if name == "approval_link" else name for name in self.list_display)

    def get_fields(self, request, obj=None):
        if self._may_open_requests(request):
            return self.fields
        return tuple("approval_text" if name == "approval_link" else name for name in self.fields)

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj)

    list_title = "Notifications to approvers — every e-mail and webhook attempt, failed ones in red"

    def object_title(self, request, obj: NotificationAttempt) -> str:
        request_id = obj.approval.approval_id if obj.approval is not None else "no request"
        return f"Notification for {request_id}: {obj}"

    @admin.display(description="outcome", ordering="outcome")
    def outcome_badge(self, obj: NotificationAttempt) -> str:
        kind = "s-success" if obj.outcome == NotificationOutcome.SENT else "s-failed"
        return format_html('<span class="scout-badge {} notification-{}">{}</span>', kind, obj.outcome,
                           obj.get_outcome_display())  # fmt: skip

    @admin.display(description="when", ordering="created_at")
    def when(self, obj: NotificationAttempt) -> str:
        attempt = f" · try {obj.attempt}" if obj.attempt > 1 else ""
        at = timezone.localtime(obj.created_at).strftime("%Y-%m-%d %H:%M:%S")
        return format_html("{}<br><small>{}{}</small>", at, obj.get_channel_display(), attempt)

    @admin.display(description="result")
    def result(self, obj: NotificationAttempt) -> str:
        status = f" · HTTP {obj.status_code}" if obj.status_code else ""
        return format_html("{}{}<br><small>{}</small>", obj.target, status, obj.detail or "")

    @admin.display(description="request")
    def approval_link(self, obj: NotificationAttempt) -> str:
        if obj.approval is None:
            return "—"
        url = reverse("admin:governance_approvalrequest_decide", args=[obj.approval_id])
        return format_html('<a href="{}">{}</a>', url, obj.approval.approval_id)

    @admin.display(description="request")
    def approval_text(self, obj: NotificationAttempt) -> str:
        return obj.approval.approval_id if obj.approval is not None else "—"
