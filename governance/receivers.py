"""Signal receivers: change review on upstream definitions, and visibility-cache invalidation.

Receivers carry no policy themselves; they call services (review) or only invalidate caches."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver

from catalog.models import Server, Tool
from catalog.signals import catalog_rows_changed, tool_definitions_changed, tools_changed

from .cache import visibility_invalidate
from .models import (
    Agent,
    AgentGrant,
    ApiToken,
    Entitlement,
    PolicyVersion,
    RiskClass,
    ServerGroupObjectPermission,
    ServerTenant,
    ServerUserObjectPermission,
    Tenant,
    ToolGroupObjectPermission,
    ToolPolicy,
    ToolUserObjectPermission,
)


@receiver(tool_definitions_changed)
def on_tool_definitions_changed(sender, *, changes, **kwargs) -> None:
    from .services.review import tool_definitions_review

    tool_definitions_review(changes=changes)


@receiver(post_save, sender=Tool)
def on_tool_saved(sender, *, instance: Tool, created: bool, raw: bool = False, **kwargs) -> None:
    if raw:
        return
    if created:
        # Created outside a sync (admin, shell, factories): give it a policy and the same first-sight check.
        from .services.review import tool_definition_review

        tool_definition_review(tool=instance, revision=instance.revisions.first(), previous_hash=None)
    visibility_invalidate()


def _invalidate(sender, **kwargs) -> None:
    if kwargs.get("raw"):
        return
    visibility_invalidate()


def _invalidate_m2m(sender, *, action: str, **kwargs) -> None:
    if action in ("post_add", "post_remove", "post_clear"):
        visibility_invalidate()


def _invalidate_signalled(sender, **kwargs) -> None:
    visibility_invalidate()


def connect() -> None:
    """Connect the invalidation receivers (called from GovernanceConfig.ready)."""
    for model in (
        Server,
        ToolPolicy,
        Group,
        Entitlement,
        ServerUserObjectPermission,
        ServerGroupObjectPermission,
        ToolUserObjectPermission,
        ToolGroupObjectPermission,
        Tenant,
        ServerTenant,
        Agent,
        AgentGrant,
        ApiToken,  # the gateway keeps verified tokens per process, trusted while the version stands
        RiskClass,  # its name is in every search answer the gateway keeps per process
        PolicyVersion,  # its number is in every audit event; policy_version_number (selectors) keeps it per process
    ):
        post_save.connect(_invalidate, sender=model, dispatch_uid=f"governance-vis-save-{model.__name__}")
        post_delete.connect(_invalidate, sender=model, dispatch_uid=f"governance-vis-delete-{model.__name__}")
    post_delete.connect(_invalidate, sender=Tool, dispatch_uid="governance-vis-delete-Tool")
    # A deactivated user, or a change of group membership or entitlements.
    user_model = get_user_model()
    post_save.connect(_invalidate, sender=user_model, dispatch_uid="governance-vis-save-user")
    # A deleted person: their memberships and grants go by cascade, which may send no signal of its own.
    post_delete.connect(_invalidate, sender=user_model, dispatch_uid="governance-vis-delete-user")
    for through in (
        user_model.groups.through,
        Entitlement.users.through,
        Entitlement.groups.through,
        ToolPolicy.required_entitlements.through,
        Tenant.members.through,
    ):
        m2m_changed.connect(_invalidate_m2m, sender=through, dispatch_uid=f"governance-vis-m2m-{through.__name__}")
    tools_changed.connect(_invalidate_signalled, dispatch_uid="governance-vis-tools-changed")
    catalog_rows_changed.connect(_invalidate_signalled, dispatch_uid="governance-vis-catalog-rows-changed")
