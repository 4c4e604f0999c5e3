"""Access on the server and tool forms: who may discover, execute and approve, as groups or people.

The catalog's admins know nothing of governance (dependencies point catalog ← governance): this module
re-registers Server and Tool with subclasses that add the grant inlines. Every grant and revocation goes
through the audited services, never a bare save. Nobody but a superuser gives themselves ``approve`` (the form
says so before anything is saved). Tenants (Z12): the server form has a tenant section once tenants exist; an
operator lists and grants only shared servers (and their tools) and their tenants', and a tenant's server or
tool goes only to that tenant's members."""

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils.html import format_html

from catalog.admin.servers import ServerAdmin as CatalogServerAdmin
from catalog.admin.tools import CURATION_HELP
from catalog.admin.tools import ToolAdmin as CatalogToolAdmin
from catalog.choices import Transport
from catalog.models import Server, Tool

from ..models import (
    ServerGroupObjectPermission,
    ServerTenant,
    ServerUserObjectPermission,
    Tenant,
    ToolGroupObjectPermission,
    ToolUserObjectPermission,
)
from ..selectors import (
    server_fields_locked,
    server_tenant_id,
    servers_registrable_by,
    servers_shaped_by,
    servers_visible_to_operator,
    shared_shaped_by,
)
from ..selectors.tenants import INSTALL_ENVIRONMENT_FIELDS, tenants_exist
from ..services.permissions import (
    SELF_GRANT_MESSAGE,
    grants_to_self,
    permission_grant,
    permission_grant_check,
    permission_revoke,
    self_grant_refused,
)
from .people import PeopleChoicesMixin, rows_of_groups_for, rows_of_people_for
from .tenant_scope import TenantScopedMixin

ACTIONS = ("discover", "execute", "approve")
ACTION_HELP = {
    "server": "discover: find and inspect its tools · execute: call them (risky calls still need approval) · "
    "approve: decide those calls. A new server is visible to nobody until someone gets discover.",
    "tool": "discover: find and inspect this tool · execute: call it (risky calls still need approval) · "
    "approve: decide those calls. Grants on its server cover it too.",
}
GRANT_MODELS = {
    ServerGroupObjectPermission: "group",
    ServerUserObjectPermission: "user",
    ToolGroupObjectPermission: "group",
    ToolUserObjectPermission: "user",
}


def action_of(permission: Permission) -> str:
    return permission.codename.split("_", 1)[0]


class AccessFormSet(forms.BaseInlineFormSet):
    """Refuses, row by row, a grant of ``approve`` that would reach the person saving the form, and (Z12) a new
    grant on a tenant's server or tool to someone outside that tenant (the service checks it again)."""

    actor = None
    holder_field = "user"

    def clean(self) -> None:
        super().clean()
        for form in self.forms:
            data = getattr(form, "cleaned_data", None) or {}
            if not data or data.get("DELETE") or form.instance.pk:
                continue
            holder, permission = data.get(self.holder_field), data.get("permission")
            if not (holder and permission):
                continue
            if self_grant_refused(actor=self.actor, holder=holder, action=action_of(permission)):
                form.add_error(self.holder_field, SELF_GRANT_MESSAGE)
            if self.instance.pk is None:
                continue
            try:
                permission_grant_check(actor=self.actor, target=self.instance, holder=holder)
            except ValidationError as error:
                raise forms.ValidationError(error.messages) from None


# The first access section on a server's page (its inline's formset prefix, "<prefix>-group"), where a link to
# who may use the server lands.
ACCESS_SECTION = "group_grants-group"


