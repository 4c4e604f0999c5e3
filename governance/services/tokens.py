"""API tokens for MCP clients: issue (raw value returned once), revoke, verify."""

import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import OperationalError, transaction
from django.utils import timezone

from governance.cache import visibility_invalidate, visibility_row_token
from governance.choices import AuditEventType, AuditOutcome
from governance.constants import (
    BASE_SCOPES,
    MAX_SCOPE_SLUG_CHARS,
    MAX_TOKEN_SERVER_SCOPES,
    SCOPE_APPROVE,
    SERVER_SCOPE_PREFIX,
    TOKEN_DISPLAY_CHARS,
    TOKEN_PREFIX,
    TOKEN_SECRET_BYTES,
    delegation_max_agents,
)
from governance.models import Agent, ApiToken, Tenant
from governance.principals import Principal, principal_for_user
from governance.selectors import (
    api_tokens_with_membership,
    principal_for_token,
    token_ends_at,
    token_scopes_over_limit,
)
from governance.services.audit import audit_record

logger = logging.getLogger(__name__)

# A raw token is the prefix plus token_urlsafe(32): 43 characters. Anything far off is not ours.
MAX_RAW_TOKEN_LENGTH = 200
# last_used_at is written at most this often, so verifying stays a single read on the hot path.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def scopes_validate(scopes: list[str] | tuple[str, ...] | frozenset[str]) -> list[str]:
    """Sorted, de-duplicated scopes. Raises ValidationError on an unknown scope, an empty list, a server slug longer
    than any server's or more than MAX_TOKEN_SERVER_SCOPES servers."""
    if isinstance(scopes, str) or not scopes:
        raise ValidationError({"scopes": "give at least one scope: discover, execute, approve, server:<slug>"})
    cleaned = set()
    for scope in scopes:
        if not isinstance(scope, str):
            raise ValidationError({"scopes": "scopes must be strings"})
        scope = scope.strip()
        slug_chars = len(scope) - len(SERVER_SCOPE_PREFIX)
        if scope in BASE_SCOPES:
            cleaned.add(scope)
        elif scope.startswith(SERVER_SCOPE_PREFIX) and 0 < slug_chars <= MAX_SCOPE_SLUG_CHARS:
            cleaned.add(scope)
        else:
            raise ValidationError({"scopes": f"unknown scope {scope[:60]!r}"})
    if len(cleaned - BASE_SCOPES) > MAX_TOKEN_SERVER_SCOPES:
        raise ValidationError(
            {
                "scopes": f"a token names at most {MAX_TOKEN_SERVER_SCOPES} servers; to reach more, name none "
                "(the token then reaches every server its person and agent may use)"
            }
        )
    return sorted(cleaned)


def api_token_tenant(*, user: AbstractBaseUser, agent: Agent | None, tenant: Tenant | None) -> Tenant | None:
    """The tenant a token for ``user`` (and ``agent``) acts in. Raises ValidationError for someone else's agent,
    a tenant other than the agent's, a tenant the user is not a member of, or an agent chain deeper than
    allowed (SCOUT_DELEGATION_MAX_AGENTS)."""
    if agent is not None:
        if agent.user_id != user.pk:
            raise ValidationError({"agent": "the agent acts for another user"})
        if tenant is not None and tenant.pk != agent.tenant_id:
            raise ValidationError({"tenant": "a token for an agent acts in the agent's tenant"})
        tenant = agent.tenant
        if len(agent.chain()) > delegation_max_agents():
            raise ValidationError({"agent": f"delegation chains are limited to {delegation_max_agents()} agents"})
    if tenant is not None and not tenant.members.filter(pk=user.pk).exists():
        raise ValidationError({"tenant": "the user is not a member of this tenant"})
    return tenant


