"""Scout's admin site: the stock Django admin, with each role's work first on the home page, navigation
grouped by job in plain names, and a pending-approvals count in the header for approvers."""

from datetime import UTC, datetime, timedelta
from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.db.models import Case, Exists, OuterRef, Q, Subquery, Value, When
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.text import capfirst

from governance.api.throttling import FailOpenThrottle

HOME_ROWS = 10
FAILURE_WINDOW = timedelta(days=7)

# Job → (plain name, models as "app_label.ModelName"); anything not listed lands in "Records".
NAVIGATION: list[tuple[str, list[str]]] = [
    ("Approvals", ["governance.ApprovalRequest", "governance.NotificationAttempt"]),
    (
        "Search & curation",
        ["catalog.Tool", "search.LearnedRequest", "search.QueryLogEntry", "mcpgateway.PinnedTool"],
    ),
    ("Servers & sync", ["catalog.Server", "catalog.SyncRun", "catalog.ToolRevision", "governance.ToolReview"]),
    (
        "Access",
        [
            "governance.ServerGroupObjectPermission",
            "governance.ServerUserObjectPermission",
            "governance.ToolGroupObjectPermission",
            "governance.ToolUserObjectPermission",
            "governance.ApiToken",
            "governance.Agent",
            "governance.Tenant",
            "auth.User",
            "auth.Group",
            "governance.Entitlement",
        ],
    ),
    ("Risk & policy", ["governance.ToolPolicy", "governance.RiskClass", "governance.PolicyVersion"]),
]
# Pages that are not models, shown in the navigation beside the models of their job, to people holding every
# permission the page's view checks (search.workbench.WORKBENCH_PERMISSIONS, search.preview.PREVIEW_PERMISSION,
# scoutsite.dashboard): a link its reader would get 403 from is a dead end.
EXTRA_PAGES = {
    "Search & curation": [
        ("Search workbench", "search_workbench", ("catalog.change_tool", "search.view_querylogentry")),
        ("Search preview", "search_preview", ("catalog.view_tool",)),
    ],
    "Servers & sync": [
        ("Dashboard", "dashboard", ("catalog.view_server",)),
        # What agents' searches returned and cost: the operator's only view of them (the query log is the curators').
        ("Searches", "dashboard_searches", ("catalog.view_server",)),
    ],
}