class _AccessInline(PeopleChoicesMixin, admin.TabularInline):
    fk_name = "content_object"
    template = "admin/edit_inline/scout_tabular.html"  # a grant reads "discover", not the permission's name
    extra = 1
    can_delete = True
    formset = AccessFormSet
    target = "server"

    def get_queryset(self, request):
        # People and groups of other tenants holding a grant on a shared server or tool are left out (Z12); the
        # formset saves only the rows it shows, so their grants stay as they are.
        grants = super().get_queryset(request)
        if GRANT_MODELS[self.model] == "user":
            return rows_of_people_for(request, grants)
        return rows_of_groups_for(request, grants)

    def get_formset(self, request, obj=None, **kwargs):
        # The column headers of saved rows (read-only: a grant is never edited) come from these labels, not from the
        # form fields: "Group may discover", as the section's heading words it, never the model's "Permission".
        kwargs["labels"] = {"permission": "may", "user": "person", "group": "group", **kwargs.get("labels", {})}
        formset = super().get_formset(request, obj, **kwargs)
        return type(formset.__name__, (formset,), {"actor": request.user, "holder_field": GRANT_MODELS[self.model]})

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "permission":
            kwargs["queryset"] = Permission.objects.filter(
                content_type__app_label="catalog", codename__in=[f"{a}_{self.target}" for a in ACTIONS]
            ).order_by("codename")
            field = super().formfield_for_foreignkey(db_field, request, **kwargs)
            field.label_from_instance = action_of
            field.label = "may"
            field.help_text = ACTION_HELP[self.target]
            return field
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # a grant is added or removed, never edited


class ServerGroupAccessInline(_AccessInline):
    model = ServerGroupObjectPermission
    fields = ("group", "permission")
    autocomplete_fields = ("group",)
    verbose_name = "group access"
    verbose_name_plural = "Access: groups who may discover / execute / approve"


class ServerUserAccessInline(_AccessInline):
    model = ServerUserObjectPermission
    fields = ("user", "permission")
    autocomplete_fields = ("user",)
    verbose_name = "person's access"
    verbose_name_plural = "Access: people who may discover / execute / approve"


class ToolGroupAccessInline(ServerGroupAccessInline):
    model = ToolGroupObjectPermission
    target = "tool"
    verbose_name_plural = "Access to this tool: groups who may discover / execute / approve"


class ToolUserAccessInline(ServerUserAccessInline):
    model = ToolUserObjectPermission
    target = "tool"
    verbose_name_plural = "Access to this tool: people who may discover / execute / approve"


class ServerTenantInline(admin.TabularInline):
    """Which tenant owns the server: only its callers see its tools (empty: shared by every tenant). One row under a
    "Tenant" heading with what it means, not Django's stacked form headed "Tenant: #1"."""

    model = ServerTenant
    fields = ("tenant",)
    extra = 0
    max_num = 1
    template = "admin/edit_inline/scout_tabular.html"
    verbose_name = "tenant"
    verbose_name_plural = "Tenant: only this tenant's callers see the server (none: shared by all tenants)"
    help = "Only this tenant's callers see the server's tools; with none, every tenant shares it."

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tenant" and not request.user.is_superuser:
            kwargs["queryset"] = Tenant.objects.filter(pk__in=request.user.tenants.values("pk"))
            if kwargs["queryset"].count() == 1:
                # Their only tenant, chosen: an empty choice they must not keep only led to "This field is required".
                kwargs["empty_label"] = None
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_add_permission(self, request, obj=None) -> bool:
        # A shared server stays shared unless a superuser says otherwise: a tenant's admin giving it their tenant
        # would take it (and its credentials) from every other tenant.
        if obj is not None and obj.pk is not None and not request.user.is_superuser:
            return False
        return super().has_add_permission(request, obj)

    def has_delete_permission(self, request, obj=None) -> bool:
        # Removing the tenant would share the server with every tenant: only one who may shape what they share.
        return shared_shaped_by(user=request.user) and super().has_delete_permission(request, obj)

    def get_min_num(self, request, obj=None, **kwargs) -> int:
        # A new server of someone who may not shape what every tenant shares is one of their tenants' (and stays
        # so); a shared one stays shared (``has_add_permission``).
        if shared_shaped_by(user=request.user):
            return 0
        return 1 if obj is None or obj.pk is None or server_tenant_id(obj) is not None else 0

    def get_formset(self, request, obj=None, **kwargs):
        kwargs["validate_min"] = True
        formset = super().get_formset(request, obj, **kwargs)
        # Django's "Please submit at least 1 form." says nothing of what to do.
        formset.default_error_messages = {
            "too_few_forms": "Choose the tenant this server is for: only a superuser registers a server every "
            "tenant shares."
        }
        return formset