def api_token_issue_check(*, user: AbstractBaseUser, scopes: list[str], created_by: AbstractBaseUser | None) -> None:
    """Refuse what a token issued by someone else (``created_by``) for ``user`` may not carry: it is ``user`` to
    the REST API and /mcp, and its raw value is shown to whoever issued it. So the "approve" scope is only on a token
    a person makes for themselves (else an operator issuing one for an approver decides requests, their own too),
    and only a superuser, who may act for anyone already, issues a token for someone else: an operator issuing one
    for a member would search, call tools and raise approval requests as that member over /mcp. People mint their
    own. Raises ValidationError."""
    if created_by is None or created_by.pk == user.pk:
        return
    if SCOPE_APPROVE in scopes:
        raise ValidationError(
            {"scopes": "the approve scope is only on a token a person makes for themselves: deciding is their own act"}
        )
    if not created_by.is_superuser:
        raise ValidationError(
            {"user": "only a superuser issues a token for someone else: people make their own (admin or REST tokens/)"}
        )


def api_token_lifetime_check(*, expires_at: datetime) -> None:
    """Refuse an expiry more than SCOUT_TOKEN_MAX_DAYS ahead (0: no limit): a leaked token is a secret until it
    expires, and one dated 9999 never did. Raises ValidationError on ``expires_at``."""
    days = settings.SCOUT_TOKEN_MAX_DAYS
    if days and expires_at > timezone.now() + timedelta(days=days):
        raise ValidationError(
            {"expires_at": f"a token lives at most {days} days (SCOUT_TOKEN_MAX_DAYS): choose an earlier expiry"}
        )


def api_token_live_check(*, user: AbstractBaseUser) -> None:
    """Refuse a new token to ``user`` who already holds SCOUT_MAX_LIVE_TOKENS_PER_PERSON live ones (neither revoked
    nor expired; their agents' count too): any token with the api scope mints more, and each is a row, a rate of
    its own and one more secret to leak (T13). 0: no limit. Raises ValidationError, of no field: REST callers name no
    user (the token is their own), so it is answered like the API's other non-field refusals (message, no fields)."""
    limit = settings.SCOUT_MAX_LIVE_TOKENS_PER_PERSON
    live = ApiToken.objects.filter(user=user, revoked_at__isnull=True, expires_at__gt=timezone.now())
    if limit and live.count() >= limit:
        raise ValidationError(
            f"{user.get_username()} already holds {limit} live tokens (SCOUT_MAX_LIVE_TOKENS_PER_PERSON): "
            "revoke one they no longer use (admin or REST tokens/<id>/revoke/), or wait for one to expire"
        )


def api_token_create(
    *,
    user: AbstractBaseUser,
    name: str,
    scopes: list[str],
    expires_at: datetime,
    agent: Agent | None = None,
    tenant: Tenant | None = None,
    created_by: AbstractBaseUser | None = None,
    minted_by: ApiToken | None = None,
) -> tuple[ApiToken, str]:
    """Issue a token to ``user``, optionally for one of the user's agents and in one of the user's tenants (a
    token for an agent acts in the agent's tenant). Returns the token row and the raw token, which is never
    stored and cannot be shown again. Raises ValidationError for an inactive user, bad scopes, a past expiry,
    someone else's agent, a tenant the user is not a member of, an agent chain deeper than allowed, or a user
    holding as many live tokens as allowed (``api_token_live_check``)."""
    if not user.is_active:
        raise ValidationError({"user": "cannot issue a token to an inactive user"})
    if timezone.is_naive(expires_at) or expires_at <= timezone.now():
        raise ValidationError({"expires_at": "the expiry must be a time in the future (with a time zone)"})
    api_token_lifetime_check(expires_at=expires_at)
    api_token_issue_check(user=user, scopes=scopes, created_by=created_by)
    tenant = api_token_tenant(user=user, agent=agent, tenant=tenant)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_SECRET_BYTES)
    token = ApiToken(
        user=user,
        name=name.strip(),
        token_hash=_digest(raw),
        display_prefix=raw[:TOKEN_DISPLAY_CHARS],
        agent=agent,
        tenant=tenant,
        scopes=scopes_validate(scopes),
        expires_at=expires_at,
        created_by=created_by,
        minted_by=minted_by,
    )
    token.full_clean()
    with transaction.atomic():
        # The person's row is locked so two mints at once cannot both pass the count (Postgres).
        get_user_model().objects.select_for_update().filter(pk=user.pk).exists()
        if minted_by is not None:
            _minter_live_check(minted_by)
        api_token_live_check(user=user)
        token.save()
        audit_record(
            event_type=AuditEventType.TOKEN_CREATED,
            principal=principal_for_user(created_by, via="admin") if created_by is not None else None,
            actor=user,
            outcome=AuditOutcome.SUCCESS,
            payload={
                "token": token.ref,
                "for_user": user.get_username(),
                "agent": token.agent.name if token.agent else "",
                "tenant": token.tenant.slug if token.tenant else "",
                "scopes": token.scopes,
                "expires_at": expires_at.isoformat(),
                # The trail keeps which token made this one, whatever becomes of the rows (redteam24: tokens made
                # before migration 0015 have no record of it anywhere).
                "minted_by": minted_by.ref if minted_by is not None else "",
            },
        )
    return token, raw


