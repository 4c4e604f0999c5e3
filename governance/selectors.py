"""Reads: the one visibility selector every surface (admin, search, API, gateway) uses.

Permission model, in short:
- A tool is visible ("discover") to a principal when the user, or one of the user's groups, holds
  ``discover_server`` on its server or ``discover_tool`` on the tool itself (guardian direct-FK grants),
  AND the tool is enabled, not removed, has a policy that is not held for review and accepted its current
  definition (fail closed: no policy or an unreviewed change means invisible), its server is ACTIVE, the
  user holds every entitlement the tool requires, and the token's scopes allow it ("discover";
  "server:<slug>" limits).
- "execute" = visible AND an ``execute_server``/``execute_tool`` grant AND the "execute" scope.
- "approve" (admin inbox) = an ``approve_server``/``approve_tool`` grant; a session, not a token.
- Tenants (Z12), one rule for every row that belongs to a tenant (servers, approvals, audit events): a row
  without a tenant is shared; a row with one is seen only by principals acting in that tenant
  (``tenant_q``). A tool is visible only if its server is. An install without tenants is one shared space.
- Agents (Z8): each agent in the token's chain that is narrowed keeps only the tools its ``AgentGrant`` rows
  name, for that action; the human's grants are still required (human ∩ agents ∩ token scopes).
- Model-level permissions never grant objects (unlike guardian's ``accept_global_perms`` default), and
  superusers get no implicit grants here: an admin sees everything in the admin, but an agent acting for a
  superuser sees only what was granted. Inactive users see nothing.
"""

import hashlib
from typing import Literal

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db.models import Case, CharField, Exists, F, IntegerField, OuterRef, Q, QuerySet, Value, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, Concat, StrIndex, Substr

from catalog.cachesafe import cache_call
from catalog.choices import ServerStatus
from catalog.models import Server, Tool

from .cache import visibility_version
from .choices import ApprovalStatus, NotificationChannel
from .constants import (
    OTHER_TENANT,
    OTHER_TENANT_AGENT,
    OTHER_TENANT_GROUP,
    OTHER_TENANT_PERSON,
    SCOPE_DISCOVER,
    SCOPE_EXECUTE,
    VISIBILITY_CACHE_TTL_SECONDS,
)
from .models import (
    AgentGrant,
    ApprovalRequest,
    Entitlement,
    NotificationAttempt,
    ServerGroupObjectPermission,
    ServerTenant,
    ServerUserObjectPermission,
    Tenant,
    ToolGroupObjectPermission,
    ToolUserObjectPermission,
)
from .principals import Principal, principal_for_user
from .roles import ROLE_PERMISSIONS

Permission = Literal["discover", "execute"]
# Tools of servers in these states can be seen and called.
VISIBLE_SERVER_STATUSES = (ServerStatus.ACTIVE,)
MAX_TOOL_ID_LENGTH = 460


class ToolNotFound(Exception):
    """The tool does not exist or the principal may not use it. One error for both, on purpose (T3, T4):
    the message never names the tool, so a caller learns nothing about hidden tools."""

    def __init__(self) -> None:
        super().__init__("Unknown tool")


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


def _grant_q(user: AbstractBaseUser, action: str, *, own: bool = False) -> Q:
    """Tools for which ``user`` (directly or through a group) holds ``<action>_server`` or ``<action>_tool``
    (``own``: counting approve grants the user made, only to explain a refusal)."""
    servers, server_groups, tools, tool_groups = _grants(user, action, own=own)
    return (
        Q(server_id__in=servers.values("content_object_id"))
        | Q(server_id__in=server_groups.values("content_object_id"))
        | Q(pk__in=tools.values("content_object_id"))
        | Q(pk__in=tool_groups.values("content_object_id"))
    )


def tenant_q(principal: Principal, field: str) -> Q:
    """THE tenant rule: rows whose ``field`` (a Tenant foreign key) is empty (shared) or one of the tenants
    ``principal`` acts in. Used for servers (``server__tenancy__tenant``), approvals and audit events."""
    shared = Q(**{f"{field}__isnull": True})
    if not principal.tenant_ids:
        return shared
    return shared | Q(**{f"{field}__in": sorted(principal.tenant_ids)})


