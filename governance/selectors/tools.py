"""Servers and tools: what a principal may discover or execute (the visibility selector), cached by id, and the
servers an admin may manage."""

import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F, Q, QuerySet

from catalog.cachesafe import cache_call
from catalog.choices import ServerStatus
from catalog.lru import LruMap
from catalog.models import Server, Tool

from ..cache import visibility_version
from ..constants import SCOPE_DISCOVER, SCOPE_EXECUTE, VISIBILITY_CACHE_TTL_SECONDS
from ..principals import Principal, principal_for_user
from .grants import _agent_grant_q, _grant_q, _missing_entitlements
from .tenants import server_tenant_q, shared_shaped_by
from .tokens import principal_as_now

Permission = Literal["discover", "execute"]
# Tools of servers in these states can be seen and called.
VISIBLE_SERVER_STATUSES = (ServerStatus.ACTIVE,)
MAX_TOOL_ID_LENGTH = 460


class ToolNotFound(Exception):
    """The tool does not exist or the principal may not use it. One error for both, on purpose (T3, T4):
    the message never names the tool, so a caller learns nothing about hidden tools."""

    def __init__(self) -> None:
        super().__init__("Unknown tool")


def tools_servable(server_statuses: tuple[str, ...] = VISIBLE_SERVER_STATUSES) -> QuerySet[Tool]:
    """Tools some client could be given, grants aside: enabled, not removed, on an active server, and (fail
    closed) with a policy row that is not held and accepted the tool's current definition. A tool without a
    policy, or whose definition changed without a review deciding on it, is served to nobody.
    ``server_statuses``: on a server in one of these instead (``tool_server_not_serving``)."""
    return Tool.objects.filter(
        removed_at__isnull=True,
        enabled=True,
        server__status__in=server_statuses,
        policy__held=False,
        policy__accepted_hash=F("definition_hash"),
    )


def principal_may_act(principal: Principal | None, permission: Permission) -> bool:
    """Whether ``principal`` may discover (or execute) any tool at all, grants aside: an active, saved user acting
    with the scopes the permission needs. The first part of the visibility rule (``tools_visible_to``,
    ``executable_pairs``)."""
    if principal is None:
        return False
    user = principal.user
    if user is None or not getattr(user, "is_active", False) or user.pk is None:
        return False
    if not principal.has_scope(SCOPE_DISCOVER):
        return False
    return permission != "execute" or principal.has_scope(SCOPE_EXECUTE)


