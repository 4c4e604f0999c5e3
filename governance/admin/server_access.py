"""Access on the server form: who may discover, execute and approve its tools, as groups or people.

The catalog's ServerAdmin knows nothing of governance (dependencies point catalog ← governance): this module
re-registers Server with a subclass that adds the grant inlines. Every grant and revocation goes through the
audited services, never a bare save."""

from django.contrib import admin
from django.contrib.auth.models import Permission

from catalog.admin.servers import ServerAdmin as CatalogServerAdmin
from catalog.models import Server

from ..models import ServerGroupObjectPermission, ServerUserObjectPermission
from ..services.permissions import permission_grant, permission_revoke

ACTIONS = ("discover", "execute", "approve")
ACTION_HELP = (
    "discover: find and inspect its tools · execute: call them (risky calls still need approval) · "
    "approve: decide those calls. A new server is visible to nobody until someone gets discover."
)


class _AccessInline(admin.TabularInline):
    fk_name = "content_object"
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


GRANT_MODELS = {ServerGroupObjectPermission: "group", ServerUserObjectPermission: "user"}


class ServerAdmin(CatalogServerAdmin):
    inlines = (ServerGroupAccessInline, ServerUserAccessInline, *CatalogServerAdmin.inlines)

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