def server_tenant_q(principal: Principal, prefix: str = "") -> Q:
    """``tenant_q`` on a server (``prefix`` leads from the queried model to the server, e.g. "tool__server__")."""
    return tenant_q(principal, f"{prefix}tenancy__tenant")


def server_tenant_id(server: Server) -> int | None:
    """The id of the tenant owning ``server``, or None when it is shared (no query if selected with
    ``select_related("tenancy")``)."""
    if Server.tenancy.is_cached(server):
        try:
            return server.tenancy.tenant_id
        except ServerTenant.DoesNotExist:
            return None
    return ServerTenant.objects.filter(server_id=server.pk).values_list("tenant_id", flat=True).first()


def _agent_grant_q(agent_id: int, action: str) -> Q:
    """Tools an agent's own grants allow for ``action`` (a server grant covers its tools)."""
    grants = AgentGrant.objects.filter(agent_id=agent_id, action=action)
    return Q(server_id__in=grants.filter(server__isnull=False).values("server_id")) | Q(
        pk__in=grants.filter(tool__isnull=False).values("tool_id")
    )


def _missing_entitlements(user: AbstractBaseUser) -> QuerySet:
    held = Entitlement.objects.filter(Q(users=user) | Q(groups__in=_group_ids(user))).values("pk")
    return Entitlement.objects.exclude(pk__in=held).values("pk")


def tools_servable() -> QuerySet[Tool]:
    """Tools some client could be given, grants aside: enabled, not removed, on an active server, and (fail
    closed) with a policy row that is not held and accepted the tool's current definition. A tool without a
    policy, or whose definition changed without a review deciding on it, is served to nobody."""
    return Tool.objects.filter(
        removed_at__isnull=True,
        enabled=True,
        server__status__in=VISIBLE_SERVER_STATUSES,
        policy__held=False,
        policy__accepted_hash=F("definition_hash"),
    )


def tools_visible_to(*, principal: Principal, permission: Permission = "discover") -> QuerySet[Tool]:
    """Every tool ``principal`` may discover (or execute), straight from the database (authoritative).

    Callers that only need ids should use ``tool_pks_visible_to`` (cached)."""
    user = principal.user
    if user is None or not getattr(user, "is_active", False) or user.pk is None:
        return Tool.objects.none()
    if not principal.has_scope(SCOPE_DISCOVER):
        return Tool.objects.none()
    if permission == "execute" and not principal.has_scope(SCOPE_EXECUTE):
        return Tool.objects.none()
    if permission not in ("discover", "execute"):
        raise ValueError(f"unknown permission {permission!r}")

    qs = (
        tools_servable()
        .filter(server_tenant_q(principal, "server__"))
        .exclude(policy__required_entitlements__in=_missing_entitlements(user))
        .filter(_grant_q(user, "discover"))
    )
    if permission == "execute":
        qs = qs.filter(_grant_q(user, "execute"))
    for agent_id in principal.narrowing_agent_ids:  # narrowing only: each is ANDed with the human's grants
        qs = qs.filter(_agent_grant_q(agent_id, "discover"))
        if permission == "execute":
            qs = qs.filter(_agent_grant_q(agent_id, "execute"))
    if principal.server_slugs is not None:
        qs = qs.filter(server__slug__in=sorted(principal.server_slugs))
    return qs


def tools_narrow(
    qs: QuerySet[Tool],
    *,
    operation_class: str | None = None,
    environment: str | None = None,
    server_slugs: list[str] | frozenset[str] | None = None,
) -> QuerySet[Tool]:
    """Narrow a (visible) tool queryset by search filters.

    ``environment`` matches a tool whose policy lists it in ``allowed_environments``, or, when that list is
    empty, whose server runs in it. ``operation_class`` is one of governance.choices.OperationClass."""
    if operation_class:
        qs = qs.filter(policy__operation_class=operation_class)
    if environment:
        # JSON containment is not portable (SQLite lacks it), so match the short lists in Python.
        rows = qs.values_list("pk", "policy__allowed_environments", "server__environment")
        qs = qs.filter(pk__in=[pk for pk, allowed, own in rows if environment in (allowed or [own])])
    if server_slugs is not None:
        qs = qs.filter(server__slug__in=sorted(server_slugs))
    return qs