class AccessAdminMixin:
    """Saves the access inlines through the audited grant services."""

    def save_formset(self, request, form, formset, change):
        holder_field = GRANT_MODELS.get(formset.model)
        if holder_field is None:
            return super().save_formset(request, form, formset, change)
        new_grants = formset.save(commit=False)  # fills deleted_objects; nothing is written here
        for grant in formset.deleted_objects:
            permission_revoke(
                actor=request.user,
                target=form.instance,
                action=action_of(grant.permission),
                holder=getattr(grant, holder_field),
            )
        for grant in new_grants:
            holder, action = getattr(grant, holder_field), action_of(grant.permission)
            permission_grant(actor=request.user, target=form.instance, action=action, holder=holder)
            if action == "approve" and grants_to_self(actor=request.user, holder=holder):
                messages.warning(
                    request,
                    f"{holder} may approve, but not you through this grant: "
                    "an approve grant never counts for the person who made it.",
                )


class ServerAdmin(AccessAdminMixin, CatalogServerAdmin):
    inlines = (ServerTenantInline, ServerGroupAccessInline, ServerUserAccessInline, *CatalogServerAdmin.inlines)

    def get_inline_instances(self, request, obj=None):
        # The tenant section appears once tenants exist: a single-tenant install keeps its plain form.
        inlines = super().get_inline_instances(request, obj)
        if not tenants_exist():
            inlines = [inline for inline in inlines if not isinstance(inline, ServerTenantInline)]
        return inlines

    def has_add_permission(self, request) -> bool:
        # Once there are tenants, an operator in none could fill the whole form and only then read "This field is
        # required" under an empty tenant list: no server is theirs to register (the home says so and why).
        return super().has_add_permission(request) and servers_registrable_by(user=request.user)

    def access_note(self, server: Server) -> str:
        # Read after the access sections were saved: a discover given on the form itself counts.
        discover = {"content_object": server, "permission__codename": "discover_server"}
        models = (ServerGroupObjectPermission, ServerUserObjectPermission)
        # A link, not "below": after Save its reader is on the server list, where no access section is below. It
        # opens the page at its access sections: "its page" led to the top of a long form, the access a screen below.
        page = reverse("admin:catalog_server_change", args=[server.pk]) + f"#{ACCESS_SECTION}"
        if any(model.objects.filter(**discover).exists() for model in models):
            return format_html(
                'Its tools are visible to the groups and people given discover in <a id="access-note" href="{}">its '
                "access sections</a>.",
                page,
            )
        return format_html(
            'Its tools are visible to nobody until you give discover in <a id="access-note" href="{}">its access '
            "sections</a>.",
            page,
        )

    def get_readonly_fields(self, request, obj=None):
        # Environment variables and commands are the superuser's to name once there are tenants, and a shared
        # server's connection is not a tenant operator's to move (``server_fields_locked``). The connection test
        # builds its form here too, so it never uses what the form may not set.
        locked = server_fields_locked(user=request.user, server=obj) - HIDDEN_WHEN_LOCKED
        return (*super().get_readonly_fields(request, obj), *sorted(locked))

    def get_form(self, request, obj=None, change=False, **kwargs):
        # Declared form fields are in every form built from it, whatever the fieldsets say: drop the locked ones.
        form = super().get_form(request, obj, change=change, **kwargs)
        locked = server_fields_locked(user=request.user, server=obj)
        for name in locked & FORM_ONLY_FIELDS:
            form.base_fields.pop(name, None)
        transport = form.base_fields.get("transport")
        if obj is None and "command" in locked and transport is not None:
            # A stdio server needs a command, which this operator may not name: offered, it could only be refused.
            transport.choices = [choice for choice in transport.choices if choice[0] != Transport.STDIO]
            transport.initial = Transport.HTTP
        alternatives = form.base_fields.get("alternatives")
        if obj is not None and alternatives is not None:  # a server is not an alternative to itself
            alternatives.queryset = alternatives.queryset.exclude(slug=obj.slug)
        return form

    def get_fieldsets(self, request, obj=None):
        # The OpenAPI document is a form field, not a model one: when it is locked it is left out (not shown
        # read-only); the stored document stands and the server's OpenAPI preview still shows what it yields.
        locked = server_fields_locked(user=request.user, server=obj)
        hidden = locked & HIDDEN_WHEN_LOCKED
        note = _locked_connection_note(locked)
        fieldsets = []
        for name, options in super().get_fieldsets(request, obj):
            options = {**options, "fields": [field for field in options["fields"] if field not in hidden]}
            if name == "Connection" and note:  # a read-only "-" with no reason was a dead end
                options["description"] = note
            fieldsets.append((name, options))
        return fieldsets

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "alternatives":  # tenant B's servers do not exist for tenant A's operator (Z12)
            kwargs["queryset"] = Server.objects.filter(servers_visible_to_operator(user=request.user))
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def get_queryset(self, request):
        # An operator of tenant A manages shared servers and tenant A's; tenant B's do not exist for them (Z12).
        return super().get_queryset(request).filter(servers_visible_to_operator(user=request.user))


