"""API tokens for MCP clients: issue (raw value returned once), revoke, verify."""

import hashlib
import hmac
import logging
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import OperationalError, transaction
from django.utils import timezone

from governance.choices import AuditEventType, AuditOutcome
from governance.constants import (
    BASE_SCOPES,
    SERVER_SCOPE_PREFIX,
    TOKEN_DISPLAY_CHARS,
    TOKEN_PREFIX,
    TOKEN_SECRET_BYTES,
)
from governance.models import ApiToken
from governance.principals import Principal, principal_for_user
from governance.services.audit import audit_record

logger = logging.getLogger(__name__)

# A raw token is the prefix plus token_urlsafe(32): 43 characters. Anything far off is not ours.
MAX_RAW_TOKEN_LENGTH = 200
# last_used_at is written at most this often, so verifying stays a single read on the hot path.
LAST_USED_RESOLUTION = timedelta(minutes=1)
GATEWAY_HOP = "scout-gateway"


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def scopes_validate(scopes: list[str] | tuple[str, ...] | frozenset[str]) -> list[str]:
    """Sorted, de-duplicated scopes. Raises ValidationError on an unknown scope or an empty list."""
    if isinstance(scopes, str) or not scopes:
        raise ValidationError({"scopes": "give at least one scope: discover, execute, approve, server:<slug>"})
    cleaned = set()
    for scope in scopes:
        if not isinstance(scope, str):
            raise ValidationError({"scopes": "scopes must be strings"})
        scope = scope.strip()
        if scope in BASE_SCOPES:
            cleaned.add(scope)
        elif scope.startswith(SERVER_SCOPE_PREFIX) and len(scope) > len(SERVER_SCOPE_PREFIX):
            cleaned.add(scope)
        else:
            raise ValidationError({"scopes": f"unknown scope {scope[:60]!r}"})
    return sorted(cleaned)


def api_token_create(
    *,
    user: AbstractBaseUser,
    name: str,
    scopes: list[str],
    expires_at: datetime,
    agent: str = "",
    tenant: str = "",
    created_by: AbstractBaseUser | None = None,
) -> tuple[ApiToken, str]:
    """Issue a token to ``user``. Returns the token row and the raw token, which is never stored and
    cannot be shown again. Raises ValidationError for an inactive user, bad scopes or a past expiry."""
    if not user.is_active:
        raise ValidationError({"user": "cannot issue a token to an inactive user"})
    if timezone.is_naive(expires_at) or expires_at <= timezone.now():
        raise ValidationError({"expires_at": "the expiry must be a time in the future (with a time zone)"})
    raw = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_SECRET_BYTES)
    token = ApiToken(
        user=user,
        name=name.strip(),
        token_hash=_digest(raw),
        display_prefix=raw[:TOKEN_DISPLAY_CHARS],
        agent=agent.strip(),
        tenant=tenant.strip(),
        scopes=scopes_validate(scopes),
        expires_at=expires_at,
        created_by=created_by,
    )
    token.full_clean()
    with transaction.atomic():
        token.save()
        audit_record(
            event_type=AuditEventType.TOKEN_CREATED,
            principal=principal_for_user(created_by, via="admin") if created_by is not None else None,
            actor=user,
            outcome=AuditOutcome.SUCCESS,
            payload={
                "token": token.ref,
                "for_user": user.get_username(),
                "agent": token.agent,
                "tenant": token.tenant,
                "scopes": token.scopes,
                "expires_at": expires_at.isoformat(),
            },
        )
    return token, raw


def api_token_revoke(*, token: ApiToken, actor: AbstractBaseUser | None = None) -> ApiToken:
    """Revoke ``token``; verification fails from the next call. Revoking twice is a no-op."""
    with transaction.atomic():
        updated = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_by=actor
        )
        token.refresh_from_db()
        audit_record(
            event_type=AuditEventType.TOKEN_REVOKED,
            principal=principal_for_user(actor, via="admin") if actor is not None else None,
            actor=token.user,
            outcome=AuditOutcome.SUCCESS,
            payload={"token": token.ref, "for_user": token.user.get_username(), "changed": bool(updated)},
        )
    return token


def api_token_verify(raw: object) -> Principal | None:
    """The principal for a raw bearer token, or None when it is malformed, unknown, revoked, expired or
    its user is inactive. The caller answers every None alike (401) so nothing tells them apart."""
    if not isinstance(raw, str) or not raw.startswith(TOKEN_PREFIX) or len(raw) > MAX_RAW_TOKEN_LENGTH:
        return None
    digest = _digest(raw)
    token = ApiToken.objects.select_related("user").filter(token_hash=digest).first()
    # Lookup is by a hash of a 256-bit secret; the compare below keeps the final check constant-time too.
    if token is None or not hmac.compare_digest(token.token_hash, digest):
        return None
    now = timezone.now()
    if token.revoked_at is not None or token.expires_at <= now or not token.user.is_active:
        return None
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        try:
            with transaction.atomic():
                ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        except OperationalError:
            # A locked database (F7) must not fail authentication: last_used_at is bookkeeping.
            logger.warning("token %s: last_used_at not updated (database busy)", token.ref)
    username = token.user.get_username()
    chain = [f"user:{username}"]
    if token.agent:
        chain.append(f"agent:{token.agent}")
    chain.append(GATEWAY_HOP)
    return Principal(
        user=token.user,
        token_id=token.pk,
        agent=token.agent,
        tenant=token.tenant,
        scopes=frozenset(token.scopes),
        delegation_chain=tuple(chain),
    )
