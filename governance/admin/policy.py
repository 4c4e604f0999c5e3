"""Governance admin: policy."""

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils.html import format_html

from catalog.admin.display import breakable_column
from catalog.admin.lookups import StrictLookupsMixin
from catalog.admin.readonly import ReadOnlyMixin
from catalog.admin.titles import TitledAdminMixin
from catalog.admin.tools import CommaSeparatedListField

from ..models import (
    Entitlement,
    PolicyVersion,
    RiskClass,
    ServerGroupObjectPermission,
    ServerUserObjectPermission,
    ToolGroupObjectPermission,
    ToolPolicy,
    ToolUserObjectPermission,
)
from ..principals import principal_for_user
from ..services.audit import audit_record
from ..services.policy import risk_class_update, tool_policy_classify
from .common import SharedToolReadOnlyMixin, _pre
from .people import PeopleChoicesMixin, person_name, rows_of_groups_for, rows_of_people_for, with_person_visible
from .tenant_scope import TenantScopedMixin


@admin.register(RiskClass)
class RiskClassAdmin(TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin[RiskClass]):
    list_title = "Risk classes — which calls need an approval, and how long one holds"
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
class PolicyVersionAdmin(ReadOnlyMixin, TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin[PolicyVersion]):
    list_title = "Policy versions — each change to risk classes and tool policies, as approvals record it"
    list_display = ("label", "reason", "created_at", "creator")
    readonly_fields = ("number", "reason", "created_at", "creator")
    fields = readonly_fields  # not the created_by field itself: it would name another tenant's operator
    hidden_lookups = ("created_by",)  # nor a lookup on it (?created_by=17)

    def get_queryset(self, request):
        # The policy is one for all tenants, but who bumped it may be another tenant's operator (Z12).
        return with_person_visible(request, super().get_queryset(request).select_related("created_by"), "created_by")

    @admin.display(description="created by")
    def creator(self, obj: PolicyVersion) -> str:
        return person_name(obj, "created_by")


@admin.register(Entitlement)
class EntitlementAdmin(TitledAdminMixin, PeopleChoicesMixin, StrictLookupsMixin, admin.ModelAdmin[Entitlement]):
    """Entitlements offer only the people and groups the admin may see; saving keeps the others (Z12)."""

    list_display = ("slug", "name")
    list_title = "Entitlements — named rights a tool's policy may require of its callers"
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


class HintConflictFilter(admin.SimpleListFilter):
    title = "upstream hints"
    parameter_name = "hints"

    def lookups(self, request, model_admin):
        return [("contradicted", "Contradicted by the tool's own words")]

    def queryset(self, request, queryset):
        if self.value() == "contradicted":
            # An admin's classification replaced the derived defaults: its note is the admin's reason.
            return queryset.filter(classified_by_admin=False).exclude(classification_note="")
        return queryset


class NamesField(CommaSeparatedListField):
    """Names edited as ``production, staging``: the help said "e.g. pii, financial, secrets" and the JSON field
    refused just that ("Enter a valid JSON"). A JSON list, as the field took before, is still read as one."""

    def to_python(self, value) -> list[str]:
        text = (value or "").strip()
        if text.startswith("["):
            try:
                items = json.loads(text)
            except ValueError:
                raise forms.ValidationError("Write the names comma-separated, e.g. pii, financial") from None
            if not isinstance(items, list):
                raise forms.ValidationError("Write the names comma-separated, e.g. pii, financial")
            text = ",".join(str(item) for item in items)
        return super().to_python(text)


class ToolPolicyForm(forms.ModelForm):
    allowed_environments = NamesField(
        required=False,
        help_text="Environments the tool may be used in, comma-separated, e.g. production, staging; empty: its "
        "server's environment",
    )
    data_classes = NamesField(required=False, help_text="The data it touches, comma-separated, e.g. pii, financial")
    classification_note = forms.CharField(
        required=False,
        max_length=ToolPolicy._meta.get_field("classification_note").max_length,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why the tool is classified so, e.g. 'deletes customer records: critical'; kept with the change and "
        "in its audit event. Until an admin classifies the tool, it says why the defaults are stricter than the "
        "upstream hints.",
    )

    class Meta:
        model = ToolPolicy
        fields = ("operation_class", "reversibility", "risk_class", "required_entitlements", "allowed_environments",
                  "data_classes", "classification_note")  # fmt: skip


