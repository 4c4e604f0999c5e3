"""Governance admin: grants."""

from django import forms
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.utils.text import capfirst

from catalog.admin.lookups import StrictLookupsMixin
from catalog.admin.titles import TitledAdminMixin
from catalog.models import Server, Tool

from ..models import (
    ServerGroupObjectPermission,
    ServerUserObjectPermission,
    ToolGroupObjectPermission,
    ToolUserObjectPermission,
)
from ..selectors import servers_visible_to_operator
from ..services.permissions import (
    SELF_GRANT_MESSAGE,
    permission_grant,
    permission_grant_check,
    permission_revoke,
    self_grant_refused,
)
from .people import PeopleChoicesMixin, person_name, rows_of_groups_for, rows_of_people_for, with_person_visible

ACTIONS = ("discover", "execute", "approve")


class ActionFilter(admin.SimpleListFilter):
    """By what the grant allows: the three actions, not every permission of the install (a plain filter on the
    permission foreign key listed them all, each read with its content type)."""

    title = "permission"
    parameter_name = "permission"

    def lookups(self, request, model_admin):
        return [(action, action) for action in ACTIONS]

    def queryset(self, request, queryset):
        if self.value() in ACTIONS:
            return queryset.filter(permission__codename__startswith=f"{self.value()}_")
        return queryset


class GrantAdmin(TitledAdminMixin, PeopleChoicesMixin, StrictLookupsMixin, admin.ModelAdmin):
    """Grants are added and deleted, never edited; both go through the audited services."""

    target_model: type = Server
    list_display = ("holder", "action", "content_object", "granter")
    list_filter = (ActionFilter,)
    hidden_lookups = ("granted_by",)  # read masked where another tenant's (Z12)
    raw_id_fields = ("content_object",)
    list_select_related = ("permission", "content_object", "granted_by")

    def object_title(self, request, obj) -> str:
        return f"Grant: {self.holder(obj)} may {self.action(obj)} {obj.content_object}"

    def get_list_display(self, request):
        # The granted object's column reads "server" or "tool", not the field's "content object".
        @admin.display(description=self.target_model._meta.verbose_name, ordering="content_object")
        def target(obj) -> str:
            return str(obj.content_object)

        return tuple(target if name == "content_object" else name for name in self.list_display)

    def get_list_select_related(self, request):
        return (*self.list_select_related, self._holder_field())

    def _holder_field(self) -> str:
        return "user" if "user" in {f.name for f in self.model._meta.fields} else "group"

    def holder(self, obj) -> str:
        holder = getattr(obj, "user", None) or obj.group
        return str(holder)

    @admin.display(description="granted by")
    def granter(self, obj) -> str:
        return person_name(obj, "granted_by")  # another tenant's operator is not named (Z12)

    @admin.display(description="permission")
    def action(self, obj) -> str:
        return obj.permission.codename.split("_", 1)[0]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "content_object":  # servers (tools) the operator may manage; others: "no such ..." (Z12)
            servers = Server.objects.filter(servers_visible_to_operator(user=request.user))
            if self.target_model is Tool:
                kwargs["queryset"] = Tool.objects.filter(server__in=servers)
            else:
                kwargs["queryset"] = servers
            name = self.target_model._meta.verbose_name
            kwargs["error_messages"] = {"invalid_choice": f"no such {name}: check the id"}
            kwargs["label"] = capfirst(name)  # not "Content object"
        if db_field.name == "permission":
            model = self.target_model._meta.model_name
            kwargs["queryset"] = Permission.objects.filter(
                content_type__app_label="catalog",
                content_type__model=model,
                codename__in=[f"{a}_{model}" for a in ACTIONS],
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_queryset(self, request):
        # Grants on servers the operator may manage only (shared ones and their tenants', Z12).
        servers = Server.objects.filter(servers_visible_to_operator(user=request.user)).values("pk")
        field = "content_object__server" if self.target_model is Tool else "content_object"
        grants = super().get_queryset(request).filter(**{f"{field}__in": servers})
        if self._holder_field() == "user":
            grants = rows_of_people_for(request, grants)  # a shared server's holders of other tenants: left out
        else:
            grants = rows_of_groups_for(request, grants)  # and their groups
        return with_person_visible(request, grants, "granted_by")

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def get_form(self, request, obj=None, change=False, **kwargs):
        base = super().get_form(request, obj, change, **kwargs)
        holder_field = "user" if "user" in base.base_fields else "group"

        class GrantForm(base):
            def clean(self):
                data = super().clean()
                target, holder, permission = data.get("content_object"), data.get(holder_field), data.get("permission")
                if holder and permission:
                    action = permission.codename.split("_", 1)[0]
                    if self_grant_refused(actor=request.user, holder=holder, action=action):
                        self.add_error(holder_field, SELF_GRANT_MESSAGE)
                if target is not None and holder is not None:
                    # Z12: only servers the operator may manage, a tenant's server only to its members.
                    try:
                        permission_grant_check(actor=request.user, target=target, holder=holder)
                    except ValidationError as error:
                        raise forms.ValidationError(error.messages) from None
                return data

        return GrantForm

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
    list_title = "Server grants to people — who may discover, execute or approve a server's tools"
    target_model = Server
    raw_id_fields = ("content_object", "user")
    search_fields = ("user__username", "content_object__slug")


@admin.register(ServerGroupObjectPermission)
class ServerGroupGrantAdmin(GrantAdmin):
    list_title = "Server grants to groups — which groups may discover, execute or approve a server's tools"
    target_model = Server
    search_fields = ("group__name", "content_object__slug")


@admin.register(ToolUserObjectPermission)
class ToolUserGrantAdmin(GrantAdmin):
    list_title = "Tool grants to people — who may discover, execute or approve one tool"
    target_model = Tool
    raw_id_fields = ("content_object", "user")
    search_fields = ("user__username", "content_object__tool_id")


@admin.register(ToolGroupObjectPermission)
class ToolGroupGrantAdmin(GrantAdmin):
    list_title = "Tool grants to groups — which groups may discover, execute or approve one tool"
    target_model = Tool
    search_fields = ("group__name", "content_object__tool_id")
