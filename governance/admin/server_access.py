"""Access on the server form: who may discover, execute and approve its tools, as groups or people.

The catalog's ServerAdmin knows nothing of governance (dependencies point catalog ← governance): this module
re-registers Server with a subclass that adds the grant inlines. Every grant and revocation goes through the
audited services, never a bare save."""

from django import forms
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet

from catalog.admin.servers import ServerAdmin as CatalogServerAdmin
from catalog.models import Server

from ..models import ServerGroupObjectPermission, ServerTenant, ServerUserObjectPermission, Tenant
from ..selectors import servers_visible_to_operator
from ..services.permissions import permission_grant, permission_grant_check, permission_revoke

ACTIONS = ("discover", "execute", "approve")
ACTION_HELP = (
    "discover: find and inspect its tools · execute: call them (risky calls still need approval) · "
    "approve: decide those calls. A new server is visible to nobody until someone gets discover."
)


class _TenantCheckedFormSet(BaseInlineFormSet):
    """New grants on a tenant's server go only to that tenant's members (the service checks it again)."""

    def clean(self) -> None:
        super().clean()
        for form in self.forms:
            holder = form.cleaned_data.get("user") or form.cleaned_data.get("group") if form.has_changed() else None
            if holder is None or form.cleaned_data.get("DELETE") or self.instance.pk is None:
                continue
            try:
                permission_grant_check(actor=self.actor, target=self.instance, holder=holder)
            except ValidationError as error:
                raise forms.ValidationError(error.messages) from None


class _AccessInline(admin.TabularInline):
    fk_name = "content_object"
    formset = _TenantCheckedFormSet
    extra = 1
    can_delete = True

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "permission":
            kwargs["queryset"] = Permission.objects.filter(
                content_type__app_label="catalog", codename__in=[f"{a}_server" for a in ACTIONS]
            ).order_by("codename")
            field = super().formfield_for_foreignkey(db_field, request, **kwargs)
            field.label_from_instance = lambda permission: permission.codename.split("_", 1)[0]
            field.label = "may"
            field.help_text = ACTION_HELP
            return field
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        return type(formset.__name__, (formset,), {"actor": request.user})

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


class ServerTenantInline(admin.StackedInline):
    """Which tenant owns the server: only its callers see its tools (empty: shared by every tenant)."""

    model = ServerTenant
    fields = ("tenant",)
    extra = 0
    max_num = 1
    verbose_name = "tenant"
    verbose_name_plural = "Tenant: only this tenant's callers see the server (none: shared by all tenants)"

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tenant" and not request.user.is_superuser:
            kwargs["queryset"] = Tenant.objects.filter(pk__in=request.user.tenants.values("pk"))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


GRANT_MODELS = {ServerGroupObjectPermission: "group", ServerUserObjectPermission: "user"}


class ServerAdmin(CatalogServerAdmin):
    inlines = (ServerTenantInline, ServerGroupAccessInline, ServerUserAccessInline, *CatalogServerAdmin.inlines)

    def get_inline_instances(self, request, obj=None):
        # The tenant section appears once tenants exist: a single-tenant install keeps its plain form.
        inlines = super().get_inline_instances(request, obj)
        if not Tenant.objects.exists():
            inlines = [inline for inline in inlines if not isinstance(inline, ServerTenantInline)]
        return inlines

    def get_queryset(self, request):
        # An operator of tenant A manages shared servers and tenant A's; tenant B's do not exist for them (Z12).
        return super().get_queryset(request).filter(servers_visible_to_operator(user=request.user))

    def save_formset(self, request, form, formset, change):
        holder_field = GRANT_MODELS.get(formset.model)
        if holder_field is None:
            return super().save_formset(request, form, formset, change)
        new_grants = formset.save(commit=False)  # fills deleted_objects; nothing is written here
        for grant in formset.deleted_objects:
            permission_revoke(
                actor=request.user,
                target=form.instance,
                action=grant.permission.codename.split("_", 1)[0],
                holder=getattr(grant, holder_field),
            )
        for grant in new_grants:
            permission_grant(
                actor=request.user,
                target=form.instance,
                action=grant.permission.codename.split("_", 1)[0],
                holder=getattr(grant, holder_field),
            )


admin.site.unregister(Server)
admin.site.register(Server, ServerAdmin)
