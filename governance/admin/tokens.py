"""Governance admin: API tokens."""

import json

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.widgets import FilteredSelectMultiple
from django.core.exceptions import ValidationError
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode

from catalog.admin.display import breakable_name, compact_time
from catalog.admin.lookups import StrictLookupsMixin
from catalog.admin.titles import TitledAdminMixin
from catalog.choices import ServerStatus
from catalog.models import Server

from ..constants import SCOPE_API, SCOPE_APPROVE, SCOPE_DISCOVER, SCOPE_EXECUTE, SERVER_SCOPE_PREFIX
from ..models import Agent, ApiToken, AuditEvent, Tenant
from ..principals import principal_for_user
from ..selectors import agents_visible_to_operator, servers_visible_to_operator, tenant_q
from ..services.tokens import (
    api_token_create,
    api_token_issue_check,
    api_token_lifetime_check,
    api_token_live_check,
    api_token_revoke,
    api_token_tenant,
    scopes_validate,
)
from .common import DEFAULT_TOKEN_LIFETIME
from .people import PeopleChoicesMixin, person_name, rows_of_people_for, with_person_visible


class BoxedFilteredSelectMultiple(FilteredSelectMultiple):
    """The two-box picker in a box of its own: its script puts the picker first in its parent, which would move it
    before the field's label (a ModelAdmin's filter_horizontal gets such a box from the related-widget wrapper)."""

    def render(self, *args, **kwargs):
        return format_html("<div>{}</div>", super().render(*args, **kwargs))


# What each base scope lets a token do, as the add form offers it and the token's page reads it.
SCOPE_LABELS = {
    SCOPE_DISCOVER: "discover: find and inspect tools (tool_search, tool_inspect)",
    SCOPE_EXECUTE: "execute: call tools (execute_tool)",
    # An agent's token reads the inbox but is refused every decision (agent_decides, redteam37): said before it is
    # ticked for an agent, not learned from a 403.
    SCOPE_APPROVE: "approve: read the approval inbox and decide requests (REST API); on a token for an agent, the "
    "inbox only: deciding is a person's act",
    SCOPE_API: "api: use the REST API (/api/v1/)",
}


class ApiTokenAddForm(forms.ModelForm):
    """Scopes chosen from what exists (base scopes, then servers the admin manages); stored as before, a list of
    strings such as ``["discover", "execute", "server:github"]``."""

    issuer = None  # the admin issuing the token (set by ApiTokenAdmin.get_form)

    base_scopes = forms.MultipleChoiceField(
        choices=[(scope, SCOPE_LABELS[scope]) for scope in SCOPE_LABELS],
        widget=forms.CheckboxSelectMultiple(attrs={"class": "scout-choices"}),
        initial=[SCOPE_DISCOVER, SCOPE_EXECUTE],
        label="May",
    )
    server_scopes = forms.ModelMultipleChoiceField(
        queryset=Server.objects.none(),  # the servers the admin manages: set per request (ApiTokenAdmin.get_form)
        to_field_name="slug",
        required=False,
        widget=BoxedFilteredSelectMultiple("servers", is_stacked=False),
        label="Only these servers",
        help_text="Optional: the token reaches only these servers' tools. None chosen: every server its user may use.",
    )
    server_queryset = Server.objects.none()

    class Meta:
        model = ApiToken
        fields = ("user", "name", "agent", "tenant", "expires_at")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["server_scopes"].queryset = self.server_queryset

    def clean(self):
        data = super().clean()
        if data.get("user") is not None:
            api_token_tenant(user=data["user"], agent=data.get("agent"), tenant=data.get("tenant"))
        servers = [server.slug for server in data.get("server_scopes") or ()]
        data["scopes"] = list(data.get("base_scopes") or []) + [f"{SERVER_SCOPE_PREFIX}{slug}" for slug in servers]
        if data["scopes"]:  # none: base_scopes says so already
            try:
                scopes_validate(data["scopes"])  # at most MAX_TOKEN_SERVER_SCOPES servers
            except ValidationError as error:
                self.add_error("server_scopes", error.message_dict["scopes"])
        if data.get("expires_at") is not None:
            try:
                api_token_lifetime_check(expires_at=data["expires_at"])
            except ValidationError as error:
                self.add_error("expires_at", error.message_dict["expires_at"])
        if data.get("user") is not None:
            try:
                api_token_issue_check(user=data["user"], scopes=data["scopes"], created_by=self.issuer)
                api_token_live_check(user=data["user"])
            except ValidationError as error:
                raise forms.ValidationError(error.messages) from None
        return data


