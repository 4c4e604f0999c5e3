"""Governance admin: approver inbox."""

import json
from collections import Counter

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import PermissionDenied
from django.db.models import Case, IntegerField, Value, When
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil

from catalog.admin.display import breakable_name
from catalog.admin.lookups import StrictLookupsMixin
from catalog.admin.readonly import ReadOnlyMixin
from catalog.admin.titles import TitledAdminMixin

from ..choices import ApprovalStatus
from ..models import ApprovalRequest, AuditEvent, ToolPolicy
from ..sanitize import reveal_deceptive
from ..selectors import (
    approval_calls,
    approval_hold_reasons,
    approval_request_history,
    approval_request_pks_decidable_by,
    approval_requester_may_execute,
    approval_requests_for_approver,
    approval_requests_usable,
    approval_requests_waiting_count,
    approval_requests_waiting_for,
    delegation_chain_shown,
    user_is_approver,
    with_approval_people_shown,
)
from ..services.approvals import ApprovalError, approval_decide, approval_deny_many
from .common import _pre, admin_url_for, breakable_id, risk_badge


class ApprovalDecisionForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=2000)


class DecidedByFilter(admin.SimpleListFilter):
    """An approver's history: the requests they decided (approved or denied) themselves."""

    title = "decided by"
    parameter_name = "decided"

    def lookups(self, request, model_admin):
        return [("me", "Me")]

    def queryset(self, request, queryset):
        return queryset.filter(decided_by=request.user) if self.value() == "me" else queryset


class WaitingFilter(admin.SimpleListFilter):
    """The requests this approver may decide now (``approval_requests_waiting_for``): the count at the top of every
    page leads here, and counts these same rows."""

    title = "waiting"
    parameter_name = "waiting"

    def lookups(self, request, model_admin):
        return [("you", "Waiting for you")]

    def queryset(self, request, queryset):
        if self.value() != "you":
            return queryset
        return queryset.filter(pk__in=[row.pk for row in approval_requests_waiting_for(user=request.user)])


