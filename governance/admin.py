"""Governance admin: grants, risk classes, tool policies, change review, API tokens, the approver inbox
and the read-only audit trail. Every write goes through a service (which audits itself)."""

import json
from datetime import timedelta

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import Permission
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Case, IntegerField, Value, When
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.html import format_html

from catalog.models import Server, Tool

from .choices import ApprovalStatus
from .constants import BASE_SCOPES
from .models import (
    ApiToken,
    ApprovalRequest,
    AuditEvent,
    Entitlement,
    PolicyVersion,
    RiskClass,
    ServerGroupObjectPermission,
    ServerUserObjectPermission,
    ToolGroupObjectPermission,
    ToolPolicy,
    ToolReview,
    ToolUserObjectPermission,
)
from .principals import principal_for_user
from .selectors import approval_requests_for_approver, user_is_approver
from .services.approvals import ApprovalError, approval_decide
from .services.audit import audit_record
from .services.permissions import permission_grant, permission_revoke
from .services.policy import risk_class_update, tool_policy_classify
from .services.review import ReviewError, tool_review_accept, tool_review_diff, tool_review_reject
from .services.tokens import api_token_create, api_token_revoke

DEFAULT_TOKEN_LIFETIME = timedelta(days=90)
MAX_COUNTED_ROWS = 10_000


class BoundedCountPaginator(Paginator):
    """Counts at most MAX_COUNTED_ROWS rows, so an append-only table never costs a full COUNT(*)."""

    @cached_property
    def count(self) -> int:
        return self.object_list.order_by()[: MAX_COUNTED_ROWS + 1].count()


def _pre(value: str):
    """A block of untrusted text, escaped (format_html escapes the argument)."""
    return format_html('<pre style="white-space: pre-wrap; max-width: 100ch">{}</pre>', value)


# --- grants -------------------------------------------------------------------------------------


class GrantAdmin(admin.ModelAdmin):
    """Grants are added and deleted, never edited; both go through the audited services."""

    target_model: type = Server
    list_display = ("holder", "action", "content_object")
    list_filter = ("permission",)
    raw_id_fields = ("content_object",)
    list_select_related = ("permission", "content_object")

    def holder(self, obj) -> str:
        holder = getattr(obj, "user", None) or obj.group
        return str(holder)

    @admin.display(description="permission")
    def action(self, obj) -> str:
        return obj.permission.codename.split("_", 1)[0]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "permission":
            model = self.target_model._meta.model_name
            kwargs["queryset"] = Permission.objects.filter(
                content_type__app_label="catalog",
                content_type__model=model,
                codename__in=[f"{a}_{model}" for a in ("discover", "execute", "approve")],
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def _holder_of(self, obj):
        return getattr(obj, "user", None) if hasattr(obj, "user_id") else obj.group

    def save_model(self, request, obj, form, change) -> None:
        grant = permission_grant(
            actor=request.user,
            target=obj.content_object,
            action=obj.permission.codename.split("_", 1)[0],
            holder=self._holder_of(obj),
        )
        obj.pk = grant.pk

    def delete_model(self, request, obj) -> None:
        permission_revoke(
            actor=request.user,
            target=obj.content_object,
            action=obj.permission.codename.split("_", 1)[0],
            holder=self._holder_of(obj),
        )

    def delete_queryset(self, request, queryset) -> None:
        for obj in list(queryset):
            self.delete_model(request, obj)


@admin.register(ServerUserObjectPermission)
class ServerUserGrantAdmin(GrantAdmin):
    target_model = Server
    raw_id_fields = ("content_object", "user")
    search_fields = ("user__username", "content_object__slug")


@admin.register(ServerGroupObjectPermission)
class ServerGroupGrantAdmin(GrantAdmin):
    target_model = Server
    search_fields = ("group__name", "content_object__slug")


@admin.register(ToolUserObjectPermission)
class ToolUserGrantAdmin(GrantAdmin):
    target_model = Tool
    raw_id_fields = ("content_object", "user")
    search_fields = ("user__username", "content_object__tool_id")


@admin.register(ToolGroupObjectPermission)
class ToolGroupGrantAdmin(GrantAdmin):
    target_model = Tool
    search_fields = ("group__name", "content_object__tool_id")


# --- policy -------------------------------------------------------------------------------------


@admin.register(RiskClass)
class RiskClassAdmin(admin.ModelAdmin[RiskClass]):
    list_display = ("name", "rank", "requires_approval", "requires_approval_for_mutating", "approval_ttl")
    readonly_fields = ("name", "rank")

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        original = RiskClass.objects.get(pk=obj.pk)
        risk_class_update(
            risk_class=original,
            actor=request.user,
            requires_approval=form.cleaned_data["requires_approval"],
            requires_approval_for_mutating=form.cleaned_data["requires_approval_for_mutating"],
            approval_ttl=form.cleaned_data["approval_ttl"],
            description=form.cleaned_data.get("description"),
        )


@admin.register(PolicyVersion)
class PolicyVersionAdmin(admin.ModelAdmin[PolicyVersion]):
    list_display = ("label", "reason", "created_at", "created_by")
    readonly_fields = ("number", "reason", "created_at", "created_by")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Entitlement)
