"""Governance admin: audit trail."""

from django.contrib import admin
from django.db.models import Q
from django.utils import timezone
from django.utils.html import format_html

from catalog.admin.display import breakable_name, compact_time
from catalog.admin.lookups import StrictLookupsMixin
from catalog.admin.readonly import ReadOnlyMixin
from catalog.admin.titles import TitledAdminMixin
from catalog.models import Server, Tool

from ..choices import ApprovalStatus, AuditEventType
from ..constants import OTHER_TENANT_PERSON
from ..models import ApprovalRequest, AuditEvent
from ..principals import principal_for_user
from ..selectors import (
    audit_events_visible_to,
    audit_payload_shown,
    delegation_chain_shown,
    users_visible_to_operator,
    with_approval_people_shown,
)
from .common import BoundedCountPaginator, PageBoundSearchMixin, admin_urls_for, breakable_id

# What a grant or revocation did, by (event type, whether it changed anything): {holder} and {what} filled in.
GRANT_CHANGE_PHRASES = {
    (AuditEventType.GRANT, True): "gave {holder} {what}",
    (AuditEventType.GRANT, False): "{holder} already had {what}",
    (AuditEventType.REVOKE, True): "took {what} from {holder}",
    (AuditEventType.REVOKE, False): "{holder} had no {what} to take",
}
GRANT_EVENTS = (AuditEventType.GRANT, AuditEventType.REVOKE)


def grant_change_text(event_type: str, payload: dict, target_url: str | None = None) -> str:
    """What a grant or revocation did, in words, from its payload as its reader may read it (``audit_payload_shown``:
    another tenant's holder is someone in another tenant): "gave alice execute on github", the server or tool linked
    to ``target_url`` when given."""
    kind, _, name = str(payload.get("holder", "")).partition(":")
    holder = f"group {name}" if kind == "group" else name or kind or "?"
    target = str(payload.get("target", "?"))
    if target_url:
        target = format_html('<a href="{}">{}</a>', target_url, target)
    what = format_html("{} on {}", payload.get("action", "?"), target)
    phrase = GRANT_CHANGE_PHRASES[(event_type, bool(payload.get("changed", True)))]
    return format_html(phrase, holder=holder, what=what)


def approval_since_text(request: ApprovalRequest, url: str | None = None) -> str:
    """What became of an approval request since it was asked ("since: denied by bob"), linked to ``url`` when given;
    "" while it is still pending. Its decider as the reader may read them (``decided_by_shown``)."""
    who = request.decided_by_shown or "someone"
    if request.status == ApprovalStatus.EXPIRED:
        text = f"approved by {who}, expired unused" if request.decided_at else "expired undecided"
    else:
        text = {
            ApprovalStatus.APPROVED: f"approved by {who}",
            ApprovalStatus.DENIED: f"denied by {who}",
            ApprovalStatus.CONSUMED: f"approved by {who}, and used",
        }.get(request.status, "")
    if not text:
        return ""
    return format_html('since: <a href="{}">{}</a>', url, text) if url else f"since: {text}"


class VisiblePersonFilter(admin.RelatedOnlyFieldListFilter):
    """The people in the rows this viewer may read, and only those they may see: a shared event of tenant B's
    person neither offers them as a choice nor is found by their id (Z12)."""

    def field_choices(self, field, request, model_admin):
        people = model_admin.get_queryset(request).values_list(f"{self.field_path}__pk", flat=True)
        visible = Q(pk__in=people) & users_visible_to_operator(user=request.user)
        ordering = self.field_admin_ordering(field, request, model_admin)
        return field.get_choices(include_blank=False, limit_choices_to=visible, ordering=ordering)

    def queryset(self, request, queryset):
        filtered = super().queryset(request, queryset)
        return filtered.filter(subject_visible=True) if self.used_parameters else filtered