REASON_SHOWN = 80  # characters of a decision's reason on the list; its page has all of it
_OPEN = (ApprovalStatus.PENDING, ApprovalStatus.APPROVED)  # still to decide or to use: "usable" applies


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyMixin, TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin[ApprovalRequest]):
    # Each row leads with what is asked (the call, then who asked and when further on); Decide comes second so no
    # viewport clips it; six narrow, wrapping columns fit beside both sidebars at 1280 px. The request's opaque id,
    # which the agent quotes, comes last: it led each row, so an approver read ids instead of calls.
    list_display = ("tool_column", "decide_link", "status_column", "risk_badge", "requester_column", "request_column")
    list_display_links = None  # the call links to its page itself: a linked first column is a <th>, not a cell
    list_filter = (WaitingFilter, "status", DecidedByFilter, "risk_class", "operation_class")
    # Whether each request on the page is still usable is read for the page at once (executable_pairs); 50 keeps a
    # page short to read, decisions chain by "Next".
    list_per_page = 50
    # Many calls refused at once (an agent that looped, a tool under incident), each denied and audited as one is.
    actions = ["deny_selected"]
    # Z12: no other tenant's name. The reason finds a past decision by what it said ("freeze", "customer data").
    search_fields = ("approval_id", "tool__tool_id", "requester_shown", "agent_shown", "decision_reason")
    # Read masked: no ?agent__startswith=, ?requester=17, nor the token that groups a masked person's requests (Z12).
    hidden_lookups = ("agent", "requester", "decided_by", "token", "token_ref")
    readonly_fields = (
        "approval_id",
        "status",
        "tool",
        "risk_class",
        "operation_class",
        "envelope",
        "arguments_pretty",
        "arguments_digest",
        "tool_definition_hash",
        "policy_version",
        "created_at",
        "expires_at",
        "decider",
        "decided_at",
        "decision_reason",
        "consumed_at",
    )
    fields = readonly_fields

    def get_queryset(self, request):
        # Superusers read every request; deciding still needs an approve grant (approval_decide checks).
        if request.user.is_superuser:
            return with_approval_people_shown(_all_pending_first(), viewer=request.user)
        return approval_requests_for_approver(user=request.user)

    def get_ordering(self, request):
        return ["pending_first", "-created_at", "-id"]  # annotated by both querysets above

    def get_changelist_instance(self, request):
        # Whether each open request is still usable, for the page at once (a fixed number of queries).
        changelist = super().get_changelist_instance(request)
        rows = list(changelist.result_list)  # evaluated here; the page renders these same objects
        usable = approval_requests_usable(requests=[row for row in rows if row.status in _OPEN], cached=True)
        # The call that used each used request, and how it ended: an approver's history without the audit trail.
        used = [row.approval_id for row in rows if row.status == ApprovalStatus.CONSUMED]
        calls = approval_calls(user=request.user, approval_ids=used) if used else {}
        # The rows a bulk denial offers: those waiting for this person (the inbox's "waiting for you").
        decidable = approval_request_pks_decidable_by(
            user=request.user, pks=[row.pk for row in rows if row.status == ApprovalStatus.PENDING]
        )
        for row in rows:
            row.requester_may_execute = row.pk in usable
            row.call = calls.get(row.approval_id)
            row.decidable = row.pk in decidable and row.requester_may_execute
        changelist.decidable_count = sum(row.decidable for row in rows)
        dropped = set()
        if not changelist.decidable_count:  # no select-all box over rows none of which can be ticked
            dropped.add("action_checkbox")
        if not any(row.status == ApprovalStatus.PENDING for row in rows):
            dropped.add("decide_link")  # an approver's history: no "Decide" column empty on every row
        changelist.list_display = [name for name in changelist.list_display if name not in dropped]
        return changelist

    def get_actions(self, request):
        # No checkbox column for someone nothing waits for (an approver reading their history, a superuser without
        # approve grants); a POST keeps the action, whatever was decided meanwhile.
        if request.method != "POST" and not approval_requests_waiting_count(user=request.user):
            return {}
        return super().get_actions(request)

    class Media:
        js = ("scout/bulk_deny.js",)  # a denial without a reason stopped before it is sent (the server refuses it too)

    @admin.display(empty_value="")  # an empty cell (no "-") where nothing can be selected
    def action_checkbox(self, obj):
        # Only a request this person may deny now can be selected: decided, expired or their own ones cannot.
        return super().action_checkbox(obj) if getattr(obj, "decidable", False) else ""

    @admin.action(description="Deny selected")
    def deny_selected(self, request: HttpRequest, queryset) -> None:
        # Only the boxes ticked on this page, never "all N across pages": each one is a decision someone read.
        chosen = queryset.filter(pk__in=request.POST.getlist(ACTION_CHECKBOX_NAME))
        try:
            ended = approval_deny_many(requests=chosen, approver=request.user, reason=request.POST.get("reason", ""))
        except ApprovalError:  # reason_required, checked before any denial
            messages.error(request, "Nothing denied: a denial needs a reason, which each agent is told.")
            return
        outcomes = Counter(ended.values())
        denied = outcomes.pop("denied", 0)
        if denied:
            noun = "request" if denied == 1 else "requests"
            messages.success(request, f"Denied {denied} {noun}: each agent is told your reason.")
        if outcomes:
            left = ", ".join(f"{count} {_NOT_DENIED.get(code, code)}" for code, count in sorted(outcomes.items()))
            messages.warning(request, f"Not denied: {left}.")

    def _may_see(self, request) -> bool:
        user = request.user
        if not (user.is_active and user.is_staff):
            return False
        return user.is_superuser or user_is_approver(user=user)

    def has_module_permission(self, request) -> bool:
        return self._may_see(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return self._may_see(request)

    @admin.display(description="who asked")
    def envelope(self, obj: ApprovalRequest):
        # A tenant-less request of another tenant's person names them (and their agent) nowhere (Z12).
        chain = delegation_chain_shown(obj.delegation_chain, person_visible=obj.requester_visible)
        lines = [
            f"human subject: {obj.requester_shown}",
            f"agent: {obj.agent_shown or '-'}",
            f"tenant: {obj.tenant or '-'}",
            f"token: {(obj.token_ref if obj.requester_visible else '') or '-'}",
            f"delegation chain: {' > '.join(chain) or '-'}",
            f"server: {obj.tool.server.slug} ({obj.tool.server.environment})",
            f"trace id: {obj.trace_id or '-'}",
        ]
        return _pre("\n".join(lines))

    @admin.display(description="who asked, when", ordering="requester_shown")
    def requester_column(self, obj: ApprovalRequest):
        # The agent too, as the home page and the decide page say it: which of a person's agents keeps asking.
        agent = format_html('<br><small class="asking-agent">via {}</small>', breakable_name(obj.agent_shown))
        return format_html(
            '{}{}<br><small class="asked-at">{}</small>',
            breakable_name(obj.requester_shown),
            agent if obj.agent_shown else "",
            timezone.localtime(obj.created_at).strftime("%Y-%m-%d %H:%M"),
        )

    @admin.display(description="decided by")
    def decider(self, obj: ApprovalRequest) -> str:
        return obj.decided_by_shown or "-"

    @admin.display(description="exact arguments")
    def arguments_pretty(self, obj: ApprovalRequest):
        # Letters as written (an umlaut was "\\u00f6"), what hides or disguises something still escaped.
        text = json.dumps(json.loads(obj.arguments_json), indent=2, sort_keys=True, ensure_ascii=False)
        shown = reveal_deceptive(text)
        if shown == text:
            return _pre(text)
        return format_html(
            '{}<p class="help" id="arguments-revealed">Shown as \\u escapes: characters that are invisible, change '
            "the text's direction, or only look like a Latin letter in a Latin word. The call carries them as they "
            "are.</p>",
            _pre(shown),
        )

    @admin.display(description="usable")
    def usable(self, obj: ApprovalRequest):
        """Checked now, not when it was decided: an open request whose requester lost access is worth nothing
        (the periodic sweep marks it expired; use is refused either way)."""
        if obj.status not in _OPEN:
            return ""
        may_execute = getattr(obj, "requester_may_execute", None)  # set for a changelist page
        if may_execute is None:
            may_execute = approval_requester_may_execute(request=obj)
        if not may_execute:
            return "no longer usable: requester lost access"
        return "yes"

    # Not sortable: an opaque id orders nothing. Ordered by when it was asked, the model's newest-first order marked
    # this column sorted, although the rows come pending first (``get_ordering``, which Django does not mark).
    @admin.display(description="request id")
    def request_column(self, obj: ApprovalRequest):
        return format_html('<small class="approval-id">{}</small>', obj.approval_id)

    @admin.display(description="the call", ordering="tool__tool_id")
    def tool_column(self, obj: ApprovalRequest):
        # The tool (wrapping at :: and _, not letter by letter) and its arguments in short: twenty calls of one tool
        # told apart on the list, not by opening each (the decide page has them whole).
        return format_html(
            '<a href="{}">{}</a><br><small class="call-arguments">{}</small>',
            reverse("admin:governance_approvalrequest_change", args=[obj.pk]),
            breakable_id(tool_id_shown(obj)),
            arguments_line(obj),
        )

    # Sorted by it, the rows come as they do unsorted, pending first (the other way, last), not in the alphabetical
    # order of the statuses' names.
    @admin.display(description="status", ordering="pending_first")
    def status_column(self, obj: ApprovalRequest):
        usable = self.usable(obj)
        if usable and usable != "yes":
            return format_html('{}<br><small class="scout-held-text">{}</small>', obj.get_status_display(), usable)
        if obj.status == ApprovalStatus.PENDING:
            # When it lapses, on the list: the one to decide first is the one about to expire.
            if obj.expires_at <= timezone.now():
                return format_html('{}<br><small class="expires">expired, undecided</small>', obj.get_status_display())
            return format_html(
                '{}<br><small class="expires">decide before <span class="scout-time">{}</span> ({})</small>',
                obj.get_status_display(),
                timezone.localtime(obj.expires_at).strftime("%Y-%m-%d %H:%M"),
                time_left(obj.expires_at),
            )
        if obj.decided_by_id is None:
            return obj.get_status_display()
        # Who decided, when and why, on the list: a past decision is found here, not by opening each request.
        when = f" {timezone.localtime(obj.decided_at):%Y-%m-%d %H:%M}" if obj.decided_at else ""
        reason = Truncator(obj.decision_reason).chars(REASON_SHOWN) if obj.decision_reason else ""
        return format_html(
            '{}<br><small class="decision">by {}{}{}</small>{}',
            obj.get_status_display(),
            obj.decided_by_shown or "-",
            when,
            format_html(": “{}”", reason) if reason else "",
            _call_outcome(getattr(obj, "call", None)) or _use_before(obj),
        )

    @admin.display(description="decide", empty_value="")  # empty (the card hides it) once decided
    def decide_link(self, obj: ApprovalRequest):
        if obj.status != ApprovalStatus.PENDING:
            return ""
        url = reverse("admin:governance_approvalrequest_decide", args=[obj.pk])
        return format_html('<a class="scout-button" href="{}">Decide</a>', url)

    @admin.display(description="risk", ordering="risk_class")
    def risk_badge(self, obj: ApprovalRequest):
        return risk_badge(obj.risk_class, obj.get_risk_class_display())

    list_title = "Approval requests — pending first; open one to read the tool and decide"
    history_title = "Your decisions — the requests you approved or denied, newest first"

    def changelist_view(self, request, extra_context=None):
        # No navigation sidebar here: an approver's holds one link, this page, and beside the filters it left the call
        # ~170 px (rows five lines tall at 1280 px, adminux30). Home, in the breadcrumbs, leads everywhere else.
        extra_context = {"is_nav_sidebar_enabled": False, **(extra_context or {})}
        # An approver's history (the home page's "Your decisions") is titled as such: under the inbox's title an
        # empty history read as an empty inbox.
        if request.GET.get(DecidedByFilter.parameter_name) == "me":
            only = set(request.GET) <= {DecidedByFilter.parameter_name}
            extra_context = {
                "title": self.history_title,
                "history": "only" if only else "filtered",
                **(extra_context or {}),
            }
        return super().changelist_view(request, extra_context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # The request's own page is where it is decided: the same view as ".../decide/".
        try:
            pk = int(object_id)
        except (TypeError, ValueError):
            raise Http404("No such approval request") from None
        return self.decide_view(request, pk)

    def get_urls(self):
        custom = [
            path(
                "<int:pk>/decide/",
                self.admin_site.admin_view(self.decide_view),
                name="governance_approvalrequest_decide",
            )
        ]
        return custom + super().get_urls()

    def _related_links(self, request: HttpRequest, obj: ApprovalRequest) -> list[tuple[str, str]]:
        """(label, url): the tool, the token the call came with and the audit trail of this request, each only
        where this person may open it (an approver without catalog or token permissions gets none)."""
        links = []
        tool_url = admin_url_for(request, obj.tool)
        if tool_url:
            links.append((f"The tool {tool_id_shown(obj)}", tool_url))
        token_url = admin_url_for(request, obj.token)
        if token_url:
            links.append((f"The API token {obj.token.name} ({obj.token_ref})", token_url))
        if admin.site.is_registered(AuditEvent) and admin.site.get_model_admin(AuditEvent).has_view_permission(request):
            audit = reverse("admin:governance_auditevent_changelist") + "?" + urlencode({"q": obj.approval_id})
            links.append(("This request in the audit trail", audit))
        return links

    def asked(self, request: HttpRequest, obj: ApprovalRequest) -> object | None:
        """The requesting user's words for what the call is for, where an app above governance knows them (search
        re-registers this admin with its query log's ``AskedSearches``, search/admin.py: ``query``, ``searched_at``,
        ``later``, ``later_count``, ``later_listed_tool``); governance keeps no such record."""
        return None

    def decide_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Show the request (envelope, tool, risk, exact arguments) and approve or deny it with a reason."""
        if not self._may_see(request):
            raise PermissionDenied
        obj = self.get_queryset(request).filter(pk=pk).first()
        if obj is None:
            raise Http404("No such approval request")
        form = ApprovalDecisionForm(request.POST or None)
        status, reason_missing = 200, False
        if request.method == "POST" and form.is_valid():
            approve = "_approve" in request.POST
            if not approve and "_deny" not in request.POST:
                messages.error(request, "Choose approve or deny.")
            else:
                try:
                    approval_decide(
                        request=obj, approver=request.user, approve=approve, reason=form.cleaned_data["reason"]
                    )
                except ApprovalError as exc:
                    messages.error(request, str(exc))
                    status = 403 if exc.code in ("self_approval", "forbidden") else 409
                    reason_missing = exc.code == "reason_required"
                else:
                    # What was decided, as the inbox leads with it (the call, who asked); the opaque id after it.
                    call = f"{approval_call(obj)} ({obj.approval_id})"
                    if approve:
                        # Until when, as the page said it would be: the approval's own life starts now.
                        until = f"{timezone.localtime(obj.expires_at):%Y-%m-%d %H:%M}, {time_left(obj.expires_at)}"
                        text = f"Approved {call}: the agent may now make this exact call once, before {until}."
                    else:
                        text = f"Denied {call}: the agent is told your reason."
                    messages.success(request, format_html("{} {}", text, _next_waiting(request, obj)))
                    return HttpResponseRedirect(reverse("admin:governance_approvalrequest_changelist"))
        can_decide = obj.status == ApprovalStatus.PENDING and obj.expires_at > timezone.now()
        # Approving would be refused (and void the request): say so before the click, as the inbox row does.
        lost_access = can_decide and not approval_requester_may_execute(request=obj)
        context = {
            **self.admin_site.each_context(request),
            # No navigation sidebar, as on the inbox: an approver's holds one link, and at 800 px it left the call and
            # the buttons three fifths of the window (adminux34).
            "is_nav_sidebar_enabled": False,
            "opts": self.opts,
            "obj": obj,
            "form": form,
            "envelope": self.envelope(obj),
            "arguments": self.arguments_pretty(obj),
            # Decided, used or expired: the page is the request's record, not a decision to make.
            "title": decide_title(obj, can_decide=can_decide),
            # The call without its arguments: the title, under the breadcrumb, has them.
            "crumb": decide_title(obj, can_decide=can_decide, arguments=False),
            # What the tool does, read by the approver without catalog permissions (untrusted text, escaped).
            "tool": obj.tool,
            "tool_id_shown": tool_id_shown(obj),
            "tool_title_shown": reveal_deceptive(obj.tool.display_title),
            "risk": risk_badge(obj.risk_class, obj.get_risk_class_display()),
            # Which rule held the call, and where the tool's classes came from: what an approver weighs first.
            "hold_reasons": approval_hold_reasons(request=obj),
            "annotations": _pre(json.dumps(obj.tool.annotations or {}, indent=2, sort_keys=True)),
            "can_decide": can_decide,
            # How long is left, beside the absolute time, and what happens then: "decide before 21:47" alone left
            # the approver to work out the minutes, and not whether an undecided request stays or lapses.
            "deadline": deadline(obj),
            "lost_access": lost_access,
            "reason_missing": reason_missing,  # a denial without a reason: the box is marked, what was typed kept
            "related": self._related_links(request, obj),
            # What became of it (decided, used, the call and how it ended), from the audit trail as this reader may
            # read it: an approver holds no audit permission.
            "history": approval_request_history(user=request.user, approval_id=obj.approval_id),
            "asked": self.asked(request, obj),
        }
        return render(request, "admin/governance/approvalrequest/decide.html", context, status=status)


ARGUMENT_SHOWN = 40  # characters of each argument's value on the list
ARGUMENTS_SHOWN = 160  # characters of all of them
ARGUMENTS_IN_TITLE = 60  # ... and in the decide page's title, which a phone shows in three lines at most


def approval_call(obj: ApprovalRequest) -> str:
    """The call as the inbox leads with it, the tool and who asked ("memory::delete_entities for alice"): the
    decide page's title and breadcrumb and the message after a decision."""
    return f"{tool_id_shown(obj)} for {obj.requester_shown}"


def decide_title(obj: ApprovalRequest, *, can_decide: bool, arguments: bool = True) -> str:
    """The decide page's title: the call as a person reads it, the tool, who asked and with what ("Decide
    memory::delete_entities for alice: entityNames: ["old notes"]"); the opaque ``apr_`` id is on the page under it.
    Decided, used or expired: the request's record, not a decision to make. Without ``arguments``: the breadcrumb,
    one line above the title, which three lines of a long call had filled."""
    call = approval_call(obj)
    if arguments:
        call = f"{call}: {arguments_line(obj, shown=ARGUMENTS_IN_TITLE)}"
    if can_decide:
        return f"Decide {call}"
    state = "expired, undecided" if obj.status == ApprovalStatus.PENDING else obj.get_status_display().lower()
    return f"Approval request ({state}): {call}"


def tool_id_shown(obj: ApprovalRequest) -> str:
    """The tool's id as an approver reads it: its name is its upstream's choice (sync refuses only control characters
    and "::"), and a direction override in it (kept once a curator accepted its review) reversed the rest of the title
    (who asked, the arguments); what hides or disguises is escaped as in the arguments (redteam40)."""
    return reveal_deceptive(obj.tool.tool_id)


def arguments_line(obj: ApprovalRequest, *, shown: int = ARGUMENTS_SHOWN) -> str:
    """The call's arguments on one line, each value cut short (``name: "value" · ...``), all of them to ``shown``
    characters; escaped where shown."""
    arguments = json.loads(obj.arguments_json)
    if not arguments:
        return "no arguments"
    parts = [
        f"{name}: {Truncator(json.dumps(value, ensure_ascii=False)).chars(ARGUMENT_SHOWN)}"
        for name, value in sorted(arguments.items())
    ]
    # Escaped after the cuts, so that none falls inside an escape (a bidi override reorders the rest of the line).
    return reveal_deceptive(Truncator(" · ".join(parts)).chars(shown))


# Why a selected request was not denied, by ApprovalError code (approval_deny_many).
_NOT_DENIED = {
    "not_pending": "already decided",
    "expired": "expired",
    "forbidden": "not yours to decide",
    "self_approval": "asked by you",
}


def time_left(when, *, now=None) -> str:
    """``when`` from now as an approver reads a deadline: "expires in 12 minutes", "expires in 23 hours, 59 minutes";
    "expires in less than a minute" (Django's "0 minutes" read as expired); "expired 5 minutes ago" once past."""
    now = now or timezone.now()
    if when <= now:
        return f"expired {timesince(when, now, depth=1)} ago"
    if (when - now).total_seconds() < 60:
        return "expires in less than a minute"
    return f"expires in {timeuntil(when, now, depth=2)}"


def deadline(obj: ApprovalRequest) -> dict[str, str]:
    """The decide page's deadline: ``left`` (``time_left``) and ``then``, what happens when it passes, for a request
    still open (pending or approved); {} for the others."""
    now = timezone.now()
    if obj.status == ApprovalStatus.PENDING and obj.expires_at > now:
        # The approval's life is its tool's risk class's, read when it is approved (``approval_decide``).
        ttl = ToolPolicy.objects.filter(tool_id=obj.tool_id).values_list("risk_class__approval_ttl", flat=True).first()
        use = f" within {timeuntil(now + ttl, now, depth=2)}" if ttl else ""
        return {
            "left": time_left(obj.expires_at, now=now),
            "then": "Undecided by then, the request expires: the agent's call is refused as expired, and it must ask "
            f"again, which opens a new request. Once approved, the agent may make this exact call once{use}; "
            "unused by then, the approval expires too.",
        }
    if obj.status == ApprovalStatus.APPROVED and obj.expires_at > now:
        return {
            "left": time_left(obj.expires_at, now=now),
            "then": "Unused by then, the approval expires: the agent's call is refused and it must ask again.",
        }
    return {}


def _use_before(obj: ApprovalRequest):
    """An approved request not used yet: until when the agent may make the call ("" otherwise)."""
    if obj.status != ApprovalStatus.APPROVED:
        return ""
    until = timezone.localtime(obj.expires_at).strftime("%Y-%m-%d %H:%M")
    return format_html('<br><small class="expires">the agent may make the call once, before {}</small>', until)


def _call_outcome(call: AuditEvent | None):
    """The call that used an approval, on the inbox's row: how it ended and when ("" before any call)."""
    if call is None:
        return ""
    when = timezone.localtime(call.created_at).strftime("%Y-%m-%d %H:%M")
    return format_html(
        '<br><small class="call-outcome">the call: {}, {}</small>', call.get_outcome_display().lower(), when
    )


def _next_waiting(request: HttpRequest, decided: ApprovalRequest):
    """The next request waiting for this approver (the inbox's first other pending one they may decide), linked to
    its decide page: one click to the next decision, not back through the inbox (whose tool column a phone scrolls
    out of view)."""
    waiting = [row for row in approval_requests_waiting_for(user=request.user) if row.pk != decided.pk]
    if not waiting:
        return "Nothing else waits for you."
    following, more = waiting[0], len(waiting) - 1
    return format_html(
        'Next: <a id="next-approval" href="{}">{}, {} risk</a>{}.',
        reverse("admin:governance_approvalrequest_decide", args=[following.pk]),
        tool_id_shown(following),
        following.get_risk_class_display().lower(),
        f" ({more} more waiting)" if more else "",
    )


def _all_pending_first():
    return (
        ApprovalRequest.objects.select_related("requester", "tool", "tool__server", "decided_by", "policy_version")
        .annotate(
            pending_first=Case(
                When(status=ApprovalStatus.PENDING, then=Value(0)), default=Value(1), output_field=IntegerField()
            )
        )
        .order_by("pending_first", "-created_at", "-id")
    )