def _cache_key(principal: Principal, permission: str, version: str, extra: str) -> str:
    # Keys carry the user id and token: one principal's entry is never read for another (Z10).
    fingerprint = hashlib.sha256(f"{principal.cache_fingerprint()}|{extra}".encode()).hexdigest()[:32]
    return f"governance:vis:{version}:{permission}:{fingerprint}"


def tool_pks_visible_to(
    *,
    principal: Principal,
    permission: Permission = "discover",
    operation_class: str | None = None,
    environment: str | None = None,
    server_slugs: list[str] | frozenset[str] | None = None,
) -> frozenset[int]:
    """Primary keys of the tools ``principal`` may discover (or execute), optionally narrowed by search filters.

    Cached per principal and filter set; every grant, revocation, group change, entitlement change, tool or
    server status change and review hold writes a new version in the database (governance.cache), so the next
    call in any process recomputes."""
    extra = f"{operation_class}|{environment}|{','.join(sorted(server_slugs)) if server_slugs is not None else '*'}"
    version = visibility_version()
    key = _cache_key(principal, permission, version, extra) if version is not None else None
    if key is not None:
        cached = cache_call("get", key)  # a cache outage means computing, never allowing more
        if cached is not None:
            return cached
    qs = tools_narrow(
        tools_visible_to(principal=principal, permission=permission),
        operation_class=operation_class,
        environment=environment,
        server_slugs=server_slugs,
    )
    pks = frozenset(qs.values_list("pk", flat=True))
    if key is not None:
        cache_call("set", key, pks, timeout=VISIBILITY_CACHE_TTL_SECONDS)
    return pks


def tool_get_for_principal(*, principal: Principal, tool_id: str, permission: Permission = "discover") -> Tool:
    """The tool ``tool_id`` ("server::name", exact bytes) if ``principal`` may discover/execute it.

    Raises ToolNotFound whether the tool is missing, hidden or forbidden."""
    # Tool ids never hold control characters (catalog rejects them); NUL would also break Postgres.
    if not isinstance(tool_id, str) or not tool_id or len(tool_id) > MAX_TOOL_ID_LENGTH or "\x00" in tool_id:
        raise ToolNotFound()
    # One query, the same for a hidden and an unknown id (no row either way), answered by the database rather
    # than a cached set: a lookup that found the tool first and then checked it would take longer for a
    # hidden tool than for a missing one (a timing side channel, SECURITY-TESTS Z5).
    tool = (
        tools_visible_to(principal=principal, permission=permission)
        .select_related("server", "server__tenancy", "policy__risk_class")
        .filter(tool_id=tool_id)
        .first()
    )
    # Compare exact bytes: some database collations match case-insensitively.
    if tool is None or tool.tool_id != tool_id:
        raise ToolNotFound()
    return tool


def approval_requester_may_execute(*, request: ApprovalRequest) -> bool:
    """Whether the requester of ``request`` may still execute its tool, by their grants now (an approval is
    worth nothing once they lost access, however the grant went: admin, shell, group change, policy hold).
    Judged as the token that asked (its tenant and agents), or as the person when it came from a session."""
    from .services.tokens import principal_for_token

    if request.token_id is not None:
        principal = principal_for_token(request.token)
        if principal is None:
            return False
    else:
        principal = principal_for_user(request.requester)
    return tools_visible_to(principal=principal, permission="execute").filter(pk=request.tool_id).exists()


