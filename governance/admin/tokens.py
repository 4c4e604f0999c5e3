"""Governance admin: API tokens."""

import json

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.shortcuts import render
from django.utils import timezone

from catalog.admin.lookups import StrictLookupsMixin

from ..constants import BASE_SCOPES
from ..models import Agent, ApiToken, Tenant
from ..principals import principal_for_user
from ..selectors import agents_visible_to_operator, tenant_q
from ..services.tokens import api_token_create, api_token_issue_check, api_token_revoke, api_token_tenant
from .common import DEFAULT_TOKEN_LIFETIME
from .people import PeopleChoicesMixin, person_name, rows_of_people_for, with_person_visible


class ApiTokenAddForm(forms.ModelForm):
    issuer = None  # the admin issuing the token (set by ApiTokenAdmin.get_form)

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
        if data.get("user") is not None:
            api_token_tenant(user=data["user"], agent=data.get("agent"), tenant=data.get("tenant"))
        servers = [s.strip() for s in (data.get("server_scopes") or "").split(",") if s.strip()]
        data["scopes"] = list(data.get("base_scopes") or []) + [f"server:{s}" for s in servers]
        if data.get("user") is not None:
            try:
                api_token_issue_check(user=data["user"], scopes=data["scopes"], created_by=self.issuer)
            except ValidationError as error:
                raise forms.ValidationError(error.messages) from None
        return data


@admin.register(ApiToken)
class ApiTokenAdmin(PeopleChoicesMixin, StrictLookupsMixin, admin.ModelAdmin[ApiToken]):
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
    # The tenant filter offers the tenants of the tokens listed, never every tenant's slug (Z12).
    list_filter = ("revoked_at", ("tenant", admin.RelatedOnlyFieldListFilter))
    list_select_related = ("user", "agent", "tenant")
    search_fields = ("name", "user__username", "agent__name", "tenant__slug", "display_prefix")
    autocomplete_fields = ("user",)
    actions = ["revoke_selected"]
    exclude = ("created_by", "revoked_by")  # shown read-only as creator / revoker (named only where visible)
    readonly_fields = (
        "user",
        "name",
        "agent",
        "tenant",
        "scopes",
        "display_prefix",
        "expires_at",
        "created_at",
        "creator",
        "revoked_at",
        "revoker",
        "last_used_at",
    )

    def get_queryset(self, request):
        # An operator of tenant A sees shared tokens and tenant A's, never tenant B's (Z12), nor a shared
        # (tenant-less) token of tenant B's person; who made or revoked a token is named only where visible too.
        qs = super().get_queryset(request)
        if not request.user.is_superuser:
            qs = rows_of_people_for(request, qs.filter(tenant_q(principal_for_user(request.user), "tenant")))
        return with_person_visible(request, with_person_visible(request, qs, "created_by"), "revoked_by")

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