class VisibleTokenFilter(admin.SimpleListFilter):
    """``?token_ref=tok-<id>`` (the token page's link to its trail): the events of that token whose person the viewer
    may see; a masked person's token finds none of their rows, as a token with none (Z12)."""

    title = "token"
    parameter_name = "token_ref"

    def lookups(self, request, model_admin):
        return [(self.value(), self.value())] if self.value() else []

    def queryset(self, request, queryset):
        return queryset.filter(token_ref=self.value(), subject_visible=True) if self.value() else queryset


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
class AuditEventAdmin(
    ReadOnlyMixin, PageBoundSearchMixin, TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin[AuditEvent]
):
    list_display = (
        "when",
        "event",
        "subject",
        "tenant",
        "tool_column",
        "approval_ref",
        "policy_version",
    )  # time and event over two short lines, who over the agent, ids break at "::" and "_": all in view at 1280 px
    list_display_links = ("when",)
    # At 768-1024 px (the filters above the rows, as on every list) the tenant, approval and policy version columns
    # give way (they are on each event's page; scoutsite/static/scout/admin.css): at 800 px two columns of eight showed.
    list_filter = (
        "event_type",
        "outcome",
        ("user", VisiblePersonFilter),
        RecentToolFilter,
        VisibleTokenFilter,
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("subject_shown", "agent_shown", "tenant", "tool_ref", "approval_ref", "trace_id")
    search_help_text = (
        "Finds part of a person's or agent's name, a tenant, a tool id (server::tool), an approval id or a trace id, "
        f"as this list shows them: a person of a tenant you are not in is found as “{OTHER_TENANT_PERSON}”."
    )
    hidden_lookups = ("human_subject", "agent", "user", "token_ref")  # read masked: no ?human_subject__startswith=
    # The list filters' own, which keep to visible people: VisiblePersonFilter's and VisibleTokenFilter's (Z12).
    filter_lookups = ("user__id__exact", "user__isnull", "token_ref")
    paginator = BoundedCountPaginator
    show_full_result_count = False
    list_per_page = 100
    list_max_show_all = 100  # a searched list's count stops at the page: "Show all" could be the whole trail
    actions = None
    list_title = "Audit trail — who did what, with which tool, when"

    def object_title(self, request, obj: AuditEvent) -> str:
        when = f"{timezone.localtime(obj.created_at):%Y-%m-%d %H:%M:%S}"
        return f"{obj.get_event_type_display()} ({obj.get_outcome_display().lower()}), {when}"

    def get_queryset(self, request):
        # Shared events and those of the viewer's tenants; superusers read the whole trail (Z12).
        return audit_events_visible_to(principal=principal_for_user(request.user)).order_by("-created_at", "-id")

    @admin.display(description="when", ordering="created_at")
    def when(self, obj: AuditEvent) -> str:
        return compact_time(obj.created_at)

    def get_list_display(self, request):
        # The event cell of a grant or revocation says what it gave to whom, as this reader may read the payload.
        @admin.display(description="event", ordering="event_type")
        def event(obj: AuditEvent) -> str:
            return self.event(obj, viewer=request.user)

        return tuple(event if name == "event" else name for name in self.list_display)

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)  # a search's page: PageBoundSearchMixin
        self._link_grant_targets(request, changelist.result_list)
        self._attach_approval_states(request, changelist.result_list)
        return changelist

    def event(self, obj: AuditEvent, *, viewer=None) -> str:
        cell = format_html("{}<br><small>{}</small>", obj.get_event_type_display(), obj.get_outcome_display())
        since = getattr(obj, "approval_since", "")
        if since:
            return format_html('{}<br><small class="approval-since">{}</small>', cell, since)
        if obj.event_type not in GRANT_EVENTS or viewer is None:
            return cell
        payload = audit_payload_shown(obj, viewer=viewer)
        text = grant_change_text(obj.event_type, payload, getattr(obj, "target_url", None))
        return format_html('{}<br><small class="grant-change">{}</small>', cell, text)

    def _link_grant_targets(self, request, events) -> None:
        """Sets ``target_url`` on the page's grant events: the page of the server or tool each names, as it is now
        (none once deleted or renamed) and where the reader may open it (``admin_urls_for``). A few queries for
        the whole page, whatever its number of rows."""
        grants = [event for event in events if event.event_type in GRANT_EVENTS and isinstance(event.payload, dict)]
        tools = Tool.objects.in_bulk({event.tool_id for event in grants if event.tool_id is not None})
        slugs = {str(event.payload.get("target")) for event in grants if event.tool_id is None}
        servers = Server.objects.in_bulk(slugs, field_name="slug")
        for event in grants:
            target = str(event.payload.get("target"))
            if event.tool_id is None:
                event.named_object = servers.get(target)
            else:  # a tool renamed since is not the tool the event names
                tool = tools.get(event.tool_id)
                event.named_object = tool if tool is not None and tool.tool_id == target else None
        urls = admin_urls_for(request, [event.named_object for event in grants])
        for event in grants:
            event.target_url = urls.get(event.named_object)

    def _attach_approval_states(self, request, events) -> None:
        """Sets ``approval_since`` on the page's "approval requested" events: what became of the request (the event
        is immutable and still says pending), linked to the request where the reader may open it. One query for
        the page's requests, one for their links."""
        asked = [event for event in events if event.event_type == AuditEventType.APPROVAL_REQUESTED]
        refs = {event.approval_ref for event in asked if event.approval_ref}
        if not refs:
            return
        requests = with_approval_people_shown(ApprovalRequest.objects.filter(approval_id__in=refs), viewer=request.user)
        by_ref = {approval.approval_id: approval for approval in requests}
        urls = admin_urls_for(request, by_ref.values())
        for event in asked:
            approval = by_ref.get(event.approval_ref)
            event.approval_since = approval_since_text(approval, urls.get(approval)) if approval else ""

    @admin.display(description="tool", ordering="tool_ref")
    def tool_column(self, obj: AuditEvent) -> str:
        return breakable_id(obj.tool_ref) if obj.tool_ref else "-"

    @admin.display(description="who", ordering="subject_shown")
    def subject(self, obj: AuditEvent) -> str:
        # The person and, under them, the agent, as the approval inbox says it: as two columns, a long name in each
        # left the rest no room, and "overflow-wrap: anywhere" split them ("konsta|ntinopo|ulou"). Names wrap only
        # between their parts. Another tenant's person is not named, nor their agent (Z12).
        person = breakable_name(obj.subject_shown)
        if not obj.agent_shown:
            return person
        return format_html('{}<br><small class="audit-agent">via {}</small>', person, breakable_name(obj.agent_shown))

    def get_object(self, request, object_id, from_field=None):
        event = super().get_object(request, object_id, from_field)
        if event is None:
            return None
        # The page of an immutable row (save() refuses): another tenant's person (and their agent, the groups and
        # tenants it names) is replaced in memory only, in every field that names them and in the page's title.
        event.payload = audit_payload_shown(event, viewer=request.user)
        event.agent = event.agent_shown
        if not event.subject_visible:
            event.human_subject = OTHER_TENANT_PERSON
            event.user = None
            event.token_ref = ""  # it groups that person's events
            event.delegation_chain = delegation_chain_shown(event.delegation_chain, person_visible=False)
        return event

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in AuditEvent._meta.fields]