@admin.register(ToolPolicy)
class ToolPolicyAdmin(
    TitledAdminMixin, SharedToolReadOnlyMixin, TenantScopedMixin, StrictLookupsMixin, admin.ModelAdmin[ToolPolicy]
):
    """The policies of the tools of servers the admin may manage (Z12: never another tenant's tool); who classified
    a tool and who holds access to it are named only where the admin may see them."""

    shared_tool_note = (
        "This tool's server is shared by every tenant: only a superuser classifies it, since every tenant's calls "
        "follow its risk class."
    )

    form = ToolPolicyForm
    server_path = "tool__server"
    list_title = "Tool policies — each tool's risk class and operation, and whether it is held for review"
    # Held comes second, the operation over its reversibility in one column, tool ids break at "::" and "_": at 800 px
    # beside the navigation, "held" was past the table's edge and ids broke letter by letter; every column is now in
    # view at 800 and 1280 px.
    # Whether its calls wait for an approver under its risk class (what an operator reads the list for), and who set
    # the class in words: a boolean's red cross on every row Scout classified from the hints read as 36 errors.
    list_display = ("tool_column", "held_column", "risk_column", "operation_column", "by_admin")
    list_display_links = ("tool_column",)
    list_filter = (
        "operation_class",
        "risk_class",
        "reversibility",
        "classified_by_admin",
        HeldFilter,
        HintConflictFilter,
    )
    list_select_related = ("tool", "risk_class")
    search_fields = ("tool__tool_id",)
    hidden_lookups = ("classified_by",)  # read masked where another tenant's (Z12)
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
        "classification_note",
        "classifier",
        "classified_at",
        "held_column",
        "hold_reason",
        "markers",
        "accepted_hash",
        "access",
    )
    readonly_fields = (
        "tool",
        "access",
        "classified_by_admin",
        "classifier",
        "classified_at",
        "held_column",
        "hold_reason",
        "markers",
        "accepted_hash",
    )

    def get_queryset(self, request):
        return with_person_visible(request, super().get_queryset(request), "classified_by")

    tool_column = breakable_column("tool.tool_id", description="tool")

    @admin.display(description="held", ordering="held")
    def held_column(self, obj: ToolPolicy):
        # A held tool is the one to look at: as a boolean it got the green tick that reads "fine", and every accepted
        # tool a red cross. Held is a purple badge, as on the tool list; accepted is nothing to see.
        if not obj.held:
            return "-"
        return format_html('<span class="scout-badge s-held" title="{}">Held</span>', obj.hold_reason)

    @admin.display(description="operation", ordering="operation_class")
    def operation_column(self, obj: ToolPolicy):
        return format_html(
            "{}<br><small>{}</small>", obj.get_operation_class_display(), obj.get_reversibility_display().lower()
        )

    @admin.display(description="risk class", ordering="risk_class__rank")
    def risk_column(self, obj: ToolPolicy):
        approval = "approval: every call" if obj.needs_approval else "approval: none"
        return format_html('{}<br><small class="approval-rule">{}</small>', obj.risk_class, approval)

    @admin.display(description="set by", ordering="classified_by_admin")
    def by_admin(self, obj: ToolPolicy):
        if obj.classified_by_admin:
            return "an admin"
        return format_html('<span class="quiet" title="{}">its hints</span>', "Scout's default from the server's hints")

    def object_title(self, request, obj: ToolPolicy) -> str:
        return f"Policy of {obj.tool.tool_id}"

    def get_object(self, request, object_id, from_field=None):
        policy = super().get_object(request, object_id, from_field)
        if policy is not None:
            policy.access_request = request  # whose page it is: ``access`` names only the holders they may see
        return policy

    @admin.display(description="classified by")
    def classifier(self, obj: ToolPolicy) -> str:
        return person_name(obj, "classified_by")

    @admin.display(description="who has access")
    def access(self, obj: ToolPolicy):
        """Grants that reach this tool (on the tool or its server), with links to add more; a shared tool's holders
        of other tenants (people and groups) are left out, as on the tool's page (Z12)."""
        tool, server, request = obj.tool, obj.tool.server, obj.access_request
        sources = []
        for scope, target, grant_models in (
            ("tool", tool, (ToolUserObjectPermission, ToolGroupObjectPermission)),
            ("server", server, (ServerUserObjectPermission, ServerGroupObjectPermission)),
        ):
            people, groups = (model.objects.filter(content_object=target) for model in grant_models)
            sources.append((scope, rows_of_people_for(request, people).select_related("user", "permission")))
            sources.append((scope, rows_of_groups_for(request, groups).select_related("group", "permission")))
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

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "required_entitlements":
            field.help_text = self._entitlements_help(request)
        return field

    def _entitlements_help(self, request) -> str:
        """How to get an entitlement that is not listed: entitlements are install-wide (their holders span tenants,
        like risk classes), so a superuser adds them, here with "+"; an operator only reads who holds each."""
        if request.user.has_perm("governance.add_entitlement"):
            return "A caller needs every entitlement chosen. A new one: + beside the list, then its people and groups."
        return format_html(
            "A caller needs every entitlement chosen. Entitlements serve every tenant: a superuser adds them, so ask "
            'one for a new one (<a href="{}">Entitlements</a> lists who holds each).',
            reverse("admin:governance_entitlement_changelist"),
        )

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
                classification_note=data["classification_note"],
            )
        except ValidationError as exc:
            messages.error(request, "; ".join(exc.messages))
        except PermissionDenied as exc:
            messages.error(request, str(exc))

    def save_related(self, request, form, formsets, change) -> None:
        pass  # entitlements were set by tool_policy_classify
