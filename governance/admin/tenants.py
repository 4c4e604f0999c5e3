"""Governance admin: tenants (who belongs to which) and agents with the grants that narrow them."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from catalog.admin.lookups import StrictLookupsMixin
from catalog.models import Server, Tool

from ..models import Agent, AgentGrant, Tenant
from ..selectors import agents_visible_to_operator, servers_visible_to_operator
from .people import PeopleChoicesMixin


@admin.register(Tenant)
class TenantAdmin(PeopleChoicesMixin, StrictLookupsMixin, admin.ModelAdmin[Tenant]):
    list_display = ("slug", "name", "created_at")
    search_fields = ("slug", "name")
    filter_horizontal = ("members",)
    fields = ("slug", "name", "members")

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        return qs if request.user.is_superuser else qs.filter(pk__in=request.user.tenants.values("pk"))

    def get_readonly_fields(self, request, obj=None):
        return ("slug",) if obj is not None else ()  # audit rows and tokens name it


class AgentGrantForm(forms.ModelForm):
    class Meta:
        model = AgentGrant
        fields = ("action", "server", "tool")

    def clean(self):
        data = super().clean()
        if bool(data.get("server")) == bool(data.get("tool")):
            raise ValidationError("name a server or a tool (one of them)")
        return data


class AgentGrantInline(admin.TabularInline):
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
class AgentAdmin(PeopleChoicesMixin, StrictLookupsMixin, admin.ModelAdmin[Agent]):
    list_display = ("name", "user", "parent", "tenant", "all_user_tools", "created_at")
    list_select_related = ("user", "parent", "tenant")
    search_fields = ("name", "user__username")
    autocomplete_fields = ("user",)
    raw_id_fields = ("parent",)
    fields = ("user", "name", "parent", "tenant", "all_user_tools")
    inlines = (AgentGrantInline,)

    def get_queryset(self, request):
        # Shared agents and the admin's tenants', never a shared (tenant-less) agent of tenant B's person (Z12):
        # the list, each page, the search and the parent lookup.
        return super().get_queryset(request).filter(agents_visible_to_operator(user=request.user))

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tenant" and not request.user.is_superuser:
            kwargs["queryset"] = Tenant.objects.filter(pk__in=request.user.tenants.values("pk"))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