def user_can_approve(*, user: AbstractBaseUser, tool: Tool) -> bool:
    """Whether ``user`` holds approve_tool on ``tool`` or approve_server on its server (directly or by group),
    by a grant someone else made.

    Superusers need an explicit grant too: approving is a decision someone else must name them for. A
    tenant's tool only for someone acting in that tenant (Z12)."""
    if user is None or not getattr(user, "is_active", False) or user.pk is None:
        return False
    return tools_approvable_by(user=user).filter(pk=tool.pk).exists()


def user_approves_only_by_own_grant(*, user: AbstractBaseUser, tool: Tool) -> bool:
    """Whether ``user`` may not approve ``tool`` only because they made the approve grant themselves."""
    if user_can_approve(user=user, tool=tool) or user is None or user.pk is None:
        return False
    return (
        Tool.objects.filter(pk=tool.pk)
        .filter(_grant_q(user, "approve", own=True))
        .filter(server_tenant_q(principal_for_user(user), "server__"))
        .exists()
    )


def tools_approvable_by(*, user: AbstractBaseUser) -> QuerySet[Tool]:
    """Tools whose calls ``user`` may approve."""
    if user is None or not getattr(user, "is_active", False) or user.pk is None:
        return Tool.objects.none()
    return Tool.objects.filter(_grant_q(user, "approve")).filter(server_tenant_q(principal_for_user(user), "server__"))


def user_is_approver(*, user: AbstractBaseUser) -> bool:
    """Whether ``user`` holds any approve grant (on a server or a tool, directly or through a group)."""
    if user is None or not getattr(user, "is_active", False) or user.pk is None:
        return False
    return any(grants.exists() for grants in _grants(user, "approve"))


def approval_requests_for_approver(
    *, user: AbstractBaseUser, principal: Principal | None = None
) -> QuerySet[ApprovalRequest]:
    """The approver inbox: requests for tools ``user`` may approve, of the tenants the approver acts in (the
    request's and its server's, ``tenant_q``), pending first, newest first. ``principal``: the approver's token
    (the API), else the person's session."""
    principal = principal if principal is not None else principal_for_user(user)
    requests = (
        ApprovalRequest.objects.filter(tool__in=tools_approvable_by(user=user).values("pk"))
        .filter(tenant_q(principal, "tenant"), server_tenant_q(principal, "tool__server__"))
        .select_related("requester", "tool", "tool__server", "decided_by", "policy_version")
        .annotate(
            pending_first=Case(
                When(status=ApprovalStatus.PENDING, then=Value(0)), default=Value(1), output_field=IntegerField()
            )
        )
        .order_by("pending_first", "-created_at", "-id")
    )
    return with_approval_people_shown(requests, viewer=user)


def with_approval_people_shown(requests: QuerySet[ApprovalRequest], *, viewer: AbstractBaseUser) -> QuerySet:
    """``requests`` annotated with who asked and who decided as ``viewer`` may read them (``requester_shown``,
    ``decided_by_shown``, ``requester_visible``): a tenant-less request of tenant B's person is in every
    tenant's inbox, but its requester is someone in another tenant there (Z12)."""
    username = f"__{get_user_model().USERNAME_FIELD}"
    return requests.annotate(
        requester_visible=person_visible_to(viewer=viewer, field="requester"),
        requester_shown=person_shown(viewer=viewer, field="requester", name=f"requester{username}"),
        decided_by_shown=person_shown(viewer=viewer, field="decided_by", name=f"decided_by{username}"),
    ).annotate(agent_shown=agent_shown(name="agent", person_visible="requester_visible"))


def delegation_chain_shown(chain: list[str], *, person_visible: bool) -> list[str]:
    """A delegation chain (``user:alice > agent:planner > ...``) with its person as someone in another tenant and
    its agents (that person's) as an agent in another tenant where the reader may not see the person
    (``person_visible``, from ``person_visible_to``)."""
    if person_visible:
        return list(chain)
    hidden = {"user:": f"user:{OTHER_TENANT_PERSON}", "agent:": f"agent:{OTHER_TENANT_AGENT}"}
    return [next((shown for kind, shown in hidden.items() if link.startswith(kind)), link) for link in chain]