class EntitlementAdmin(admin.ModelAdmin[Entitlement]):
    list_display = ("slug", "name")
    search_fields = ("slug", "name")
    filter_horizontal = ("users", "groups")

    def save_related(self, request, form, formsets, change) -> None:
        super().save_related(request, form, formsets, change)
        entitlement = form.instance
        audit_record(
            event_type="entitlement.changed",
            principal=principal_for_user(request.user, via="admin"),
            outcome="success",
            payload={
                "entitlement": entitlement.slug,
                "users": sorted(u.get_username() for u in entitlement.users.all()),
                "groups": sorted(g.name for g in entitlement.groups.all()),
            },
        )


class HeldFilter(admin.SimpleListFilter):
    title = "review state"
    parameter_name = "held"

    def lookups(self, request, model_admin):
        return [("yes", "Held for review"), ("no", "Accepted")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(held=True)
        if self.value() == "no":
            return queryset.filter(held=False)
        return queryset


@admin.register(ToolPolicy)
class ToolPolicyAdmin(admin.ModelAdmin[ToolPolicy]):
    list_display = ("tool", "operation_class", "reversibility", "risk_class", "classified_by_admin", "held")
    list_filter = ("operation_class", "risk_class", "reversibility", "classified_by_admin", HeldFilter)
    list_select_related = ("tool", "risk_class")
    search_fields = ("tool__tool_id",)
    filter_horizontal = ("required_entitlements",)
    fields = (
        "tool",
        "operation_class",
        "reversibility",
        "risk_class",
        "required_entitlements",
        "allowed_environments",
        "data_classes",
        "classified_by_admin",
        "classified_by",
        "classified_at",
        "held",
        "hold_reason",
        "markers",
        "accepted_hash",
        "access",
    )
    readonly_fields = (
        "tool",
        "access",
        "classified_by_admin",
        "classified_by",
        "classified_at",
        "held",
        "hold_reason",
        "markers",
        "accepted_hash",
    )

    @admin.display(description="who has access")
    def access(self, obj: ToolPolicy):
        """Grants that reach this tool (on the tool or its server), with links to add more."""
        tool, server = obj.tool, obj.tool.server
        sources = [
            ("tool", ToolUserObjectPermission.objects.filter(content_object=tool).select_related("user", "permission")),
            (
                "tool",
                ToolGroupObjectPermission.objects.filter(content_object=tool).select_related("group", "permission"),
            ),
            (
                "server",
                ServerUserObjectPermission.objects.filter(content_object=server).select_related("user", "permission"),
            ),
            (
                "server",
                ServerGroupObjectPermission.objects.filter(content_object=server).select_related("group", "permission"),
            ),
        ]
        lines = []
        for scope, grants in sources:
            for grant in grants:
                holder = f"user {grant.user}" if hasattr(grant, "user") else f"group {grant.group}"
                lines.append(f"{holder}: {grant.permission.codename.split('_', 1)[0]} (on the {scope})")
        links = format_html(
            '<a href="{}?content_object={}">grant on this tool to a user</a> · '
            '<a href="{}?content_object={}">to a group</a> · '
            '<a href="{}?content_object={}">grant on the server to a user</a> · '
            '<a href="{}?content_object={}">to a group</a>',
            reverse("admin:governance_tooluserobjectpermission_add"),
            tool.pk,
            reverse("admin:governance_toolgroupobjectpermission_add"),
            tool.pk,
            reverse("admin:governance_serveruserobjectpermission_add"),
            server.pk,
            reverse("admin:governance_servergroupobjectpermission_add"),
            server.pk,
        )
        return format_html("{}{}", _pre("\n".join(lines) or "(no grants: nobody can see this tool)"), links)

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change) -> None:
        data = form.cleaned_data
        try:
            tool_policy_classify(
                policy=ToolPolicy.objects.get(pk=obj.pk),
                actor=request.user,
                operation_class=data["operation_class"],
                reversibility=data["reversibility"],
                risk_class=data["risk_class"],
                allowed_environments=data["allowed_environments"] or [],
                data_classes=data["data_classes"] or [],
                required_entitlements=list(data["required_entitlements"]),
            )
        except ValidationError as exc:
            messages.error(request, "; ".join(exc.messages))

    def save_related(self, request, form, formsets, change) -> None:
        pass  # entitlements were set by tool_policy_classify


