"""Signal receivers: change review on upstream definitions, visibility-cache invalidation, and the row locks that
make a change taking an approve right away wait for a decision under way.

Receivers carry no policy themselves; they call services (review, row locks) or only invalidate caches."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete, pre_save
from django.dispatch import receiver

from catalog.choices import ServerStatus
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
    if not created and (not instance.enabled or instance.removed_at is not None):
        # Disabled or removed: its open approvals are void now, not at the sweep (re-enabled, one ran again: Z6).
        from .services.approvals import approvals_void_for_tools

        approvals_void_for_tools(tool_pks=[instance.pk])


def _void_approvals_of_server_retired(sender, *, instance: Server, raw: bool = False, **kwargs) -> None:
    """A server disabled or archived: the open approvals for its tools are void now, as for a tool disabled (Z6,
    redteam55). A server only not serving for now (degraded, unavailable) keeps them, as the sweep does."""
    if raw or instance.status not in (ServerStatus.DISABLED, ServerStatus.ARCHIVED):
        return
    from .services.approvals import approvals_void_for_tools

    approvals_void_for_tools(tool_pks=Tool.objects.filter(server=instance).values_list("pk", flat=True))


def _invalidate(sender, **kwargs) -> None:
    if kwargs.get("raw"):
        return
    visibility_invalidate()


def _invalidate_m2m(sender, *, action: str, **kwargs) -> None:
    if action in ("post_add", "post_remove", "post_clear"):
        visibility_invalidate()


def _invalidate_signalled(sender, **kwargs) -> None:
    visibility_invalidate()


def _lock_people_leaving(sender, *, instance, action: str, pk_set, **kwargs) -> None:
    """Before people leave a group or a tenant (from either side, or all of its members at once), lock their rows:
    the membership may carry an approve right, and a decision of theirs under way waits on nothing else (T5/Z6)."""
    if action not in ("pre_remove", "pre_clear"):
        return
    from .services.permissions import rows_lock

    people = get_user_model().objects.all()
    if isinstance(instance, get_user_model()):
        rows_lock(people.filter(pk=instance.pk))
    elif pk_set is not None:
        rows_lock(people.filter(pk__in=pk_set))
    else:
        members = _members_of(instance)
        rows_lock(members)
        instance._scout_leaving = list(members.values_list("pk", flat=True))  # gone by post_clear


def _void_approvals_of_people_leaving(sender, *, instance, action: str, pk_set, **kwargs) -> None:
    """People left a group or a tenant (from either side, or all of its members at once): their open approvals for
    tools they may no longer execute are void now, as a revoked grant's are (Z6), not at the sweep's next run (an
    approval outlived a membership taken and given back meanwhile, redteam54)."""
    if action not in ("post_remove", "post_clear"):
        return
    from .services.approvals import approvals_void_for_people

    if isinstance(instance, get_user_model()):
        approvals_void_for_people(user_pks=[instance.pk])
    else:
        approvals_void_for_people(user_pks=pk_set if pk_set is not None else getattr(instance, "_scout_leaving", ()))


def _lock_members_of_deleted(sender, *, instance, **kwargs) -> None:
    """A group or tenant deleted: its members leave it with its grants (by cascade, which sends no m2m signal)."""
    from .services.permissions import rows_lock

    members = _members_of(instance)
    rows_lock(members)
    instance._scout_leaving = list(members.values_list("pk", flat=True))


def _void_approvals_of_members_of_deleted(sender, *, instance, **kwargs) -> None:
    """A group or tenant deleted: its members' approvals it gave the access for are void now (as on leaving it)."""
    from .services.approvals import approvals_void_for_people

    approvals_void_for_people(user_pks=getattr(instance, "_scout_leaving", ()))


def _void_approvals_of_entitlement_lost(sender, *, instance, action: str, pk_set, **kwargs) -> None:
    """People or groups taken out of an entitlement (from either side): the approvals of the people it reached, for
    tools that require it, are void now if they may no longer use them (Z6, redteam55)."""
    if action not in ("post_remove", "post_clear"):
        return
    from .services.approvals import approvals_void_for_people, approvals_void_for_tools

    if isinstance(instance, Entitlement):
        approvals_void_for_tools(
            tool_pks=Tool.objects.filter(policy__required_entitlements=instance).values_list("pk", flat=True)
        )
    elif isinstance(instance, Group):
        approvals_void_for_people(user_pks=_members_of(instance).values_list("pk", flat=True))
    else:
        approvals_void_for_people(user_pks=[instance.pk])


def _void_approvals_of_entitlement_required(sender, *, instance, action: str, pk_set, **kwargs) -> None:
    """A tool's policy came to require an entitlement (from either side): approvals for it of people without it are
    void now (Z6, redteam55)."""
    if action != "post_add":
        return
    from .services.approvals import approvals_void_for_tools

    policies = [instance.pk] if isinstance(instance, ToolPolicy) else pk_set
    approvals_void_for_tools(tool_pks=ToolPolicy.objects.filter(pk__in=policies).values_list("tool_id", flat=True))


