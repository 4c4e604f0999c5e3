"""Governance admin: change review."""

import json

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from catalog.admin.lookups import StrictLookupsMixin
from catalog.admin.titles import TitledAdminMixin

from ..choices import ReviewStatus
from ..models import ToolReview
from ..services.review import (
    ReviewError,
    tool_review_accept,
    tool_review_definition,
    tool_review_diff,
    tool_review_reject,
)
from .common import SharedToolReadOnlyMixin, _pre
from .people import person_name, with_person_visible
from .tenant_scope import TenantScopedMixin


@admin.register(ToolReview)
class ToolReviewAdmin(
    TitledAdminMixin, SharedToolReadOnlyMixin, TenantScopedMixin, StrictLookupsMixin, admin.ModelAdmin[ToolReview]
):
    """Held definition changes of the tools of servers the admin may manage (Z12: never another tenant's tool);
    who decided is named only where the admin may see them."""

    shared_tool_note = (
        "This tool's server is shared by every tenant: only a superuser accepts or rejects its changes, which release "
        "or keep it for every tenant at once."
    )

    server_path = "tool__server"
    list_display = ("tool", "kind", "status", "markers", "created_at", "decider")
    list_filter = ("status", "kind")
    list_select_related = ("tool", "decided_by")
    search_fields = ("tool__tool_id",)
    hidden_lookups = ("decided_by",)  # read masked where another tenant's (Z12)
    readonly_fields = (
        "tool",
        "kind",
        "status",
        "markers",
        "previous_hash",
        "definition_hash",
        "diff",
        "created_at",
        "decider",
        "decided_at",
        "reason",
    )
    # decided_by: shown read-only as decider (named only where visible); copy_of: the marker names it, and a field
    # would offer every tool of every tenant
    exclude = ("revision", "decided_by", "copy_of")
    actions = ["accept_selected", "reject_selected"]
    change_form_template = "admin/governance/toolreview/change_form.html"

    def get_queryset(self, request):
        qs = with_person_visible(request, super().get_queryset(request), "decided_by")
        return qs.order_by("status", "-created_at")  # "pending" sorts before the decided states

    @admin.display(description="decided by")
    def decider(self, obj: ToolReview) -> str:
        return person_name(obj, "decided_by")

    @admin.display(description="diff (accepted → new revision)")
    def diff(self, obj) -> str:
        if not obj.previous_hash:
            # First sight (a suspicious new tool): a diff against "{}" read as if something had been removed.
            definition = json.dumps(tool_review_definition(review=obj), indent=2, sort_keys=True, ensure_ascii=True)
            return format_html(
                '<p id="first-sight">First sight: no definition of this tool was accepted before. It reads:</p>{}',
                _pre(definition),
            )
        text = tool_review_diff(review=obj)
        if not text:
            return _pre("(no earlier accepted definition)")
        # Added lines green, removed red; every line of upstream text is escaped by format_html.
        styles = {
            "+": "background:#e6ffec;color:#1a7f37",
            "-": "background:#ffebe9;color:#cf222e",
            "@": "color:#6e7781",
        }
        lines = format_html_join(
            "\n", '<span style="{}">{}</span>', ((styles.get(line[:1], ""), line) for line in text.splitlines())
        )
        return format_html('<pre class="scout-diff" style="white-space:pre-wrap;max-width:120ch">{}</pre>', lines)

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def _decide(self, request, queryset, accept: bool, reason: str = "") -> None:
        for review in queryset:
            try:
                (tool_review_accept if accept else tool_review_reject)(review=review, actor=request.user, reason=reason)
            except (ReviewError, PermissionDenied) as exc:
                messages.error(request, f"{review.tool}: {exc}")
                continue
            if accept:
                messages.success(request, f"{review.tool}: accepted — searchable and callable again by those granted")
            else:
                messages.success(request, f"{review.tool}: rejected — it stays held, hidden from every client")

    @admin.action(description="Accept selected revisions (release the tools)", permissions=["change"])
    def accept_selected(self, request, queryset) -> None:
        self._decide(request, queryset, accept=True)

    @admin.action(description="Reject selected revisions (tools stay held)", permissions=["change"])
    def reject_selected(self, request, queryset) -> None:
        self._decide(request, queryset, accept=False)

    list_title = "Tool reviews — tools held from clients until their new or changed definition is accepted"

    def object_title(self, request, obj: ToolReview) -> str:
        # "Change tool review" reads as editing the review: the page is where a held change is read and decided.
        first_sight = not obj.previous_hash  # a suspicious new tool: no definition of it was accepted before
        if obj.status == ReviewStatus.PENDING and self.has_change_permission(request, obj):
            return f"Review the {'suspicious new definition' if first_sight else 'change'} held for {obj.tool.tool_id}"
        subject = "Suspicious new definition of" if first_sight else "Definition change to"
        return f"{subject} {obj.tool.tool_id}: {obj.get_status_display().lower()}"

    def response_change(self, request, obj):
        if "_accept" in request.POST or "_reject" in request.POST:
            self._decide(
                request,
                ToolReview.objects.filter(pk=obj.pk),
                accept="_accept" in request.POST,
                reason=request.POST.get("review_reason", "")[:2000],
            )
            return HttpResponseRedirect(reverse("admin:governance_toolreview_changelist"))
        return super().response_change(request, obj)