# --- change review ------------------------------------------------------------------------------


@admin.register(ToolReview)
class ToolReviewAdmin(admin.ModelAdmin[ToolReview]):
    list_display = ("tool", "kind", "status", "markers", "created_at", "decided_by")
    list_filter = ("status", "kind")
    list_select_related = ("tool", "decided_by")
    search_fields = ("tool__tool_id",)
    readonly_fields = (
        "tool",
        "kind",
        "status",
        "markers",
        "previous_hash",
        "definition_hash",
        "diff",
        "created_at",
        "decided_by",
        "decided_at",
        "reason",
    )
    exclude = ("revision",)
    actions = ["accept_selected", "reject_selected"]
    change_form_template = "admin/governance/toolreview/change_form.html"

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        return qs.order_by("status", "-created_at")  # "pending" sorts before the decided states

    @admin.display(description="diff (accepted → new revision)")
    def diff(self, obj) -> str:
        return _pre(tool_review_diff(review=obj) or "(no earlier accepted definition)")

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def _decide(self, request, queryset, accept: bool) -> None:
        for review in queryset:
            try:
                (tool_review_accept if accept else tool_review_reject)(review=review, actor=request.user)
            except ReviewError as exc:
                messages.error(request, f"{review.tool}: {exc}")
            else:
                messages.success(request, f"{review.tool}: {'accepted' if accept else 'rejected'}")

    @admin.action(description="Accept selected revisions (release the tools)", permissions=["change"])
    def accept_selected(self, request, queryset) -> None:
        self._decide(request, queryset, accept=True)

    @admin.action(description="Reject selected revisions (tools stay held)", permissions=["change"])
    def reject_selected(self, request, queryset) -> None:
        self._decide(request, queryset, accept=False)

    def response_change(self, request, obj):
        if "_accept" in request.POST or "_reject" in request.POST:
            self._decide(request, ToolReview.objects.filter(pk=obj.pk), accept="_accept" in request.POST)
            return HttpResponseRedirect(reverse("admin:governance_toolreview_changelist"))
        return super().response_change(request, obj)


# --- API tokens ---------------------------------------------------------------------------------