FORM_ONLY_FIELDS = frozenset({"openapi_upload", "openapi_document"})  # the server form's, not the model's
# Left out when locked rather than shown read-only: the document's text, and a shared server's alternatives (a
# superuser may have named another tenant's server there, whose name would reach tenant A's operator).
HIDDEN_WHEN_LOCKED = FORM_ONLY_FIELDS | {"alternatives"}


def _locked_connection_note(locked: frozenset[str]) -> str:
    """Why the connection fields shown read-only cannot be set here, and what the operator can do instead."""
    if "name" in locked:
        return "This server is shared by every tenant: only a superuser changes its connection."
    if "transport" in locked:
        return (
            "This server's credentials are named by a superuser: only a superuser changes where its calls go, "
            "as its credentials go with them."
        )
    if locked & set(INSTALL_ENVIRONMENT_FIELDS):
        return (
            "Commands and environment variable names (a stdio server's command, arguments and variables, the "
            "variables holding credentials) are set by a superuser once Scout has tenants: Scout's processes serve "
            "every tenant and hold every tenant's credentials. Here you can add a Streamable HTTP or OpenAPI server "
            "that needs no credentials; ask a superuser to add a stdio server or one that needs credentials."
        )
    return ""


GRANT_PERMISSIONS = ("governance.add_toolgroupobjectpermission", "governance.add_tooluserobjectpermission")
CURATION_FIELDS = (*CURATION_HELP, "entity_types", "operation_verbs")


class CuratableFilter(admin.SimpleListFilter):
    """The tools whose curation this person may change (``servers_shaped_by``): a tenant's curator lists shared
    tools too, which only a superuser curates. The curator home's "without example requests" count links here."""

    title = "curation"
    parameter_name = "curate"

    def lookups(self, request, model_admin):
        # Offered to curators only: an operator shapes servers but curates no tool.
        return [("yours", "Tools you may curate")] if request.user.has_perm("catalog.change_tool") else []

    def queryset(self, request, queryset):
        if self.value() == "yours":
            return queryset.filter(server__in=Server.objects.filter(servers_shaped_by(user=request.user)).values("pk"))
        return queryset


def _shared_curation_note() -> str:
    yours = reverse("admin:catalog_tool_changelist") + "?curate=yours"
    return format_html(
        "This tool's server is shared by every tenant: only a superuser curates its tools, since its words shape "
        'every tenant\'s search. <a href="{}">Tools you may curate</a>.',
        yours,
    )


