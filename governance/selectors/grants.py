"""Grants: which ``<action>_server`` / ``<action>_tool`` grants reach a person (directly or through a group),
what an agent's own grants allow, and the entitlements a person lacks."""

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Exists, OuterRef, Q, QuerySet

from ..models import (
    AgentGrant,
    Entitlement,
    ServerGroupObjectPermission,
    ServerUserObjectPermission,
    ToolGroupObjectPermission,
    ToolUserObjectPermission,
)


def _group_ids(user: AbstractBaseUser) -> QuerySet:
    return user.groups.values("pk")


def _grants(user: AbstractBaseUser, action: str, *, own: bool = False) -> tuple[QuerySet, QuerySet, QuerySet, QuerySet]:
    """The grants of ``<action>`` reaching ``user`` (server/user, server/group, tool/user, tool/group).

    Separation of duties: an ``approve`` grant never counts for the person who made it (a superuser may make
    one for themselves, an operator may be added to a group after granting it: neither lets them decide)."""
    groups = _group_ids(user)
    querysets = (
        ServerUserObjectPermission.objects.filter(user=user, permission__codename=f"{action}_server"),
        ServerGroupObjectPermission.objects.filter(group__in=groups, permission__codename=f"{action}_server"),
        ToolUserObjectPermission.objects.filter(user=user, permission__codename=f"{action}_tool"),
        ToolGroupObjectPermission.objects.filter(group__in=groups, permission__codename=f"{action}_tool"),
    )
    if action == "approve" and not own:
        querysets = tuple(qs.exclude(granted_by=user) for qs in querysets)
    return querysets


def _grant_q(user: AbstractBaseUser, action: str, *, own: bool = False, prefix: str = "") -> Q:
    """Tools for which ``user`` (directly or through a group) holds ``<action>_server`` or ``<action>_tool``
    (``own``: counting approve grants the user made, only to explain a refusal). ``prefix`` leads from the queried
    model to the tool (e.g. "tool__" for approval requests: filtering a request's own tool, not ``tool__in`` a
    subquery over every tool, which Postgres planned as a loop over the catalog per server)."""
    servers, server_groups, tools, tool_groups = _grants(user, action, own=own)
    return (
        Q(**{f"{prefix}server_id__in": servers.values("content_object_id")})
        | Q(**{f"{prefix}server_id__in": server_groups.values("content_object_id")})
        | Q(**{f"{prefix}pk__in": tools.values("content_object_id")})
        | Q(**{f"{prefix}pk__in": tool_groups.values("content_object_id")})
    )


def _held_by_q(action: str, *, person: str, prefix: str = "") -> Q:
    """For rows that lead to a person (``person``, e.g. "requester") and a tool (``prefix``, e.g. "tool__"): that
    person holds ``<action>_server`` on the tool's server or ``<action>_tool`` on the tool, themselves or through a
    group (``_grants``' four tables, not for approve), for many people at once: one EXISTS per grant table."""

    def held(model, kind: str, target: str, holder: str) -> Exists:
        return Exists(
            model.objects.filter(
                content_object=OuterRef(f"{prefix}{target}"),
                permission__codename=f"{action}_{kind}",
                **{holder: OuterRef(person)},
            )
        )

    return (
        Q(held(ServerUserObjectPermission, "server", "server_id", "user"))
        | Q(held(ServerGroupObjectPermission, "server", "server_id", "group__user"))
        | Q(held(ToolUserObjectPermission, "tool", "pk", "user"))
        | Q(held(ToolGroupObjectPermission, "tool", "pk", "group__user"))
    )


def _agent_grant_q(agent_id: int, action: str, *, prefix: str = "") -> Q:
    """Tools an agent's own grants allow for ``action`` (a server grant covers its tools); ``prefix`` as
    ``_grant_q``'s."""
    grants = AgentGrant.objects.filter(agent_id=agent_id, action=action)
    return Q(**{f"{prefix}server_id__in": grants.filter(server__isnull=False).values("server_id")}) | Q(
        **{f"{prefix}pk__in": grants.filter(tool__isnull=False).values("tool_id")}
    )


def _missing_entitlements(user: AbstractBaseUser) -> QuerySet:
    held = Entitlement.objects.filter(Q(users=user) | Q(groups__in=_group_ids(user))).values("pk")
    return Entitlement.objects.exclude(pk__in=held).values("pk")


def tool_discover_granted() -> Q:
    """For a Tool queryset (``filter`` or ``annotate``): someone may be shown the tool, grants-wise: an active
    person or a group with an active member holds ``discover_tool`` on it or ``discover_server`` on its server. A
    tool without is found by no agent whatever its words (the fix is a grant). One subquery per grant table."""

    def held(model, target: str, codename: str, holder: str) -> Exists:
        return Exists(
            model.objects.filter(content_object=OuterRef(target), permission__codename=codename, **{holder: True})
        )

    return (
        Q(held(ServerUserObjectPermission, "server_id", "discover_server", "user__is_active"))
        | Q(held(ServerGroupObjectPermission, "server_id", "discover_server", "group__user__is_active"))
        | Q(held(ToolUserObjectPermission, "pk", "discover_tool", "user__is_active"))
        | Q(held(ToolGroupObjectPermission, "pk", "discover_tool", "group__user__is_active"))
    )