def notification_attempts_visible_to(*, user: AbstractBaseUser) -> QuerySet[NotificationAttempt]:
    """The notification log an admin reads (Z12): attempts for requests of shared tenants and the user's, on
    servers they may manage (``tenant_q``, as the inbox and the audit trail). Superusers read every attempt,
    also those whose request is gone (its tenant unknown)."""
    attempts = NotificationAttempt.objects.all()
    if getattr(user, "is_superuser", False):
        return attempts
    principal = principal_for_user(user)
    # An e-mail to another tenant's approvers (a shared request reaches every tenant's, one mail per tenant set)
    # names them by address: left out, as those people are.
    hidden = get_user_model().objects.exclude(users_visible_to_operator(user=user)).exclude(email="")
    listed = Concat(Value(", "), OuterRef("target"), Value(", "), output_field=CharField())
    address = Concat(Value(", "), F("email"), Value(", "), output_field=CharField())
    to_hidden = hidden.annotate(at=StrIndex(listed, address)).filter(at__gt=0)
    return (
        attempts.filter(approval__isnull=False)
        .filter(tenant_q(principal, "approval__tenant"), server_tenant_q(principal, "approval__tool__server__"))
        .exclude(Q(channel=NotificationChannel.EMAIL) & Q(Exists(to_hidden)))
    )


def audit_events_visible_to(*, principal: Principal) -> QuerySet:
    """Audit events a viewer may read: shared ones and those of the tenants ``principal`` acts in. Superusers
    (the platform's operators) read the whole trail in a session. Each is annotated with how its person reads
    (``subject_shown``, ``subject_visible``) and whether the people its payload names are visible (read them with
    ``audit_payload_shown`` and ``delegation_chain_shown``)."""
    from .models import AuditEvent

    qs = AuditEvent.objects.all()
    if not (principal.token_id is None and getattr(principal.user, "is_superuser", False)):
        qs = qs.filter(tenant_q(principal, "tenant_scope"))
    # A shared event (a tenant-less token's) may be tenant B's person's, or name them in its payload: named
    # only where the viewer may see them (Z12). Events of no one ("system") name no person.
    viewer = principal.user
    named = {f"payload_{key}": _payload_name(key, prefix) for key, prefix in AUDIT_PAYLOAD_PEOPLE.items()}
    groups = {f"payload_{key}_group": _payload_name(key, prefix) for key, prefix in AUDIT_PAYLOAD_GROUPS.items()}
    return qs.annotate(
        subject_visible=person_visible_to(viewer=viewer, field="user", empty=True),
        subject_shown=person_shown(viewer=viewer, field="user", name="human_subject"),
        payload_tenant=Coalesce(KeyTextTransform("tenant", "payload"), Value(""), output_field=CharField()),
        **named,
        **groups,
    ).annotate(
        agent_shown=agent_shown(name="agent", person_visible="subject_visible"),
        payload_tenant_visible=_tenant_named_visible(viewer=viewer, name="payload_tenant"),
        **{f"{name}_visible": _person_named_visible(viewer=viewer, name=name) for name in named},
        **{f"{name}_visible": _group_named_visible(viewer=viewer, name=name) for name in groups},
    )


# Payload keys of audit events that name a person, with the prefix before the username: whom a token was
# issued for, who holds a grant ("user:alice"), who asked for a decided approval. And those that name a group
# (a grant's holder, "group:ops"). A token's creation also names its agent and tenant (``audit_payload_shown``).
AUDIT_PAYLOAD_PEOPLE = {"for_user": "", "holder": "user:", "requester": ""}
AUDIT_PAYLOAD_GROUPS = {"holder": "group:"}


def _payload_name(key: str, prefix: str):
    text = KeyTextTransform(key, "payload")
    return Substr(text, len(prefix) + 1) if prefix else text


def _person_named_visible(*, viewer: AbstractBaseUser, name: str):
    if getattr(viewer, "is_superuser", False):
        return Value(True)
    people = get_user_model().objects.filter(users_visible_to_operator(user=viewer))
    return Exists(people.filter(**{get_user_model().USERNAME_FIELD: OuterRef(name)}))