def _void_approvals_of_agent_narrowed(sender, *, instance: Agent | AgentGrant, raw: bool = False, **kwargs) -> None:
    """An agent changed, or one of its grants changed or deleted: its person's approvals that it (or an agent below
    it) may no longer use are void now (Z6, redteam55). A new agent or grant takes nothing away."""
    if raw or kwargs.get("created"):
        return
    from .services.approvals import approvals_void_for_people

    agent = instance if isinstance(instance, Agent) else Agent.objects.filter(pk=instance.agent_id).first()
    if agent is not None:
        approvals_void_for_people(
            user_pks=[agent.user_id, *ApiToken.objects.filter(agent=agent).values_list("user_id", flat=True)]
        )


def _void_approvals_of_person_deactivated(sender, *, instance, raw: bool = False, **kwargs) -> None:
    """A person made inactive: their open approvals are void now, not at the sweep (reactivated, one ran again)."""
    if raw or instance.is_active:
        return
    from .services.approvals import approvals_void_for_people

    approvals_void_for_people(user_pks=[instance.pk])


def _lock_agent_of_deleted_grant(sender, *, instance: AgentGrant, **kwargs) -> None:
    """An agent's grant deleted narrows what its tokens may decide: lock the agent, as a decision under way does, and
    its person first, in the decision's order (no deadlock with one, nor with deleting the person)."""
    from .services.permissions import rows_lock

    rows_lock(get_user_model().objects.filter(agents=instance.agent_id))
    rows_lock(Agent.objects.filter(pk=instance.agent_id))


def _lock_server_moving(sender, *, instance: ServerTenant, raw: bool = False, **kwargs) -> None:
    """A server given a tenant, moved to another or shared again: lock its row, as a decision on one of its tools under
    way does, so the move waits for it (the decider may not act in the new tenant, Z12) or the decision sees it. A save
    outside a transaction (a shell's; the admin's is in one) waits for the decisions in flight, then writes at once."""
    if raw:
        return
    from .services.permissions import rows_lock

    with transaction.atomic():
        rows_lock(Server.objects.filter(pk=instance.server_id))


def _members_of(group_or_tenant):
    people = get_user_model().objects.all()
    return (
        people.filter(groups=group_or_tenant)
        if isinstance(group_or_tenant, Group)
        else people.filter(tenants=group_or_tenant)
    )


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
    # Every admin and REST path changes these rows through the related managers (the admin's forms call set(), the
    # services add()/remove()), which send m2m_changed; deleting a person, group, tenant or entitlement takes its rows
    # by cascade and is caught by that model's post_delete. Only a shell's queryset delete on a through model
    # (``User.groups.through.objects.filter(...).delete()``) sends nothing: follow it with visibility_invalidate().
    # Not caught with a post_delete on the through models: each managed remove() would then load its rows and
    # rewrite the version once per row.
    for through in (
        user_model.groups.through,
        Entitlement.users.through,
        Entitlement.groups.through,
        ToolPolicy.required_entitlements.through,
        Tenant.members.through,
    ):
        m2m_changed.connect(_invalidate_m2m, sender=through, dispatch_uid=f"governance-vis-m2m-{through.__name__}")
    # Memberships that may carry an approve right: leaving one waits for a decision under way (approval_decide).
    for through in (user_model.groups.through, Tenant.members.through):
        m2m_changed.connect(_lock_people_leaving, sender=through, dispatch_uid=f"governance-lock-{through.__name__}")
        m2m_changed.connect(
            _void_approvals_of_people_leaving, sender=through, dispatch_uid=f"governance-void-{through.__name__}"
        )
    for model in (Group, Tenant):
        pre_delete.connect(_lock_members_of_deleted, sender=model, dispatch_uid=f"governance-lock-{model.__name__}")
        post_delete.connect(
            _void_approvals_of_members_of_deleted, sender=model, dispatch_uid=f"governance-void-{model.__name__}"
        )
    # Entitlements lost or newly required, an agent narrowed: approvals that no longer hold are void at once.
    for through in (Entitlement.users.through, Entitlement.groups.through):
        m2m_changed.connect(
            _void_approvals_of_entitlement_lost, sender=through, dispatch_uid=f"governance-void-{through.__name__}"
        )
    m2m_changed.connect(
        _void_approvals_of_entitlement_required,
        sender=ToolPolicy.required_entitlements.through,
        dispatch_uid="governance-void-required-entitlements",
    )
    post_save.connect(_void_approvals_of_person_deactivated, sender=user_model, dispatch_uid="governance-void-user")
    post_save.connect(_void_approvals_of_server_retired, sender=Server, dispatch_uid="governance-void-Server")
    for model in (Agent, AgentGrant):
        post_save.connect(
            _void_approvals_of_agent_narrowed, sender=model, dispatch_uid=f"governance-void-save-{model.__name__}"
        )
    post_delete.connect(
        _void_approvals_of_agent_narrowed, sender=AgentGrant, dispatch_uid="governance-void-delete-AgentGrant"
    )
    pre_delete.connect(_lock_agent_of_deleted_grant, sender=AgentGrant, dispatch_uid="governance-lock-AgentGrant")
    pre_save.connect(_lock_server_moving, sender=ServerTenant, dispatch_uid="governance-lock-ServerTenant-save")
    pre_delete.connect(_lock_server_moving, sender=ServerTenant, dispatch_uid="governance-lock-ServerTenant-delete")
    tools_changed.connect(_invalidate_signalled, dispatch_uid="governance-vis-tools-changed")
    catalog_rows_changed.connect(_invalidate_signalled, dispatch_uid="governance-vis-catalog-rows-changed")