class ApiTokenAddForm(forms.ModelForm):
    base_scopes = forms.MultipleChoiceField(
        choices=[(s, s) for s in sorted(BASE_SCOPES)],
        widget=forms.CheckboxSelectMultiple,
        initial=["discover", "execute"],
        label="Scopes",
    )
    server_scopes = forms.CharField(
        required=False, help_text="Optional: limit the token to these server slugs (comma-separated)"
    )

    class Meta:
        model = ApiToken
        fields = ("user", "name", "agent", "tenant", "expires_at")

    def clean(self):
        data = super().clean()
        servers = [s.strip() for s in (data.get("server_scopes") or "").split(",") if s.strip()]
        data["scopes"] = list(data.get("base_scopes") or []) + [f"server:{s}" for s in servers]
        return data


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    list_display = (
        "name",
        "user",
        "agent",
        "tenant",
        "scopes",
        "display_prefix",
        "expires_at",
        "state",
        "last_used_at",
    )
    list_filter = ("revoked_at", "tenant")
    list_select_related = ("user",)
    search_fields = ("name", "user__username", "agent", "tenant", "display_prefix")
    raw_id_fields = ("user",)
    actions = ["revoke_selected"]
    readonly_fields = (
        "user",
        "name",
        "agent",
        "tenant",
        "scopes",
        "display_prefix",
        "expires_at",
        "created_at",
        "created_by",
        "revoked_at",
        "revoked_by",
        "last_used_at",
    )

    @admin.display(description="state")
    def state(self, obj: ApiToken) -> str:
        if obj.revoked_at:
            return "revoked"
        if obj.expires_at <= timezone.now():
            return "expired"
        return "active"

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = ApiTokenAddForm
            kwargs["fields"] = None
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [
                (None, {"fields": ("user", "name", "agent", "tenant", "base_scopes", "server_scopes", "expires_at")})
            ]
        return super().get_fieldsets(request, obj)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def get_changeform_initial_data(self, request):
        return {"expires_at": timezone.now() + DEFAULT_TOKEN_LIFETIME, "base_scopes": ["discover", "execute"]}

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoke instead: the row stays for the audit trail

    def save_model(self, request, obj, form, change) -> None:
        if change:
            return
        data = form.cleaned_data
        token, raw = api_token_create(
            user=data["user"],
            name=data["name"],
            agent=data.get("agent") or "",
            tenant=data.get("tenant") or "",
            scopes=data["scopes"],
            expires_at=data["expires_at"],
            created_by=request.user,
        )
        obj.pk = token.pk
        obj._state.adding = False
        # Kept on the request only, to render once below; never in messages, sessions or logs.
        request._scout_raw_token = raw

    def save_related(self, request, form, formsets, change) -> None:
        pass

    def log_addition(self, request, obj, message):
        return super().log_addition(request, ApiToken.objects.get(pk=obj.pk), message)

    def response_add(self, request, obj, post_url_continue=None):
        raw = getattr(request, "_scout_raw_token", None)
        if raw is None:
            return super().response_add(request, obj, post_url_continue)
        token = ApiToken.objects.get(pk=obj.pk)
        response = render(
            request,
            "admin/governance/apitoken/created.html",
            {**self.admin_site.each_context(request), "token": token, "raw_token": raw, "opts": self.opts},
        )
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke_selected(self, request, queryset) -> None:
        for token in queryset:
            api_token_revoke(token=token, actor=request.user)
        messages.success(request, f"Revoked {queryset.count()} token(s).")


# --- approver inbox -----------------------------------------------------------------------------


class ApprovalDecisionForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=2000)


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin[ApprovalRequest]):
    list_display = (
        "approval_id",
        "status",
        "tool",
        "risk_class",
        "requester",
        "agent",
        "tenant",
        "created_at",
        "decide_link",
    )
    list_filter = ("status", "risk_class", "operation_class")
    search_fields = ("approval_id", "tool__tool_id", "requester__username", "agent")
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
        "decided_by",
        "decided_at",
        "decision_reason",
        "consumed_at",
    )
    fields = readonly_fields

    def get_queryset(self, request):
        # Superusers read every request; deciding still needs an approve grant (approval_decide checks).
        if request.user.is_superuser:
            return _all_pending_first()
        return approval_requests_for_approver(user=request.user)

    def get_ordering(self, request):
        return ["pending_first", "-created_at", "-id"]  # annotated by both querysets above

    def _may_see(self, request) -> bool:
        user = request.user
        if not (user.is_active and user.is_staff):
            return False
        return user.is_superuser or user_is_approver(user=user)

    def has_module_permission(self, request) -> bool:
        return self._may_see(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return self._may_see(request)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="who asked")
    def envelope(self, obj: ApprovalRequest):
        lines = [
            f"human subject: {obj.requester.get_username()}",
            f"agent: {obj.agent or '-'}",
            f"tenant: {obj.tenant or '-'}",
            f"token: {obj.token_ref or '-'}",
            f"delegation chain: {' > '.join(obj.delegation_chain) or '-'}",
            f"server: {obj.tool.server.slug} ({obj.tool.server.environment})",
            f"trace id: {obj.trace_id or '-'}",
        ]
        return _pre("\n".join(lines))

    @admin.display(description="exact arguments")
    def arguments_pretty(self, obj: ApprovalRequest):
        return _pre(json.dumps(json.loads(obj.arguments_json), indent=2, sort_keys=True, ensure_ascii=True))

    @admin.display(description="")
    def decide_link(self, obj: ApprovalRequest):
        if obj.status != ApprovalStatus.PENDING:
            return ""
        return format_html('<a href="{}">Decide</a>', reverse("admin:governance_approvalrequest_decide", args=[obj.pk]))

    def get_urls(self):
        custom = [
            path(
                "<int:pk>/decide/",
                self.admin_site.admin_view(self.decide_view),
                name="governance_approvalrequest_decide",
            )
        ]
        return custom + super().get_urls()

    def decide_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Show the request (envelope, tool, risk, exact arguments) and approve or deny it with a reason."""
        if not self._may_see(request):
            raise PermissionDenied
        obj = self.get_queryset(request).filter(pk=pk).first()
        if obj is None:
            raise Http404("No such approval request")
        form = ApprovalDecisionForm(request.POST or None)
        status = 200
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
                else:
                    messages.success(request, f"{obj.approval_id}: {'approved' if approve else 'denied'}")
                    return HttpResponseRedirect(reverse("admin:governance_approvalrequest_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "obj": obj,
            "form": form,
            "envelope": self.envelope(obj),
            "arguments": self.arguments_pretty(obj),
            "title": f"Decide {obj.approval_id}",
        }
        return render(request, "admin/governance/approvalrequest/decide.html", context, status=status)


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


# --- audit trail --------------------------------------------------------------------------------


class RecentToolFilter(admin.SimpleListFilter):
    """Filter by tool, offering the tools of the most recent events (a full tool list would be huge)."""

    title = "tool"
    parameter_name = "tool_ref"

    def lookups(self, request, model_admin):
        recent = AuditEvent.objects.exclude(tool_ref="").values_list("tool_ref", flat=True)[:1000]
        return [(ref, ref) for ref in sorted(set(recent))[:50]]

    def queryset(self, request, queryset):
        return queryset.filter(tool_ref=self.value()) if self.value() else queryset


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin[AuditEvent]):
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
    list_filter = ("event_type", "outcome", "user", RecentToolFilter, ("created_at", admin.DateFieldListFilter))
    search_fields = ("human_subject", "agent", "tenant", "tool_ref", "approval_ref", "trace_id")
    paginator = BoundedCountPaginator
    show_full_result_count = False
    list_per_page = 100
    actions = None

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in AuditEvent._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
