"""Which of a few tools each of many principals may execute, for a page of them at once: ``tools_visible_to``'s rule
(permission "execute") applied in Python to rows read in a fixed number of queries, however many principals. One
ORM query per principal took ~20 ms to build and compile, 1.7 s for the 87 requesters of the approver inbox's page.

``tools_visible_to`` stays the rule's reference, and deciding for one principal asks it (``tool_executable_by``); the
two share who may act at all (``principal_may_act``) and what may be served (``tools_servable``), and
tests/governance/selectors/test_executable_pairs.py holds them to the same answers over tenants, groups, entitlements,
agents, server scopes and unservable tools."""

from collections import defaultdict
from collections.abc import Hashable, Mapping

from django.contrib.auth import get_user_model

from ..models import (
    AgentGrant,
    Entitlement,
    ServerGroupObjectPermission,
    ServerUserObjectPermission,
    ToolGroupObjectPermission,
    ToolPolicy,
    ToolUserObjectPermission,
)
from ..principals import Principal
from .tools import principal_may_act, tools_servable

ACTIONS = ("discover", "execute")  # executing needs both grants, of the person and of each narrowing agent


def executable_pairs(
    principals: Mapping[Hashable, Principal | None], asked: Mapping[Hashable, set[int]]
) -> set[tuple[Hashable, int]]:
    """(key, tool pk) for each tool among ``asked[key]`` that ``principals[key]`` may execute now
    (``tools_visible_to(principal=..., permission="execute")``); a None principal may execute nothing."""
    acting = {
        key: principal
        for key, principal in principals.items()
        if principal_may_act(principal, "execute") and asked.get(key)
    }
    tool_ids = {tool for key in acting for tool in asked[key]}
    if not tool_ids:
        return set()
    # pk -> (server pk, server slug, the server's tenant pk or None): tools some client could be given at all.
    tools = {
        pk: (server, slug, tenant)
        for pk, server, slug, tenant in tools_servable()
        .filter(pk__in=tool_ids)
        .values_list("pk", "server_id", "server__slug", "server__tenancy__tenant")
    }
    required = _pairs(
        ToolPolicy.required_entitlements.through.objects.filter(toolpolicy__tool_id__in=tools),
        "toolpolicy__tool_id",
        "entitlement_id",
    )
    users = {principal.user.pk for principal in acting.values()}
    groups = _pairs(get_user_model().groups.through.objects.filter(user_id__in=users), "user_id", "group_id")
    held = _held_entitlements(users, groups)
    grants = _person_grants(users, groups, tools)
    agents = {agent for principal in acting.values() for agent in principal.narrowing_agent_ids}
    agent_grants = _agent_grants(agents, tools)
    found = set()
    for key, principal in acting.items():
        user = principal.user.pk
        # Each grant set that must reach the tool (itself or its server): the person's, then each narrowing agent's.
        needed = [grants[(user, action)] for action in ACTIONS]
        needed += [agent_grants[(agent, action)] for agent in principal.narrowing_agent_ids for action in ACTIONS]
        for tool in asked[key] & tools.keys():
            server, slug, tenant = tools[tool]
            targets = {("server", server), ("tool", tool)}
            if (
                (tenant is None or tenant in principal.tenant_ids)
                and required[tool] <= held[user]
                and all(targets & granted for granted in needed)
                and (principal.server_slugs is None or slug in principal.server_slugs)
            ):
                found.add((key, tool))
    return found


def _pairs(rows, key: str, value: str) -> defaultdict:
    pairs = defaultdict(set)
    for left, right in rows.values_list(key, value):
        pairs[left].add(right)
    return pairs


def _held_entitlements(users: set[int], groups: Mapping[int, set[int]]) -> defaultdict:
    """user pk -> the entitlements they hold, themselves or through a group."""
    held = _pairs(Entitlement.users.through.objects.filter(user_id__in=users), "user_id", "entitlement_id")
    every_group = {group for user in users for group in groups[user]}
    by_group = _pairs(Entitlement.groups.through.objects.filter(group_id__in=every_group), "group_id", "entitlement_id")
    for user in users:
        for group in groups[user]:
            held[user] |= by_group[group]
    return held


def _person_grants(users: set[int], groups: Mapping[int, set[int]], tools: Mapping[int, tuple]) -> defaultdict:
    """(user pk, action) -> {("server", pk) | ("tool", pk)} they hold it on among ``tools`` and their servers,
    themselves or through a group (``_grant_q``)."""
    codenames = {f"{action}_{kind}": action for action in ACTIONS for kind in ("server", "tool")}
    servers = {server for server, _, _ in tools.values()}
    every_group = {group for user in users for group in groups[user]}
    by_group: defaultdict = defaultdict(set)
    grants: defaultdict = defaultdict(set)
    for model, kind, holder, targets, out in (
        (ServerUserObjectPermission, "server", "user_id", users, grants),
        (ServerGroupObjectPermission, "server", "group_id", every_group, by_group),
        (ToolUserObjectPermission, "tool", "user_id", users, grants),
        (ToolGroupObjectPermission, "tool", "group_id", every_group, by_group),
    ):
        rows = model.objects.filter(
            **{f"{holder}__in": targets},
            permission__codename__in=[f"{action}_{kind}" for action in ACTIONS],
            content_object_id__in=servers if kind == "server" else tools,
        ).values_list(holder, "permission__codename", "content_object_id")
        for who, codename, target in rows:
            out[(who, codenames[codename])].add((kind, target))
    for user in users:
        for group in groups[user]:
            for action in ACTIONS:
                grants[(user, action)] |= by_group[(group, action)]
    return grants


def _agent_grants(agents: set[int], tools: Mapping[int, tuple]) -> defaultdict:
    """(agent pk, action) -> {("server", pk) | ("tool", pk)} the agent's own grants allow (``_agent_grant_q``)."""
    grants: defaultdict = defaultdict(set)
    if not agents:
        return grants
    rows = AgentGrant.objects.filter(agent_id__in=agents, action__in=ACTIONS).values_list(
        "agent_id", "action", "server_id", "tool_id"
    )
    for agent, action, server, tool in rows:
        if server is not None:
            grants[(agent, action)].add(("server", server))
        if tool is not None:
            grants[(agent, action)].add(("tool", tool))
    return grants