class ToolAdmin(AccessAdminMixin, TenantScopedMixin, CatalogToolAdmin):
    """The tool page with its own access. An operator (who may grant but not curate) saves the access rows
    only: the curation fields are read-only for them and nothing else of the tool is written. Only tools of the
    servers the operator may manage are listed (Z12)."""

    list_filter = (*CatalogToolAdmin.list_filter, CuratableFilter)
    inlines = (*CatalogToolAdmin.inlines, ToolGroupAccessInline, ToolUserAccessInline)  # curation first

    def _may_curate(self, request, obj=None) -> bool:
        # A shared server's tools are every tenant's to search: curated by one who may shape what they share.
        if obj is not None and not self._shapes_server(request, obj.server_id):
            return False
        return super().has_change_permission(request)

    def _shapes_server(self, request, server_id: int) -> bool:
        # Asked by every permission check of the page (Save buttons, inlines, fields): read once a request.
        known = request.__dict__.setdefault("_scout_shaped_servers", {})
        if server_id not in known:
            known[server_id] = Server.objects.filter(servers_shaped_by(user=request.user), pk=server_id).exists()
        return known[server_id]

    def has_change_permission(self, request, obj=None) -> bool:
        if any(map(request.user.has_perm, GRANT_PERMISSIONS)):
            return True
        # A tool this curator may not curate is theirs to read: no Save button that would save nothing.
        return super().has_change_permission(request, obj) and (obj is None or self._may_curate(request, obj))

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields if self._may_curate(request, obj) else (*fields, *CURATION_FIELDS)

    def get_inline_instances(self, request, obj=None):
        # A tool this admin may not curate has only its access sections (as for an operator, who may curate none).
        inlines = super().get_inline_instances(request, obj)
        if obj is not None and not self._may_curate(request, obj):
            return [inline for inline in inlines if inline.model in GRANT_MODELS]
        return inlines

    def get_fieldsets(self, request, obj=None):
        # Read-only related tools would name every tenant's (the editable widget offers only the admin's servers'):
        # once there are tenants they are shown only to those who may edit them.
        fieldsets = super().get_fieldsets(request, obj)
        if obj is not None and not self._may_curate(request, obj) and request.user.has_perm("catalog.change_tool"):
            # A curator's read-only "-" with no reason was a dead end: say whose the curation is, and where theirs is.
            fieldsets = [
                (name, {**options, "description": _shared_curation_note()} if name == "Curation" else options)
                for name, options in fieldsets
            ]
        if obj is None or self._may_curate(request, obj) or shared_shaped_by(user=request.user):
            return fieldsets
        return [
            (name, {**options, "fields": [field for field in options["fields"] if field != "related_tools"]})
            for name, options in fieldsets
        ]

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "related_tools":  # offered, accepted and shown: tools of the servers it manages (Z12)
            kwargs["queryset"] = Tool.objects.filter(server__in=self.managed_servers(request))
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def save_related(self, request, form, formsets, change) -> None:
        if "related_tools" in form.cleaned_data:
            # Related tools of servers this admin may not manage were neither shown nor offered: they stay.
            unseen = form.instance.related_tools.exclude(server__in=self.managed_servers(request))
            form.cleaned_data["related_tools"] = [*form.cleaned_data["related_tools"], *unseen]
        access = [formset for formset in formsets if formset.model in GRANT_MODELS]
        for formset in access:
            self.save_formset(request, form, formset, change=change)
        if self._may_curate(request, form.instance):  # curation, phrases: a changed grant is no reason to reindex
            super().save_related(request, form, [f for f in formsets if f not in access], change)

    def response_change(self, request, obj):
        if self._may_curate(request, obj):
            return super().response_change(request, obj)
        response = admin.ModelAdmin.response_change(self, request, obj)
        storage = messages.get_messages(request)
        kept = [m for m in storage if "was changed successfully" not in m.message]
        for message in kept:
            messages.add_message(request, message.level, message.message, extra_tags=message.extra_tags)
        self.message_user(request, f"Saved the access to {obj.tool_id}.", messages.SUCCESS)
        return response


admin.site.unregister(Server)
admin.site.register(Server, ServerAdmin)
admin.site.unregister(Tool)
admin.site.register(Tool, ToolAdmin)