def _group_named_visible(*, viewer: AbstractBaseUser, name: str):
    if getattr(viewer, "is_superuser", False):
        return Value(True)
    return Exists(Group.objects.filter(groups_visible_to_operator(user=viewer), name=OuterRef(name)))


def _tenant_named_visible(*, viewer: AbstractBaseUser, name: str):
    """Whether the tenant slug in ``name`` (text) is empty or one of the tenants ``viewer`` acts in."""
    if getattr(viewer, "is_superuser", False):
        return Value(True)
    own = viewer.tenants.values("slug")
    return Case(When(Q(**{name: ""}) | Q(**{f"{name}__in": own}), then=Value(True)), default=Value(False))


def audit_payload_shown(event, *, viewer: AbstractBaseUser) -> dict:
    """An event's payload (of ``audit_events_visible_to``, read by ``viewer``) with the people its reader may not
    see (the token's person, a grant's holder, who asked) as someone in another tenant, a group they may not see as
    a group in another tenant, and a token's agent and tenant as an agent in another tenant and another tenant
    unless both its person and its tenant are the reader's to see. An entitlement change's lists of people and
    groups keep only those the reader may see (a query each, for these rare admin events only)."""
    payload = event.payload
    if not isinstance(payload, dict):
        return payload
    shown = dict(payload)
    for key, prefix in AUDIT_PAYLOAD_PEOPLE.items():
        value = shown.get(key)
        if isinstance(value, str) and value.startswith(prefix) and not getattr(event, f"payload_{key}_visible", False):
            shown[key] = prefix + OTHER_TENANT_PERSON
    for key, prefix in AUDIT_PAYLOAD_GROUPS.items():
        value = shown.get(key)
        visible = getattr(event, f"payload_{key}_group_visible", False)
        if isinstance(value, str) and value.startswith(prefix) and not visible:
            shown[key] = prefix + OTHER_TENANT_GROUP
    tenant_visible = getattr(event, "payload_tenant_visible", False)
    if shown.get("tenant") and not tenant_visible:
        shown["tenant"] = OTHER_TENANT
    if shown.get("agent") and not (tenant_visible and getattr(event, "payload_for_user_visible", False)):
        shown["agent"] = OTHER_TENANT_AGENT
    for key, model, visible in (
        ("users", get_user_model(), users_visible_to_operator),
        ("groups", Group, groups_visible_to_operator),
    ):
        names = shown.get(key)
        if isinstance(names, list) and names and not getattr(viewer, "is_superuser", False):
            field = model.USERNAME_FIELD if model is not Group else "name"
            seen = model.objects.filter(visible(user=viewer), **{f"{field}__in": names}).values_list(field, flat=True)
            seen = set(seen)
            shown[key] = [name for name in names if name in seen]
    return shown


def users_visible_to_operator(*, user: AbstractBaseUser) -> Q:
    """People an admin may see and pick (the user list, the people of grant, token, agent and tenant forms):
    all for a superuser, else ``tenant_q`` on their tenants: people in no tenant (shared) and members of one of
    the admin's tenants. An operator of tenant A never sees tenant B's usernames. A filter on the user model."""
    if getattr(user, "is_superuser", False):
        return Q()
    people = get_user_model().objects.filter(tenant_q(principal_for_user(user), "tenants"))
    return Q(pk__in=people.values("pk"))  # a subquery: a member of several tenants is one row


def person_visible_to(*, viewer: AbstractBaseUser, field: str, empty: bool = False):
    """A boolean expression over rows naming a person in ``field`` (a user foreign key or id): whether ``viewer``
    may see that person (``users_visible_to_operator``), one subquery for a whole list, never a query per row.
    ``empty``: the answer for rows without a person."""
    if getattr(viewer, "is_superuser", False):
        return Value(True)
    people = get_user_model().objects.filter(users_visible_to_operator(user=viewer))
    visible = Exists(people.filter(pk=OuterRef(field)))
    return Q(**{f"{field}__isnull": True}) | Q(visible) if empty else visible