class TokenStateFilter(admin.SimpleListFilter):
    """By what a token does now, as the list's state column says it: active, expired or revoked (a revoked token
    that has also expired reads revoked)."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "Active"), ("expired", "Expired"), ("revoked", "Revoked")]

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True, expires_at__gt=now)
        if self.value() == "expired":
            return queryset.filter(revoked_at__isnull=True, expires_at__lte=now)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


def scopes_text(scopes: list[str], *, for_agent: bool = False) -> str:
    """A token's stored scopes as words: what it may do, then which servers (or all its user may use). An agent's
    approve scope reads the inbox only."""
    base = [scope for scope in scopes if not scope.startswith(SERVER_SCOPE_PREFIX)]
    servers = [scope.removeprefix(SERVER_SCOPE_PREFIX) for scope in scopes if scope.startswith(SERVER_SCOPE_PREFIX)]
    words = {SCOPE_APPROVE: "approve (reads the inbox, decides nothing: an agent's token)"} if for_agent else {}
    may = ", ".join(words.get(scope, scope) for scope in sorted(base)) or "nothing"
    return f"{may} · {'only ' + ', '.join(servers) if servers else 'every server its user may use'}"


@admin.register(ApiToken)
class ApiTokenAdmin(TitledAdminMixin, PeopleChoicesMixin, StrictLookupsMixin, admin.ModelAdmin[ApiToken]):
    list_display = (
        "name",
        "user_column",
        "tenant",
        "scopes_display",
        "display_prefix",
        "state_column",
        "last_used",
    )  # the expiry under the state and times in two short lines: every column in view at 1280 px
    # The tenant filter offers the tenants of the tokens listed, never every tenant's slug (Z12).
    list_filter = (TokenStateFilter, ("tenant", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("user", "agent", "tenant")
    search_fields = ("name", "user__username", "agent__name", "tenant__slug", "display_prefix")
    hidden_lookups = ("created_by", "revoked_by")  # read masked where another tenant's (Z12): no ?created_by=17
    autocomplete_fields = ("user",)
    actions = ["revoke_selected"]
    # Shown read-only as creator / revoker (named only where visible) and the scopes in words.
    exclude = ("created_by", "revoked_by", "scopes")
    readonly_fields = (
        "user",
        "name",
        "agent",
        "tenant",
        "scopes_display",
        "display_prefix",
        "expires_at",
        "created_at",
        "creator",
        "revoked_at",
        "revoker",
        "last_used_at",
    )

    list_title = "API tokens — who calls Scout's tools, with what scopes, until when"

    def object_title(self, request, obj: ApiToken) -> str:
        return f"API token {obj.name}"

    def get_queryset(self, request):
        # An operator of tenant A sees shared tokens and tenant A's, never tenant B's (Z12), nor a shared
        # (tenant-less) token of tenant B's person; who made or revoked a token is named only where visible too.
        qs = super().get_queryset(request)
        if not request.user.is_superuser:
            qs = rows_of_people_for(request, qs.filter(tenant_q(principal_for_user(request.user), "tenant")))
        return with_person_visible(request, with_person_visible(request, qs, "created_by"), "revoked_by")

    @admin.display(description="user", ordering="user__username")
    def user_column(self, obj: ApiToken) -> str:
        # The person and, under them, the agent, as the audit trail and the approval inbox say it; names wrap only
        # between their parts (breakable_name): "overflow-wrap: anywhere" split "adm|in" at 800 px, and a long name
        # in a column of its own beside a long agent's pushed the last column out of view.
        person = breakable_name(str(obj.user))
        if not obj.agent_id:
            return person
        return format_html('{}<br><small class="token-agent">via {}</small>', person, breakable_name(str(obj.agent)))

    @admin.display(description="scopes")
    def scopes_display(self, obj: ApiToken) -> str:
        return scopes_text(obj.scopes, for_agent=obj.agent_id is not None)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # Every field of a saved token is read-only: no Save buttons that save nothing. Its page revokes it through
        # the list's action (the same confirmation) and leads to what it did: its searches, calls, approvals.
        extra_context = {"show_save": False, "show_save_and_continue": False,
                         "show_save_and_add_another": False, "revoke_action": "revoke_selected",
                         **(extra_context or {})}  # fmt: skip
        if admin.site.get_model_admin(AuditEvent).has_view_permission(request):
            token_ref = f"tok-{object_id}"
            url = reverse("admin:governance_auditevent_changelist") + "?" + urlencode({"token_ref": token_ref})
            extra_context["audit_trail_url"] = url
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description="created by")
    def creator(self, obj: ApiToken) -> str:
        return person_name(obj, "created_by")

    @admin.display(description="revoked by")
    def revoker(self, obj: ApiToken) -> str:
        return person_name(obj, "revoked_by")

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tenant" and not request.user.is_superuser:
            kwargs["queryset"] = Tenant.objects.filter(pk__in=request.user.tenants.values("pk"))
        if db_field.name == "agent":  # not a tenant-less agent of another tenant's person (Z12)
            kwargs["queryset"] = Agent.objects.filter(agents_visible_to_operator(user=request.user))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="state", ordering="expires_at")
    def state_column(self, obj: ApiToken) -> str:
        state = self.state(obj)
        when = obj.revoked_at if state == "revoked" else obj.expires_at
        verb = {"active": "expires", "expired": "expired", "revoked": "revoked"}[state]
        return format_html("{}<br><small>{} {}</small>", state, verb, f"{timezone.localtime(when):%Y-%m-%d}")

    @admin.display(description="last used", ordering="last_used_at")
    def last_used(self, obj: ApiToken) -> str:
        return compact_time(obj.last_used_at)

    @admin.display(description="state")
    def state(self, obj: ApiToken) -> str:
        if obj.revoked_at:
            return "revoked"
        if obj.expires_at <= timezone.now():
            return "expired"
        return "active"

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = type("ApiTokenAddForm", (ApiTokenAddForm,), {"issuer": request.user})
            kwargs["fields"] = None
        form = super().get_form(request, obj, change=change, **kwargs)
        if obj is None:  # the servers this admin manages (never another tenant's, Z12), archived ones left out
            servers = Server.objects.filter(servers_visible_to_operator(user=request.user))
            form.server_queryset = servers.exclude(status=ServerStatus.ARCHIVED).order_by("slug")
        return form

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [
                (None, {"fields": ("user", "name", "agent", "tenant", "base_scopes", "server_scopes", "expires_at")})
            ]
        return super().get_fieldsets(request, obj)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def get_changeform_initial_data(self, request):
        # Only a superuser issues a token for someone else (api_token_issue_check): everyone else starts from their own.
        return {
            "user": request.user.pk,
            "expires_at": timezone.now() + DEFAULT_TOKEN_LIFETIME,
            "base_scopes": [SCOPE_DISCOVER, SCOPE_EXECUTE],
        }

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoke instead: the row stays for the audit trail

    def save_model(self, request, obj, form, change) -> None:
        if change:
            return
        data = form.cleaned_data
        token, raw = api_token_create(
            user=data["user"],
            name=data["name"],
            agent=data.get("agent"),
            tenant=data.get("tenant"),
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
        mcp_url = f"{settings.SCOUT_PUBLIC_URL}/mcp"
        configs = client_configs(mcp_url=mcp_url, raw_token=raw)
        response = render(
            request,
            "admin/governance/apitoken/created.html",
            {
                **self.admin_site.each_context(request),
                "title": f"API token created: {token.name}",
                "token": token,
                "raw_token": raw,
                "opts": self.opts,
                "mcp_url": mcp_url,
                "configs": configs,
            },
        )
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected tokens…", permissions=["change"])
    def revoke_selected(self, request, queryset):
        """Two steps, like Django's delete: a confirmation page naming each token, then the revocation."""
        active = list(queryset.filter(revoked_at__isnull=True).select_related("user"))
        if request.POST.get("confirm") != "yes":
            return render(
                request,
                "admin/governance/apitoken/revoke_confirm.html",
                {
                    **self.admin_site.each_context(request),
                    "opts": self.opts,
                    "title": "Revoke API tokens?",
                    "tokens": active,
                    "selected": [str(token.pk) for token in queryset],
                    "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
                },
            )
        for token in active:
            api_token_revoke(token=token, actor=request.user)
        messages.success(request, f"Revoked {len(active)} token(s); clients using them are refused from now on.")
        return None


def client_configs(*, mcp_url: str, raw_token: str) -> list[tuple[str, str]]:
    """Ready-to-paste client settings for a new token: (where it goes, text)."""
    header = {"Authorization": f"Bearer {raw_token}"}
    mcp_json = {"mcpServers": {"scout": {"type": "http", "url": mcp_url, "headers": header}}}
    cursor = {"mcpServers": {"scout": {"url": mcp_url, "headers": header}}}
    return [
        (
            "Claude Code (shell)",
            f'claude mcp add --transport http scout {mcp_url} --header "Authorization: Bearer {raw_token}"',
        ),
        ("Project .mcp.json", json.dumps(mcp_json, indent=2)),
        ("Cursor (~/.cursor/mcp.json or .cursor/mcp.json)", json.dumps(cursor, indent=2)),
    ]
