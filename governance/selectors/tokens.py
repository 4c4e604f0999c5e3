"""Reads of API tokens: the principal a token row stands for, now."""

from dataclasses import replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from ..constants import BASE_SCOPES, GATEWAY_HOP, MAX_TOKEN_SERVER_SCOPES, delegation_max_agents
from ..models import ApiToken, Tenant
from ..principals import Principal


def api_tokens_with_membership() -> QuerySet[ApiToken]:
    """Tokens with what ``principal_for_token`` reads (user, tenant, agents) and whether the user is still a member
    of the token's tenant (``tenant_member``), so a principal is built without a query of its own."""
    member = Tenant.members.through.objects.filter(tenant_id=OuterRef("tenant_id"), user_id=OuterRef("user_id"))
    return ApiToken.objects.select_related("user", "tenant", "agent", "agent__parent").annotate(
        tenant_member=Exists(member)
    )


def token_scopes_over_limit(scopes: object) -> bool:
    """Whether a stored token names more servers than MAX_TOKEN_SERVER_SCOPES (made before the limit, over REST).
    Such a token is refused, not narrowed: its holder makes a new one (told so by /mcp's 401); cutting its list
    would change which servers it reaches, and keeping it would slow each of its searches."""
    return isinstance(scopes, list) and len(set(scopes) - BASE_SCOPES) > MAX_TOKEN_SERVER_SCOPES


def token_ends_at(token: ApiToken) -> datetime:
    """When ``token`` stops acting: its expiry, or SCOUT_TOKEN_MAX_DAYS after its creation if that comes first (a
    token made before the limit, or the limit lowered since, with an expiry further off)."""
    days = settings.SCOUT_TOKEN_MAX_DAYS
    return min(token.expires_at, token.created_at + timedelta(days=days)) if days else token.expires_at


def principal_as_now(principal: Principal) -> Principal | None:
    """``principal`` as its token (a session's: its user) stands in the database now, or None when it may no
    longer act (revoked, expired, user deactivated, left the token's tenant, ...): for re-checking a caller whose
    request was verified a while ago (a call that waited before it was sent)."""
    if principal.token_id is None:
        user = type(principal.user).objects.filter(pk=principal.user.pk, is_active=True).first()
        return replace(principal, user=user) if user is not None else None
    token = (
        api_tokens_with_membership()
        .filter(pk=principal.token_id, revoked_at__isnull=True, expires_at__gt=timezone.now())
        .first()
    )
    return principal_for_token(token) if token is not None else None


def principal_for_token(token: ApiToken) -> Principal | None:
    """The principal a token row stands for (no secret needed: for re-checking a stored request against the
    token it came from), or None when the token may not act: inactive user, a tenant the user is no longer a
    member of, an agent of another user or in another tenant, an agent chain deeper than the limit, more server
    scopes than a token may now name (``token_scopes_over_limit``), or older than a token may live (``token_ends_at``).

    The delegation chain comes from the token's agent and the agents above it, never from the client."""
    if not token.user.is_active or token_scopes_over_limit(token.scopes) or token_ends_at(token) <= timezone.now():
        return None
    member = getattr(token, "tenant_member", None)
    if token.tenant_id is not None and not (
        member if member is not None else token.tenant.members.filter(pk=token.user_id).exists()
    ):
        return None
    agents = token.agent.chain() if token.agent_id is not None else []
    if agents and (
        len(agents) > delegation_max_agents()
        or any(agent.user_id != token.user_id or agent.tenant_id != token.tenant_id for agent in agents)
    ):
        return None
    username = token.user.get_username()
    chain = [f"user:{username}", *(f"agent:{agent.name}" for agent in agents), GATEWAY_HOP]
    return Principal(
        user=token.user,
        token_id=token.pk,
        agent=token.agent.name if token.agent_id is not None else "",
        tenant=token.tenant.slug if token.tenant_id is not None else "",
        scopes=frozenset(token.scopes),
        delegation_chain=tuple(chain),
        tenant_id=token.tenant_id,
        tenant_ids=frozenset({token.tenant_id}) if token.tenant_id is not None else frozenset(),
        agent_id=token.agent_id,
        narrowing_agent_ids=tuple(agent.pk for agent in agents if not agent.all_user_tools),
        issued_by_id=token.created_by_id if token.created_by_id not in (None, token.user_id) else None,
    )