def _minter_live_check(minter: ApiToken) -> None:
    """Raises ValidationError unless the minting token may still act. Its row is locked until the new token is saved
    (T16): the mint was authorized when its request was, and a revocation in between found no child to revoke, so the
    child outlived it. A revocation that locked the row first is seen here once it commits; one that comes after
    waits, and then finds the child."""
    live = ApiToken.objects.select_for_update().filter(
        pk=minter.pk, revoked_at__isnull=True, expires_at__gt=timezone.now()
    )
    if not live.exists():
        raise ValidationError({"token": "the token making this request was revoked or expired"})


def api_token_revoke(*, token: ApiToken, actor: AbstractBaseUser | None = None) -> ApiToken:
    """Revoke ``token`` and every live token it minted, and theirs in turn (whoever held a leaked token may have
    minted another first: revoking the one must end both, T16); verification fails from the next call. Each is
    audited. Revoking twice is a no-op."""
    with transaction.atomic():
        updated = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by=actor
        )
        token.refresh_from_db()
        _audit_revoked(token, actor=actor, changed=bool(updated))
        minted = list(ApiToken.objects.filter(minted_by=token, revoked_at__isnull=True).select_related("user"))
        while minted:
            ApiToken.objects.filter(pk__in=[row.pk for row in minted]).update(
                revoked_at=timezone.now(), revoked_by=actor
            )
            for row in minted:
                _audit_revoked(row, actor=actor, changed=True)
            minted = list(ApiToken.objects.filter(minted_by__in=minted, revoked_at__isnull=True).select_related("user"))
        visibility_invalidate()  # a queryset update sends no signal: every process's kept answer goes now
    return token


def _audit_revoked(token: ApiToken, *, actor: AbstractBaseUser | None, changed: bool) -> None:
    audit_record(
        event_type=AuditEventType.TOKEN_REVOKED,
        principal=principal_for_user(actor, via="admin") if actor is not None else None,
        actor=token.user,
        outcome=AuditOutcome.SUCCESS,
        payload={"token": token.ref, "for_user": token.user.get_username(), "changed": changed},
    )


def api_token_verify(raw: object) -> Principal | None:
    """The principal for a raw bearer token, or None when it is malformed, unknown, revoked, expired, its user
    is inactive, its user left its tenant, or its agent sits deeper than the delegation limit. The caller
    answers every None alike (401) so nothing tells them apart."""
    checked = _verify(raw)
    return checked[1] if checked is not None else None