class ScoutAdminSite(admin.AdminSite):
    site_header = "Scout"
    site_title = "Scout admin"
    index_title = "Home"
    index_template = "admin/scout_index.html"

    def each_context(self, request: HttpRequest) -> dict[str, Any]:
        context = super().each_context(request)
        context["scout_pending_approvals"] = _pending_count(request)
        return context

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[dict[str, Any]]:
        apps = super().get_app_list(request, app_label)
        if app_label is not None:
            return apps  # an app's own index page keeps Django's layout
        return _grouped(request, apps)

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None):
        panels = {**role_panels(request), "recent_actions": recent_actions(request.user)}
        return super().index(request, {**panels, **(extra_context or {})})

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """Django's sign-in page, with attempts counted per client address (``LoginRateThrottle``): past the rate a
        POST is refused before any password is checked."""
        if request.method == "POST":
            throttle = LoginRateThrottle()
            if not throttle.allow_request(request, None):
                return self._login_refused(request, wait=throttle.wait())
        return super().login(request, extra_context)

    def password_change(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """Django's password change, whose form checks the old password: attempts counted per person
        (``PasswordChangeRateThrottle``), so a stolen session cannot guess the password to reuse it elsewhere; past
        the rate a POST is refused before any password is checked (redteam58's open item)."""
        if request.method == "POST" and request.user.is_authenticated:
            throttle = PasswordChangeRateThrottle()
            if not throttle.allow_request(request, None):
                return self._password_change_refused(request, wait=throttle.wait())
        return super().password_change(request, extra_context)

    def _password_change_refused(self, request: HttpRequest, *, wait: float | None) -> HttpResponse:
        from django.contrib.admin.forms import AdminPasswordChangeForm  # imports the user model: not at module level

        seconds = max(1, round(wait or 1))
        messages.error(request, f"Too many password change attempts. Try again in {seconds} seconds.")
        context = {"title": "Password change", "form": AdminPasswordChangeForm(request.user)}
        template = self.password_change_template or "registration/password_change_form.html"
        return self._refused(request, template, context, seconds)

    def _login_refused(self, request: HttpRequest, *, wait: float | None) -> HttpResponse:
        from django.contrib.admin.forms import AdminAuthenticationForm  # imports the user model: not at module level

        seconds = max(1, round(wait or 1))
        messages.error(request, f"Too many sign-in attempts from your address. Try again in {seconds} seconds.")
        context = {
            "title": "Log in",
            "app_path": request.get_full_path(),
            "username": request.user.get_username(),
            "form": AdminAuthenticationForm(request),
            REDIRECT_FIELD_NAME: reverse("admin:index", current_app=self.name),
        }
        return self._refused(request, self.login_template or "admin/login.html", context, seconds)

    def _refused(self, request: HttpRequest, template: str, context: dict[str, Any], seconds: int) -> HttpResponse:
        """The page of a form refused past its rate: 429 with Retry-After, its form empty (nothing typed is shown
        again), the message saying when to try again."""
        request.current_app = self.name
        context = {**self.each_context(request), "subtitle": None, **context}
        response = TemplateResponse(request, template, context, status=429)
        response["Retry-After"] = str(seconds)
        return response


class LoginRateThrottle(FailOpenThrottle):
    """Sign-in attempts per client address, ``SCOUT_ADMIN_LOGIN_RATE`` (empty: no limit). The address is the one the
    REST API's anonymous limit counts (the connection's, or the one the Nth trusted proxy added:
    ``SCOUT_API_NUM_PROXIES``). Each attempt runs the password hasher (PBKDF2: some 0.2 s of CPU), for an unknown
    name too. A cache outage lets attempts through, as for the API."""

    scope = "admin-login"

    def get_rate(self) -> str | None:
        return settings.SCOUT_ADMIN_LOGIN_RATE or None

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class PasswordChangeRateThrottle(LoginRateThrottle):
    """Password change attempts per person, at the sign-in rate (``SCOUT_ADMIN_LOGIN_RATE``): the form checks the old
    password, one hasher run per attempt, and a person's budget holds whatever addresses their session comes from."""

    scope = "admin-password-change"

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


def _pending_count(request: HttpRequest) -> int | None:
    """Requests waiting for this person to decide (``approval_requests_waiting_count``, read once per request: the
    badge on every page, without reading each request), or None when they approve nothing."""
    from governance.selectors import approval_requests_waiting_count

    return approval_requests_waiting_count(user=request.user) if _approves(request) else None


def _waiting(request: HttpRequest) -> list | None:
    """``approval_requests_waiting_for`` this person (the home page's panel; the badge then reads its count), or None
    when they approve nothing."""
    from governance.selectors import approval_requests_waiting_for

    return approval_requests_waiting_for(user=request.user) if _approves(request) else None


def _approves(request: HttpRequest) -> bool:
    from governance.selectors.approvals import user_is_approver

    user = getattr(request, "user", None)
    return user is not None and user.is_authenticated and user.is_staff and user_is_approver(user=user)


def _grouped(request: HttpRequest, apps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    models = {f"{app['app_label']}.{model['object_name']}": model for app in apps for model in app["models"]}
    grouped, placed = [], set()
    for title, names in NAVIGATION:
        entries = [models[name] for name in names if name in models]
        placed.update(name for name in names if name in models)
        entries += _extra_pages(request, title)
        if entries:
            grouped.append(_group(title, entries))
    rest = [model for name, model in models.items() if name not in placed]
    if rest:
        grouped.append(_group("Records", rest))
    return grouped


def _extra_pages(request: HttpRequest, title: str) -> list[dict[str, Any]]:
    pages = []
    for name, url_name, permissions in EXTRA_PAGES.get(title, []):
        if not request.user.has_perms(permissions):
            continue
        try:
            url = reverse(url_name)
        except NoReverseMatch:
            continue
        pages.append({"name": name, "object_name": url_name, "admin_url": url, "add_url": None, "view_only": True,
                      "perms": {"view": True}})  # fmt: skip
    return pages


def _group(title: str, models: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": title, "app_label": _group_slug(title), "app_url": _group_url(title),
            "has_module_perms": True, "models": models}  # fmt: skip


def _group_slug(title: str) -> str:
    return title.lower().replace(" & ", "-").replace(" ", "-")


def _group_url(title: str) -> str:
    return f"{reverse('admin:index')}#{_group_slug(title)}"


def navigation_group(model_label: str) -> tuple[str, str]:
    """The job group a model ("app_label.ModelName") is listed under in the navigation: its name and link, as the
    navigation shows them (each model is in one group; one not listed is in "Records")."""
    title = next((title for title, names in NAVIGATION if model_label in names), "Records")
    return title, _group_url(title)


def navigation_page(anchor: str) -> tuple[str, str, str, str]:
    """Where a page that is not a model's own sits in the navigation: (group name, group link, page name, page link)
    of ``anchor``, a model ("app_label.ModelName": its list, named as the navigation names it) or one of EXTRA_PAGES
    (by URL name). An anchor the navigation does not know raises LookupError or ValueError (as apps.get_model)."""
    for title, pages in EXTRA_PAGES.items():
        for name, url_name, _ in pages:
            if url_name == anchor:
                return title, _group_url(title), name, reverse(url_name)
    opts = apps.get_model(anchor)._meta
    title, group_url = navigation_group(opts.label)
    changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    return title, group_url, capfirst(opts.verbose_name_plural), changelist


def role_panels(request: HttpRequest) -> dict[str, Any]:
    """What each of this person's jobs needs first: work for a curator, approver and operator."""
    user = request.user
    context: dict[str, Any] = {}
    if user.has_perm("catalog.change_tool"):
        context["curator_panel"] = _curator_panel(user)
    waiting = _waiting(request)
    if waiting is not None:
        context["approver_panel"] = _approver_panel(request, waiting)
    elif user.has_perm("governance.view_approvalrequest") and not user.is_superuser:
        # In the Approvers group but holding approve on nothing yet: say how that changes, not "no permission".
        context["approver_unassigned"] = True
    if user.has_perm("catalog.change_server"):
        context["operator_panel"] = _operator_panel(request)
        context["operator_panel"]["may_register"] = _may_register_server(request)
    return context


# The audit events that record what a person decided themselves (not their agents' searches, calls and approval
# requests, which are their tokens' traffic): the home's "Your recent actions" lists these.
OWN_EVENT_TYPES = (
    "approval.approved",
    "approval.denied",
    "grant",
    "revoke",
    "review.accepted",
    "review.rejected",
    "token.created",
    "token.revoked",
    "policy.changed",
    "entitlement.changed",
)

# An approver's decision reads as what they did, beside the tool and whose call it was.
DECISION_WORDS = {"approval.approved": "Approved:", "approval.denied": "Denied:"}


def recent_actions(user) -> list[dict[str, Any]]:
    """This person's latest actions, newest first (``HOME_ROWS``), from Scout's own records: the audit events of their
    decisions (``OWN_EVENT_TYPES``) that they may still read, the admin's history of what they saved (a tool's or a
    server's page, and curation from the workbench and the learned requests, ``catalog.admin.history``), the syncs
    they asked for (``_syncs_started``), and the workbench requests they dismissed. Each is ``{"when", "what",
    "target", "url"}`` (``url`` None: no page to open). Django's panel read only the admin's history, which none of
    those decisions wrote: it said "None available" to an approver who had decided twenty requests."""
    from django.contrib.admin.models import ADDITION, DELETION, LogEntry

    from governance.admin.audit import GRANT_EVENTS, grant_change_text
    from governance.principals import principal_for_user
    from governance.selectors import audit_events_visible_to, audit_payload_shown
    from search.models import DismissedRequest

    flag_words = {ADDITION: "Added", DELETION: "Deleted"}  # a change says what it changed

    rows: list[dict[str, Any]] = []
    events = audit_events_visible_to(principal=principal_for_user(user)).filter(
        user=user, event_type__in=OWN_EVENT_TYPES
    )
    may_read_events = user.has_perm("governance.view_auditevent")
    decisions = f"{reverse('admin:governance_approvalrequest_changelist')}?decided=me"
    for event in events.order_by("-created_at", "-id")[:HOME_ROWS]:
        payload = audit_payload_shown(event, viewer=user)
        what = event.get_event_type_display()
        if event.event_type in GRANT_EVENTS:
            target = grant_change_text(event.event_type, payload)
        elif event.event_type in DECISION_WORDS:  # "Approved: <tool> for <person>", not "Approval approved <tool>"
            what = DECISION_WORDS[event.event_type]
            requester = payload.get("requester", "") if isinstance(payload, dict) else ""
            target = f"{event.tool_ref or event.approval_ref} for {requester}" if requester else event.tool_ref
        else:  # a token's event names the token (tok-<id>); one naming nothing is linked by what it was
            token = payload.get("token", "") if isinstance(payload, dict) else ""
            target = event.tool_ref or event.target_server or event.approval_ref or str(token)
        if may_read_events:
            url = reverse("admin:governance_auditevent_change", args=[event.pk])
        else:  # an approver who may not read the trail reads their decisions in the inbox
            url = decisions if event.event_type.startswith("approval.") else None
        rows.append({"when": event.created_at, "what": what, "target": target, "url": url})
    for entry in LogEntry.objects.filter(user=user).select_related("content_type")[:HOME_ROWS]:
        url = None if entry.action_flag == DELETION else entry.get_admin_url() or None
        what = flag_words.get(entry.action_flag) or entry.get_change_message() or "Changed"
        rows.append({"when": entry.action_time, "what": what, "target": entry.object_repr, "url": url})
    rows += _syncs_started(user)
    workbench = f"{reverse('search_workbench')}?reason=dismissed"
    dismissals = DismissedRequest.objects.filter(dismissed_by=user)[: HOME_ROWS * 2]
    for dismissed in {row.key: row for row in reversed(dismissals)}.values():  # one per request, not per tenant
        rows.append({"when": dismissed.dismissed_at, "what": "Dismissed from the workbench (no tool should serve it)",
                     "target": dismissed.text, "url": workbench})  # fmt: skip
    return sorted(rows, key=lambda row: row["when"], reverse=True)[:HOME_ROWS]


def _syncs_started(user) -> list[dict[str, Any]]:
    """The latest syncs this person asked for (the admin's "Sync now" and "Retry sync", a new server's first sync, the
    REST API), of servers they still manage, each with its outcome as the run list shows it, and why one did not
    run."""
    from catalog.choices import SyncStatus
    from catalog.models import SyncRun

    mine = SyncRun.objects.filter(started_by=user, server__in=_managed_servers(user).values("pk"))
    runs = mine.select_related("server")[:HOME_ROWS]
    may_read_runs = user.has_perm("catalog.view_syncrun")
    rows = []
    for run in runs:
        what = f"Sync: {run.get_status_display().lower()}"
        if run.status == SyncStatus.SKIPPED and run.error:  # Scout's own reason (disabled, another sync running)
            what = f"{what}: {run.error}"
        # A failure's error stays on its page: it may repeat a URL this reader may not read (errors_cut_for).
        if may_read_runs:
            url = reverse("admin:catalog_syncrun_change", args=[run.pk])
        else:
            url = reverse("admin:catalog_server_change", args=[run.server_id])
        rows.append({"when": run.started_at, "what": what, "target": run.server.slug, "url": url})
    return rows


def _may_register_server(request: HttpRequest) -> bool:
    from catalog.models import Server

    return admin.site.get_model_admin(Server).has_add_permission(request)


def _managed_servers(user) -> Any:
    """Servers this person may manage: shared ones and their tenants' (all for a superuser)."""
    from catalog.models import Server
    from governance.selectors import servers_visible_to_operator

    return Server.objects.filter(servers_visible_to_operator(user=user))


def _curator_panel(user) -> dict[str, Any]:
    from catalog.admin.filters import held_q
    from catalog.models import Server, Tool, ToolExample
    from governance.models import ToolReview
    from governance.selectors import servers_shaped_by

    servers = _managed_servers(user).values("pk")
    # Only the reviews this curator may decide: a shared server's, once there are tenants, are a superuser's
    # (``tool_shaped_by``); those are counted apart, with who decides them, not listed as work.
    pending = ToolReview.objects.filter(status="pending", tool__removed_at__isnull=True, tool__server__in=servers)
    shaped = Server.objects.filter(servers_shaped_by(user=user)).values("pk")
    held = pending.filter(tool__server__in=shaped).select_related("tool").order_by("-created_at")
    # The tool list's status "Live" (not held), example requests "None yet" and "Tools you may curate", linked
    # from the home: a shared server's tools are not a tenant curator's work (a superuser curates them).
    no_examples = (
        Tool.objects.live()
        .filter(enabled=True, server__in=shaped)
        .exclude(held_q())
        .exclude(Exists(ToolExample.objects.filter(tool=OuterRef("pk"))))
        .select_related("server")
        .order_by("tool_id")
    )
    from search.workbench import WORKBENCH_DAYS

    waiting = _workbench_waiting(user)
    return {
        # Nothing of what follows is theirs to act on: say so once, and why, rather than leave it read as work.
        "curates_nothing": not shaped.exists(),
        "in_tenant": user.tenants.exists(),
        "learned_count": _learned_to_decide(user, shaped),
        "workbench": waiting,
        # 1129 waiting as "426 withheld · 444 low · 464 not followed" read as a miscount without a word why.
        "workbench_overlap": bool(waiting)
        and waiting["withheld"] + waiting["low"] + waiting["unfollowed"] > waiting["total"],
        "workbench_days": WORKBENCH_DAYS,
        "held": list(held[:HOME_ROWS]),
        "held_count": held.count(),
        "held_shared_count": pending.exclude(tool__server__in=shaped).count(),
        "no_examples": list(no_examples[:HOME_ROWS]),
        "no_examples_count": no_examples.count(),
    }


def _learned_to_decide(user, shaped) -> int | None:
    """Learned requests no curator has decided yet, of the tools this curator may curate (promote or reject), or
    None when they may not read learned requests."""
    from search.models import LearnedRequest
    from search.selectors import learned_to_decide

    if not user.has_perm("search.view_learnedrequest"):
        return None
    return learned_to_decide(LearnedRequest.objects.filter(tool__server__in=shaped)).count()


def _workbench_waiting(user) -> dict[str, int] | None:
    """The workbench's request groups by why they wait, or None when this curator may not open the workbench."""
    from search.workbench import WORKBENCH_PERMISSIONS, workbench_waiting

    if not user.has_perms(WORKBENCH_PERMISSIONS):
        return None
    return workbench_waiting(user=user)


def _approver_panel(request: HttpRequest, waiting: list) -> dict[str, Any]:
    from governance.admin.approvals import arguments_line, time_left
    from governance.admin.common import breakable_id
    from governance.selectors import approval_requests_for_approver

    first = [row.pk for row in waiting[:HOME_ROWS]]
    # As the inbox shows them: who asked as this approver may see them.
    rows = list(approval_requests_for_approver(user=request.user).filter(pk__in=first).order_by("-created_at", "-id"))
    for row in rows:  # as the inbox shows it: wrapped after "::" and "_" in the narrow column, not letter by letter
        row.tool_shown = breakable_id(row.tool.tool_id)
        row.arguments_shown = arguments_line(row)  # two calls of one tool by one person told apart before a click
        row.time_left = time_left(row.expires_at)  # the one about to lapse told apart from the one asked first
    return {"count": len(waiting), "rows": rows}


def _server_attention() -> Case:
    """0 for a server whose tools are hidden by a failed sync, 1 for one never synced, 3 for an archived one, else 2."""
    from catalog.choices import ServerStatus, Transport

    return Case(
        When(status__in=[ServerStatus.DEGRADED, ServerStatus.UNAVAILABLE], then=Value(0)),
        When(
            Q(status=ServerStatus.ACTIVE, last_synced_at__isnull=True) & ~Q(transport=Transport.IMPORTED), then=Value(1)
        ),
        When(status=ServerStatus.ARCHIVED, then=Value(3)),
        default=Value(2),
    )


def _failing_since() -> Subquery:
    """When a server's syncs began failing: the start of its first failed run since it last synced (or ever)."""
    from catalog.choices import SyncStatus
    from catalog.models import SyncRun

    since_success = Coalesce(OuterRef("last_synced_at"), Value(datetime.min.replace(tzinfo=UTC)))
    failed = SyncRun.objects.filter(server=OuterRef("pk"), status=SyncStatus.FAILED, started_at__gt=since_success)
    return Subquery(failed.order_by("started_at").values("started_at")[:1])


def _operator_panel(request: HttpRequest) -> dict[str, Any]:
    from catalog.admin.filters import tool_count_annotations
    from catalog.admin.records import error_shown, errors_cut_for
    from catalog.admin.servers import tool_count_links
    from catalog.models import SyncRun
    from catalog.urltext import url_paths_cut

    user = request.user
    cut = errors_cut_for(request)  # a shared server's errors repeat its URL, a superuser's to read (redteam42)
    recent = SyncRun.objects.filter(started_at__gte=timezone.now() - FAILURE_WINDOW)
    recent = recent.filter(server__in=_managed_servers(user).values("pk"))

    # Counted as the server list counts them, each number a link to those tools in the tool list. Those needing
    # attention first: by slug alone, a failing server past the 30th was not on the page at all.
    servers = list(
        _managed_servers(user)
        .annotate(**tool_count_annotations(), attention=_server_attention(), failing_since=_failing_since())
        .order_by("attention", "slug")[: HOME_ROWS * 3]
    )
    for server in servers:
        server.tools_shown = tool_count_links(server)
        server.last_error = (
            url_paths_cut(server.last_error) if server.last_error and cut(server.pk) else server.last_error
        )
    failures = recent.filter(status__in=["failed", "partial"]).select_related("server").order_by("-started_at")
    failures_shown = list(failures[:HOME_ROWS])
    for run in failures_shown:
        run.error = error_shown(run, cut)  # shown only, never saved
    from governance.choices import NotificationOutcome
    from governance.selectors import notification_attempts_visible_to

    failed_notifications = (
        notification_attempts_visible_to(user=user)
        .filter(outcome=NotificationOutcome.FAILED, created_at__gte=timezone.now() - FAILURE_WINDOW)
        .count()
    )
    from scoutsite.background import background_status

    return {"servers": servers, "server_count": _managed_servers(user).count(),
            "failures": failures_shown, "failure_count": failures.count(),
            "failed_notifications": failed_notifications, "background": background_status()}  # fmt: skip
