"""Who is acting: the verified identity and delegation envelope every governed call carries."""

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser

from .constants import BASE_SCOPES, SCOPE_APPROVE, SCOPE_DISCOVER, SCOPE_EXECUTE, SERVER_SCOPE_PREFIX


@dataclass(frozen=True)
class Principal:
    """A verified caller: the human user, the token used (None for a session), the agent and tenant the token
    names, its scopes and the delegation chain. Built only by ``api_token_verify`` / ``principal_for_token`` or
    ``principal_for_user``, never from anything a client sends (T15: client-supplied ``_meta`` identity is
    ignored).

    Effective rights are the user's object grants, narrowed by every agent in the chain that is narrowed
    (``narrowing_agent_ids``: their ``AgentGrant`` rows), by ``scopes`` ("discover", "execute", "approve",
    and, when any "server:<slug>" scope is present, only those servers), and by tenant: shared rows plus those
    of ``tenant_ids`` (a token: its one tenant; a session: every tenant its user is a member of).
    """

    user: AbstractBaseUser
    token_id: int | None
    agent: str
    tenant: str
    scopes: frozenset[str]
    delegation_chain: tuple[str, ...]
    tenant_id: int | None = None  # the tenant it acts in (audit rows, approvals); None: shared
    tenant_ids: frozenset[int] = frozenset()  # tenants whose servers, approvals and audit it may see
    agent_id: int | None = None  # the agent at the end of the chain
    narrowing_agent_ids: tuple[int, ...] = ()  # agents whose own grants narrow, root first
    issued_by_id: int | None = None  # who issued the token, when someone other than its user did

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def server_slugs(self) -> frozenset[str] | None:
        """Servers the token is limited to, or None when it is not limited to any."""
        slugs = frozenset(s[len(SERVER_SCOPE_PREFIX) :] for s in self.scopes if s.startswith(SERVER_SCOPE_PREFIX))
        return slugs or None

    @property
    def acts_across_tenants(self) -> bool:
        """A session of a person in several tenants: it sees them all but acts in none of them, so what it does
        cannot be filed under one tenant, and filed as shared every tenant would read it (Z12)."""
        return self.tenant_id is None and bool(self.tenant_ids)

    @property
    def token_ref(self) -> str:
        return f"tok-{self.token_id}" if self.token_id is not None else ""

    @property
    def human_subject(self) -> str:
        return self.user.get_username() if self.user is not None else ""

    def cache_fingerprint(self) -> str:
        """Everything that changes what this principal may see; part of the visibility cache key."""
        servers = ",".join(sorted(self.server_slugs or ()))
        base = ",".join(sorted(s for s in self.scopes if s in BASE_SCOPES))
        tenants = ",".join(str(pk) for pk in sorted(self.tenant_ids))
        agents = ",".join(str(pk) for pk in self.narrowing_agent_ids)
        return f"u{self.user.pk}:t{self.token_id}:{base}:{servers}:tn{tenants}:ag{agents}"


def principal_for_user(
    user: AbstractBaseUser,
    *,
    agent: str = "",
    scopes: frozenset[str] = frozenset({SCOPE_DISCOVER, SCOPE_EXECUTE, SCOPE_APPROVE}),
    via: str = "session",
) -> Principal:
    """A principal for a logged-in human (admin session, management command) with the user's full rights, in
    every tenant the user is a member of (acting in one only when the user belongs to exactly one)."""
    return _session_principal(user, _tenants_of(user), agent=agent, scopes=scopes, via=via)


def _tenants_of(user: AbstractBaseUser) -> list[tuple[int, str]]:
    """(pk, slug) of the tenants ``user`` is a member of, read once per request: the approver's inbox asked 15
    times per page (each selector builds its own principal), now once."""
    from .cache import request_memo

    if getattr(user, "pk", None) is None:
        return []
    memo = request_memo()
    key = ("tenants", user.pk)
    if key not in memo:
        memo[key] = list(user.tenants.values_list("pk", "slug"))
    return memo[key]


def principals_for_users(users: Iterable[AbstractBaseUser]) -> dict[int, Principal]:
    """``principal_for_user`` for each of ``users`` (saved ones), by user pk: their tenants in one query
    (none for people whose tenants this request already read, ``_tenants_of``'s memo)."""
    from .cache import request_memo
    from .models import Tenant

    by_pk = {user.pk: user for user in users if user.pk is not None}
    memo = request_memo()  # shared with _tenants_of: the inbox judged the same requesters 4 times per page
    tenants: dict[int, list[tuple[int, str]]] = {pk: memo.get(("tenants", pk), []) for pk in by_pk}
    unread = [pk for pk in by_pk if ("tenants", pk) not in memo]
    if unread:
        memberships = Tenant.members.through.objects.filter(user_id__in=unread).order_by("tenant__slug")
        for user_id, tenant_id, slug in memberships.values_list("user_id", "tenant_id", "tenant__slug"):
            tenants[user_id].append((tenant_id, slug))
        memo.update({("tenants", pk): tenants[pk] for pk in unread})
    return {pk: _session_principal(user, tenants[pk]) for pk, user in by_pk.items()}


def _session_principal(
    user: AbstractBaseUser,
    tenants: list[tuple[int, str]],
    *,
    agent: str = "",
    scopes: frozenset[str] = frozenset({SCOPE_DISCOVER, SCOPE_EXECUTE, SCOPE_APPROVE}),
    via: str = "session",
) -> Principal:
    acting = tenants[0] if len(tenants) == 1 else (None, "")
    return Principal(
        user=user,
        token_id=None,
        agent=agent,
        tenant=acting[1],
        scopes=frozenset(scopes),
        delegation_chain=(f"user:{user.get_username()}", via),
        tenant_id=acting[0],
        tenant_ids=frozenset(pk for pk, _ in tenants),
    )
