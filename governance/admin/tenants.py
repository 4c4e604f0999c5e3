"""Governance admin: tenants (who belongs to which, and where their approval requests are announced) and agents
with the grants that narrow them."""

from django import forms
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.utils.html import format_html, format_html_join

from catalog.admin.lookups import RawIdChoicesMixin, StrictLookupsMixin
from catalog.admin.titles import TitledAdminMixin
from catalog.models import Server, Tool

from ..models import Agent, AgentGrant, Tenant
from ..selectors import agents_visible_to_operator, servers_visible_to_operator
from ..services.notifications import tenant_webhook_env_missing
from .people import PeopleChoicesMixin

WEBHOOK_SECTION_EDIT = (
    "This tenant's approval requests can go to its own webhook instead of the install-wide one. Name the "
    "environment variables holding its URL and signing secret: their values are never stored or shown. Both must "
    "be set where the webhook is sent: the Celery worker's environment when Scout runs one (REDIS_URL), else this "
    "web server's. Whether each is set is read from this web server's environment only."
)
# With a Celery worker the webhook is sent from the worker's environment, which this web server cannot read: its
# badges say what this process has, and the notification log what the worker found.
WORKER_SENDS = (
    "Sent by the Celery worker, from its own environment (a variable not set there is a failed notification naming "
    "it, under Notifications to approvers). In this web server:"
)
WEBHOOK_SECTION_READ = (
    "Where this tenant's approval requests are announced. A superuser names the environment variables (the "
    "install's environment is theirs); their values are never stored or shown."
)


class TenantForm(forms.ModelForm):
    class Meta:
        model = Tenant
        fields = ("slug",)  # the admin passes the fieldsets' fields
        labels = {
            "approval_webhook_url_env": "Webhook URL: environment variable name",
            "approval_webhook_secret_env": "Signing secret: environment variable name",
        }
        help_texts = {
            "members": "People who may act in this tenant: hold its tokens, see its servers, approvals and audit.",
            "approval_webhook_url_env": "e.g. ACME_APPROVAL_WEBHOOK_URL. Empty: the install-wide webhook "
            "(SCOUT_APPROVAL_WEBHOOK_URL), if there is one.",
            "approval_webhook_secret_env": "e.g. ACME_APPROVAL_WEBHOOK_SECRET; signs each call (X-Scout-Signature). "
            "Empty: calls are unsigned.",
        }