def api_token_refusal(raw: object) -> str:
    """Why a raw bearer token that failed verification may not act, about that token alone: "revoked", "expired" (its
    expiry, or SCOUT_TOKEN_MAX_DAYS since its creation),
    "too_many_scopes" (stored before MAX_TOKEN_SERVER_SCOPES), or "invalid" for anything else (malformed, unknown, a
    user or tenant it may no longer act for). Its holder may be told (they hold the secret); nothing here says whether
    any other token exists."""
    if not isinstance(raw, str) or not raw.startswith(TOKEN_PREFIX) or len(raw) > MAX_RAW_TOKEN_LENGTH:
        return "invalid"
    digest = _digest(raw)
    fields = ("token_hash", "revoked_at", "expires_at", "created_at", "scopes")
    token = ApiToken.objects.filter(token_hash=digest).only(*fields).first()
    if token is None or not hmac.compare_digest(token.token_hash, digest):
        return "invalid"
    if token.revoked_at is not None:
        return "revoked"
    if token_ends_at(token) <= timezone.now():
        return "expired"
    return "too_many_scopes" if token_scopes_over_limit(token.scopes) else "invalid"


@dataclass(frozen=True)
class VerifiedToken:
    """A token verified against the database as it stood at ``version`` (the visibility row token, which every
    token save, revocation, user, tenant-membership and agent change rewrites): a process may keep it and
    trust it again while the version is unchanged and ``expires_at`` is ahead of the clock
    (``api_token_confirm``)."""

    principal: Principal
    version: str
    expires_at: datetime
    last_used_at: datetime | None


def api_token_verify_versioned(raw: object) -> VerifiedToken | None:
    """``api_token_verify`` with the version the answer holds for (``VerifiedToken``)."""
    if not isinstance(raw, str) or not raw.startswith(TOKEN_PREFIX) or len(raw) > MAX_RAW_TOKEN_LENGTH:
        return None
    # The version is read before the token: a change committed after this read rewrites it, so a kept answer
    # is never trusted past a change it did not see.
    version = visibility_row_token()
    checked = _verify(raw)
    if checked is None:
        return None
    token, principal, last_used_at = checked
    return VerifiedToken(
        principal=principal, version=version, expires_at=token_ends_at(token), last_used_at=last_used_at
    )


def _verify(raw: object) -> tuple[ApiToken, Principal, datetime | None] | None:
    """The token row, its principal and its last_used_at as now stored, or None (see api_token_verify)."""
    if not isinstance(raw, str) or not raw.startswith(TOKEN_PREFIX) or len(raw) > MAX_RAW_TOKEN_LENGTH:
        return None
    digest = _digest(raw)
    token = api_tokens_with_membership().filter(token_hash=digest).first()
    # Lookup is by a hash of a 256-bit secret; the compare below keeps the final check constant-time too.
    if token is None or not hmac.compare_digest(token.token_hash, digest):
        return None
    now = timezone.now()
    if token.revoked_at is not None or token.expires_at <= now:
        return None
    principal = principal_for_token(token)
    if principal is None:
        return None
    return token, principal, _last_used_bump(token.pk, token.last_used_at, now)


def api_token_confirm(verified: VerifiedToken, raw: str) -> VerifiedToken | None:
    """``verified`` again if nothing changed since (one read of the version row), else the token verified anew;
    None when it may no longer act (revoked, expired by the clock, user deactivated, ...)."""
    now = timezone.now()
    # The delegation limit is a setting, not a row: checked here too (user, gateway hop and agents in between).
    agents = len(verified.principal.delegation_chain) - 2
    if verified.expires_at <= now or agents > delegation_max_agents() or visibility_row_token() != verified.version:
        return api_token_verify_versioned(raw)
    last_used_at = _last_used_bump(verified.principal.token_id, verified.last_used_at, now)
    if last_used_at == verified.last_used_at:
        return verified
    return replace(verified, last_used_at=last_used_at)


def _last_used_bump(token_pk: int | None, last_used_at: datetime | None, now: datetime) -> datetime | None:
    """Write last_used_at at most once per LAST_USED_RESOLUTION; returns the value now stored."""
    if last_used_at is not None and now - last_used_at <= LAST_USED_RESOLUTION:
        return last_used_at
    try:
        with transaction.atomic():
            ApiToken.objects.filter(pk=token_pk).update(last_used_at=now)
    except OperationalError:
        # A locked database (F7) must not fail authentication: last_used_at is bookkeeping.
        logger.warning("token tok-%s: last_used_at not updated (database busy)", token_pk)
        return last_used_at
    return now