def person_shown(*, viewer: AbstractBaseUser, field: str, name: str):
    """An expression: the person in ``field`` by ``name`` (a lookup: ``requester__username``, ``human_subject``)
    where ``viewer`` may see them, "someone in another tenant" otherwise; a row without a person keeps ``name``."""
    if getattr(viewer, "is_superuser", False):
        return F(name)
    return Case(
        When(person_visible_to(viewer=viewer, field=field, empty=True), then=F(name)),
        default=Value(OTHER_TENANT_PERSON),
        output_field=CharField(),
    )


def agents_visible_to_operator(*, user: AbstractBaseUser) -> Q:
    """Agents an admin may see and pick (the agent list, its page and lookups, a token's agent): all for a
    superuser, else agents in no tenant or one of the admin's tenants (``tenant_q``) whose person the admin may
    see: a tenant-less agent of tenant B's person is tenant B's business (Z12). A filter on Agent."""
    if getattr(user, "is_superuser", False):
        return Q()
    people = get_user_model().objects.filter(users_visible_to_operator(user=user))
    return tenant_q(principal_for_user(user), "tenant") & Q(user__in=people.values("pk"))


def agent_shown(*, name: str, person_visible: str):
    """An expression over rows (approval requests, audit events) naming an agent in the text field ``name``: the
    name where the row's person is visible (``person_visible``: the name of a boolean annotation made with
    ``person_visible_to``), "an agent in another tenant" otherwise; an empty name stays empty. A row's agent is
    its person's, in the row's tenant (a token's agent acts for the token's user, in the token's tenant), so a
    reader who reads the row may see the agent exactly when they may see the person."""
    return Case(
        When(Q(**{name: ""}), then=Value("")),
        When(Q(**{person_visible: True}), then=F(name)),
        default=Value(OTHER_TENANT_AGENT),
        output_field=CharField(),
    )


def groups_visible_to_operator(*, user: AbstractBaseUser) -> Q:
    """Groups an admin may see and pick (the group list, page and autocomplete; a grant's group; the groups of an
    entitlement or a person; a grant's holder in the audit trail): all for a superuser, else the preset role
    groups (governance.roles: the same Approvers, Curators and Operators serve every tenant, each tenant's
    operators grant them per server), groups with a member the admin may see, and groups that are nobody's yet
    (no member and no grant on another tenant's server or tool). A group whose members are all another tenant's
    people, or that holds grants only there, is that tenant's (Z12). A filter on Group."""
    if getattr(user, "is_superuser", False):
        return Q()
    people = get_user_model().objects.filter(users_visible_to_operator(user=user))
    managed = Server.objects.filter(servers_visible_to_operator(user=user)).values("pk")
    with_members = Group.objects.filter(user__isnull=False).values("pk")
    foreign_grants = (
        ServerGroupObjectPermission.objects.exclude(content_object__in=managed).values("group_id"),
        ToolGroupObjectPermission.objects.exclude(content_object__server__in=managed).values("group_id"),
    )
    nobodys = ~Q(pk__in=with_members) & ~Q(pk__in=foreign_grants[0]) & ~Q(pk__in=foreign_grants[1])
    return Q(name__in=list(ROLE_PERMISSIONS)) | Q(pk__in=Group.objects.filter(user__in=people).values("pk")) | nobodys


def servers_visible_to_operator(*, user: AbstractBaseUser) -> Q:
    """Servers an admin may manage and grant: all for a superuser, else shared ones and those of the user's
    tenants (an operator of tenant A never sees or grants tenant B's servers). A filter on Server."""
    if getattr(user, "is_superuser", False):
        return Q()
    return server_tenant_q(principal_for_user(user))


def install_wide_visible_to(*, user: AbstractBaseUser) -> bool:
    """Whether ``user`` may read figures of the whole install (the search index's generations and events: tool
    counts and ids across every tenant). A superuser may; anyone else only while the install has no tenants,
    so that a tenant's curator learns nothing of another tenant's catalog, not even its size (Z12)."""
    if getattr(user, "is_superuser", False):
        return True
    return not Tenant.objects.exists()