def tools_visible_to(
    *,
    principal: Principal,
    permission: Permission = "discover",
    server_statuses: tuple[str, ...] = VISIBLE_SERVER_STATUSES,
) -> QuerySet[Tool]:
    """Every tool ``principal`` may discover (or execute), straight from the database (authoritative).

    Callers that only need ids should use ``tool_pks_visible_to`` (cached); whether one tool may be executed,
    ``tool_executable_by``. ``server_statuses``: the tools the caller would see on servers in these states."""
    if not principal_may_act(principal, permission):
        return Tool.objects.none()
    if permission not in ("discover", "execute"):
        raise ValueError(f"unknown permission {permission!r}")

    user = principal.user
    qs = (
        tools_servable(server_statuses)
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


def tool_executable_by(*, principal: Principal, tool_pk: int, definition_hash: str | None = None) -> bool:
    """Whether ``principal`` may execute the tool ``tool_pk`` now, read from the database (``tools_visible_to``,
    never a cached set: callers decide with it); with ``definition_hash``, only while the tool still has that
    definition. For a page of principals at once, ``executable_pairs``."""
    executable = tools_visible_to(principal=principal, permission="execute").filter(pk=tool_pk)
    if definition_hash is not None:
        executable = executable.filter(definition_hash=definition_hash)
    return executable.exists()


def tool_still_executable_by(*, principal: Principal, tool_pk: int, definition_hash: str) -> bool:
    """``tool_executable_by`` for a caller verified a while ago (a call that waited before it was sent, Z6): its
    token (a session's: its user) as it stands in the database now (``principal_as_now``: revoked, expired,
    deactivated, out of the tenant: False), and the tool still with the definition it was authorized with."""
    now = principal_as_now(principal)
    return now is not None and tool_executable_by(principal=now, tool_pk=tool_pk, definition_hash=definition_hash)


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
    # Keys carry the user id and token: one principal's entry is never read for another (Z10). The value is
    # (the wall-clock second it was computed, the pks): "vis2" since the value holds the time.
    fingerprint = hashlib.sha256(f"{principal.cache_fingerprint()}|{extra}".encode()).hexdigest()[:32]
    return f"governance:vis2:{version}:{permission}:{fingerprint}"


class VisibleSets(LruMap[str, frozenset[int]]):
    """The visible sets this process used lately, by their cache key, in front of the shared cache: the same
    frozenset again instead of one unpickled from the cache on every search (issue 9: ~1.5 ms at 10k tools,
    and the search snapshot then finds its visible mask for that very object). The key names the visibility
    version, so a change anywhere makes every kept set unreachable, exactly as in the shared cache; and a set is
    dropped VISIBILITY_CACHE_TTL_SECONDS after it was computed, as the shared cache drops it. Bounded by the
    tool ids held (MAX_PKS), oldest use first out. ``computing(key)`` lets one thread of the process compute a
    missing set while the others asking for it wait and take its result: after a grant change every search
    thread misses at once, and six copies of one large query raced the database's statement timeout."""

    MAX_PKS = 400_000

    def __init__(self) -> None:
        super().__init__(self.MAX_PKS, ttl=VISIBILITY_CACHE_TTL_SECONDS, weigh=len)
        self._gates_lock = threading.Lock()
        self._gates: dict[str, tuple[threading.Lock, int]] = {}  # key -> (its gate, threads holding or waiting)

    @contextmanager
    def computing(self, key: str) -> Iterator[None]:
        """Held by one thread at a time per key: the first computes, the next find the set it kept."""
        with self._gates_lock:
            gate, waiting = self._gates.get(key, (threading.Lock(), 0))
            self._gates[key] = (gate, waiting + 1)
        try:
            with gate:
                yield
        finally:
            with self._gates_lock:
                gate, waiting = self._gates[key]
                if waiting == 1:
                    del self._gates[key]
                else:
                    self._gates[key] = (gate, waiting - 1)


visible_sets = VisibleSets()


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
    if key is None:
        return _visible_pks_compute(principal, permission, operation_class, environment, server_slugs)
    kept = visible_sets.get(key)
    if kept is not None:
        return kept
    with visible_sets.computing(key):
        kept = visible_sets.get(key)  # another thread of this process computed it meanwhile
        if kept is not None:
            return kept
        cached = cache_call("get", key)  # a cache outage means computing, never allowing more
        if cached is not None:
            computed_at, pks = cached
            visible_sets.put(key, pks, at=computed_at)
            return pks
        computed_at = time.time()  # before the read: the set is no older than this
        pks = _visible_pks_compute(principal, permission, operation_class, environment, server_slugs)
        cache_call("set", key, (computed_at, pks), timeout=VISIBILITY_CACHE_TTL_SECONDS)
        visible_sets.put(key, pks, at=computed_at)
        return pks


def _visible_pks_compute(principal, permission, operation_class, environment, server_slugs) -> frozenset[int]:
    """The visible set read from the database, uncached."""
    qs = tools_narrow(
        tools_visible_to(principal=principal, permission=permission),
        operation_class=operation_class,
        environment=environment,
        server_slugs=server_slugs,
    )
    return frozenset(qs.values_list("pk", flat=True))


# Which tool a principal's ``tool_get_for_principal`` last found for a tool_id, in this process: the tool's pk, under a
# key naming the visibility version (as ``VisibleSets``), so every grant, revocation, hold or status change in any
# process makes every entry unreachable; dropped VISIBILITY_CACHE_TTL_SECONDS after it was found. Only found tools
# are kept: a hidden and an unknown tool_id both miss and ask the database the same query (Z5).
found_tools: LruMap[str, int] = LruMap(4096, ttl=VISIBILITY_CACHE_TTL_SECONDS)
TOOL_RELATED = ("server", "server__tenancy", "policy__risk_class")


def tool_get_for_principal(*, principal: Principal, tool_id: str, permission: Permission = "discover") -> Tool:
    """The tool ``tool_id`` ("server::name", exact bytes) if ``principal`` may discover/execute it.

    Raises ToolNotFound whether the tool is missing, hidden or forbidden."""
    # Tool ids never hold control characters (catalog rejects them); NUL would also break Postgres.
    if not isinstance(tool_id, str) or not tool_id or len(tool_id) > MAX_TOOL_ID_LENGTH or "\x00" in tool_id:
        raise ToolNotFound()
    version = visibility_version()
    key = _cache_key(principal, permission, version, f"tool|{tool_id}") if version is not None else None
    pk = found_tools.get(key) if key is not None else None
    if pk is not None:
        # Found before under this very version: no grant, tenancy, entitlement or scope it depends on has changed
        # since (each rewrites the version). The row is read fresh (its schema, server, policy), and still servable.
        tool = tools_servable().select_related(*TOOL_RELATED).filter(pk=pk).first()
        if tool is not None and tool.tool_id == tool_id:
            return tool
    found_at = time.time()  # before the read: the entry is no older than this
    # One query, the same for a hidden and an unknown id (no row either way), answered by the database rather
    # than a cached set: a lookup that found the tool first and then checked it would take longer for a
    # hidden tool than for a missing one (a timing side channel, SECURITY-TESTS Z5).
    tool = (
        tools_visible_to(principal=principal, permission=permission)
        .select_related(*TOOL_RELATED)
        .filter(tool_id=tool_id)
        .first()
    )
    # Compare exact bytes: some database collations match case-insensitively.
    if tool is None or tool.tool_id != tool_id:
        raise ToolNotFound()
    if key is not None:
        found_tools.put(key, tool.pk, at=found_at)
    return tool


# Servers whose tools no client gets for now: a failed sync or health check (back once a sync succeeds), or an
# operator's decision (disabled, archived).
NOT_SERVING_STATUSES = tuple(status for status in ServerStatus.values if status not in VISIBLE_SERVER_STATUSES)


def tool_server_not_serving(
    *, principal: Principal, tool_id: str, permission: Permission = "discover"
) -> Server | None:
    """The server of ``tool_id`` when it is not serving (``NOT_SERVING_STATUSES``) and ``principal`` could use the tool
    were it serving: grants, entitlements, tenant, scopes and the tool's own state all as ``tools_visible_to`` asks.
    None for any other id, missing or hidden, so a tool the caller may not see keeps the unknown answer. Asked after
    ``tool_get_for_principal`` missed, for a hidden and an unknown id alike (one query either way, Z5)."""
    if not isinstance(tool_id, str) or not tool_id or len(tool_id) > MAX_TOOL_ID_LENGTH or "\x00" in tool_id:
        return None
    tool = (
        tools_visible_to(principal=principal, permission=permission, server_statuses=NOT_SERVING_STATUSES)
        .select_related("server")
        .filter(tool_id=tool_id)
        .first()
    )
    return tool.server if tool is not None and tool.tool_id == tool_id else None


def tools_not_serving_for(*, principal: Principal, permission: Permission = "discover") -> QuerySet[Tool]:
    """The tools ``principal`` could use were their servers serving (``NOT_SERVING_STATUSES``), as
    ``tool_server_not_serving`` judges one id: for a name that is not a tool id (a directly listed tool's)."""
    return tools_visible_to(principal=principal, permission=permission, server_statuses=NOT_SERVING_STATUSES)


# The servers ``servers_not_serving_for`` last found for a principal, in this process, under a key naming the
# visibility version (as ``found_tools``): every server status write (save, a sync's update) and every grant,
# tenancy or entitlement change writes a new version, so a kept list is never read past one. A search without a
# clear fit asks on every answer; the query reads every tool the caller may see (~5 ms at 10k tools on SQLite).
not_serving_lists: LruMap[str, tuple[tuple[str, str], ...]] = LruMap(4096, ttl=VISIBILITY_CACHE_TTL_SECONDS)


def servers_not_serving_for(*, principal: Principal, limit: int) -> list[tuple[str, str]]:
    """(slug, status) of up to ``limit`` servers, by slug, holding tools ``principal`` could discover were those
    servers serving (``tools_not_serving_for``). Kept per principal until the visibility version changes."""
    version = visibility_version()
    key = _cache_key(principal, "discover", version, f"not-serving|{limit}") if version is not None else None
    kept = not_serving_lists.get(key) if key is not None else None
    if kept is not None:
        return list(kept)
    found_at = time.time()  # before the read: the list is no older than this
    servers = tuple(
        tools_not_serving_for(principal=principal)
        .order_by("server__slug")
        .values_list("server__slug", "server__status")
        .distinct()[:limit]
    )
    if key is not None:
        not_serving_lists.put(key, servers, at=found_at)
    return list(servers)


def servers_visible_to_operator(*, user: AbstractBaseUser) -> Q:
    """Servers an admin may manage and grant: all for a superuser, else shared ones and those of the user's
    tenants (an operator of tenant A never sees or grants tenant B's servers). A filter on Server."""
    if getattr(user, "is_superuser", False):
        return Q()
    return server_tenant_q(principal_for_user(user))


def servers_shaped_by(*, user: AbstractBaseUser) -> Q:
    """Servers whose tools' curation ``user`` may change: those they manage (``servers_visible_to_operator``) less
    the shared ones unless they may shape what every tenant shares (``shared_shaped_by``). A filter on Server."""
    managed = servers_visible_to_operator(user=user)
    if shared_shaped_by(user=user):
        return managed
    return managed & Q(tenancy__tenant__isnull=False)


def tool_shaped_by(*, user: AbstractBaseUser, tool: Tool) -> bool:
    """Whether ``user`` may shape ``tool`` as every caller of its server gets it: curate it, classify its risk,
    accept or reject its held definition changes (``servers_shaped_by``: a shared server's tools are a
    superuser's once the install has tenants, another tenant's are nobody's but theirs)."""
    return Server.objects.filter(servers_shaped_by(user=user), pk=tool.server_id).exists()