@admin.register(Tenant)
class TenantAdmin(TitledAdminMixin, PeopleChoicesMixin, StrictLookupsMixin, admin.ModelAdmin[Tenant]):
    list_title = "Tenants — each one's members see its servers, tokens, approvals and audit, never another's"
    form = TenantForm
    list_display = ("slug", "name", "approval_webhook", "created_at")
    search_fields = ("slug", "name")
    filter_horizontal = ("members",)

    def object_title(self, request, obj: Tenant) -> str:
        return f"Tenant {obj.slug}"

    def get_fieldsets(self, request, obj=None):
        # The section's words for who reads it: a superuser names the variables, a tenant's operator only reads.
        description = WEBHOOK_SECTION_EDIT if request.user.is_superuser else WEBHOOK_SECTION_READ
        webhook = ("approval_webhook_url_env", "approval_webhook_secret_env", "approval_webhook")
        return [
            (None, {"fields": ("slug", "name", "members")}),
            ("Approval webhook", {"fields": webhook, "description": description}),
        ]

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "members":  # the two-box picker needs no "Hold down Control" (Django adds it)
            field.help_text = TenantForm.Meta.help_texts["members"]
        return field

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        return qs if request.user.is_superuser else qs.filter(pk__in=request.user.tenants.values("pk"))

    def get_readonly_fields(self, request, obj=None):
        # The slug is fixed once saved: audit rows and tokens name it.
        readonly = ("slug", "approval_webhook") if obj is not None else ("approval_webhook",)
        if not request.user.is_superuser:  # the install's environment is the superuser's to name
            readonly += ("approval_webhook_url_env", "approval_webhook_secret_env")
        return readonly

    @admin.display(description="where requests go")
    def approval_webhook(self, tenant: Tenant) -> str:
        """Where its approval requests go, and whether the variables it names are set (never their values)."""
        worker_sends = not settings.CELERY_TASK_ALWAYS_EAGER  # else this process sends it (tasks run in-process)
        if not tenant.approval_webhook_url_env:
            configured = "configured" if settings.SCOUT_APPROVAL_WEBHOOK_URL else "not configured: e-mail only"
            if worker_sends:
                configured += " in this web server; the Celery worker, which sends it, reads its own environment"
            return f"The install-wide webhook, SCOUT_APPROVAL_WEBHOOK_URL ({configured})"
        missing = tenant_webhook_env_missing(tenant=tenant)
        names = [name for name in (tenant.approval_webhook_url_env, tenant.approval_webhook_secret_env) if name]
        signed = "signed" if tenant.approval_webhook_secret_env else "unsigned"
        if worker_sends:
            # This process's environment decides nothing here: grey badges, never the red of a failure.
            states = (("unknown", name, "not set here" if name in missing else "set here") for name in names)
            outcome = f"This tenant's own webhook, {signed}. {WORKER_SENDS}"
        else:
            states = (("failed", name, "not set") if name in missing else ("success", name, "set") for name in names)
            outcome = "Not sent until every variable is set:" if missing else f"This tenant's own webhook, {signed}:"
        badges = format_html_join(" ", '<span class="scout-badge s-{} webhook-env">{} {}</span>', states)
        return format_html("{} {}", outcome, badges)


class AgentGrantForm(forms.ModelForm):
    class Meta:
        model = AgentGrant
        fields = ("action", "server", "tool")

    def clean(self):
        data = super().clean()
        if bool(data.get("server")) == bool(data.get("tool")):
            raise ValidationError("name a server or a tool (one of them)")
        return data


class AgentGrantInline(RawIdChoicesMixin, admin.TabularInline):
    model = AgentGrant
    form = AgentGrantForm
    extra = 1
    raw_id_fields = ("tool",)
    verbose_name_plural = (
        "Narrowing: what this agent may use (only within what its user may; nothing listed = nothing, unless "
        "'all user tools' is ticked)"
    )

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "server":
            kwargs["queryset"] = Server.objects.filter(servers_visible_to_operator(user=request.user))
        if db_field.name == "tool":
            kwargs["queryset"] = Tool.objects.filter(
                server__in=Server.objects.filter(servers_visible_to_operator(user=request.user))
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


@admin.register(Agent)
class AgentAdmin(TitledAdminMixin, PeopleChoicesMixin, StrictLookupsMixin, admin.ModelAdmin[Agent]):
    list_title = "Agents — the programs acting for a person, and what each may use of that person's access"
    list_display = ("name", "user", "parent", "tenant", "all_user_tools", "created_at")
    list_select_related = ("user", "parent", "tenant")
    search_fields = ("name", "user__username")
    autocomplete_fields = ("user",)
    raw_id_fields = ("parent",)
    fields = ("user", "name", "parent", "tenant", "all_user_tools")
    inlines = (AgentGrantInline,)

    def object_title(self, request, obj: Agent) -> str:
        return f"Agent {obj.name}"

    def get_queryset(self, request):
        # Shared agents and the admin's tenants', never a shared (tenant-less) agent of tenant B's person (Z12):
        # the list, each page, the search and the parent lookup.
        return super().get_queryset(request).filter(agents_visible_to_operator(user=request.user))

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tenant" and not request.user.is_superuser:
            kwargs["queryset"] = Tenant.objects.filter(pk__in=request.user.tenants.values("pk"))
        if db_field.name == "parent":  # the agents it lists (Z12)
            kwargs["queryset"] = Agent.objects.filter(agents_visible_to_operator(user=request.user))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
