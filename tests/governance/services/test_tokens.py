"""API tokens: issued once, stored hashed, verified into a principal; bad tokens rejected alike."""

import hashlib
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from governance.constants import TOKEN_PREFIX
from governance.models import ApiToken, AuditEvent
from governance.services.tokens import api_token_create, api_token_revoke, api_token_verify
from tests.governance.factories import agent_of, in_days, tenant_with

pytestmark = pytest.mark.django_db


def test_raw_token_is_returned_once_and_only_its_hash_is_stored(member):
    token, raw = api_token_create(user=member, name="ci", scopes=["discover"], expires_at=in_days(1))
    assert raw.startswith(TOKEN_PREFIX) and len(raw) >= 40
    stored = ApiToken.objects.get(pk=token.pk)
    assert stored.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    row_text = " ".join(str(v) for v in ApiToken.objects.filter(pk=token.pk).values().first().values())
    assert raw not in row_text
    assert raw not in str(list(AuditEvent.objects.values_list("payload", flat=True)))


def test_creation_is_audited_with_what_the_token_may_do(member):
    """The audit trail says which token was issued to whom, for which agent and tenant, with which scopes
    and until when (never the secret: see the test above)."""
    expires = in_days(7)
    acme = tenant_with("acme", member)
    agent = agent_of(member, "triage-agent", tenant=acme, all_user_tools=True)
    token, _ = api_token_create(user=member, name="ci", agent=agent, scopes=["discover"], expires_at=expires)
    event = AuditEvent.objects.get(event_type="token.created")
    assert event.payload == {
        "token": token.ref,
        "for_user": "member",
        "agent": "triage-agent",
        "tenant": "acme",
        "scopes": ["discover"],
        "expires_at": expires.isoformat(),
        "minted_by": "",  # issued in the admin or by a service, not minted by another token
    }


def test_verify_returns_the_principal_with_envelope(member):
    acme = tenant_with("acme", member)
    token, raw = api_token_create(
        user=member,
        name="t",
        agent=agent_of(member, "triage-agent", tenant=acme, all_user_tools=True),
        scopes=["discover", "server:github"],
        expires_at=in_days(1),
    )
    principal = api_token_verify(raw)
    assert principal is not None
    assert principal.user == member and principal.token_id == token.pk
    assert principal.agent == "triage-agent" and principal.tenant == "acme"
    assert principal.scopes == frozenset({"discover", "server:github"})
    assert principal.server_slugs == frozenset({"github"})
    assert principal.delegation_chain == ("user:member", "agent:triage-agent", "scout-gateway")
    assert principal.tenant_id == acme.pk and principal.tenant_ids == frozenset({acme.pk})


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "Bearer x",
        TOKEN_PREFIX,
        TOKEN_PREFIX + "A" * 43,
        TOKEN_PREFIX + "x" * 10_000,
        12345,
        "scout_\x00\r\n",
    ],
)
def test_forged_or_malformed_tokens_are_rejected(member, raw):
    api_token_create(user=member, name="real", scopes=["discover"], expires_at=in_days(1))
    assert api_token_verify(raw) is None


def test_token_with_one_character_changed_is_rejected(member):
    _, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    tampered = raw[:-1] + ("A" if raw[-1] != "A" else "B")
    assert api_token_verify(tampered) is None
    assert api_token_verify(raw) is not None


def test_expired_token_is_rejected(member):
    token, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api_token_verify(raw) is None


def test_revoked_token_is_rejected_on_the_next_call(member, superuser):
    token, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    assert api_token_verify(raw) is not None
    api_token_revoke(token=token, actor=superuser)
    assert api_token_verify(raw) is None
    assert AuditEvent.objects.filter(event_type="token.revoked", human_subject="superuser").count() == 1


def test_revoking_twice_keeps_the_first_revocation(member, superuser, approver):
    """The second revoke changes nothing: who revoked it and when stay the first revoker's (its audit event
    says changed=false)."""
    token, _ = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    api_token_revoke(token=token, actor=superuser)
    first = ApiToken.objects.get(pk=token.pk)
    api_token_revoke(token=token, actor=approver)
    again = ApiToken.objects.get(pk=token.pk)
    assert (again.revoked_at, again.revoked_by_id) == (first.revoked_at, superuser.pk)
    changed = AuditEvent.objects.filter(event_type="token.revoked").order_by("id").values_list("payload", flat=True)
    assert [payload["changed"] for payload in changed] == [True, False]


def test_token_of_inactive_user_is_rejected(member):
    _, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    member.is_active = False
    member.save()
    assert api_token_verify(raw) is None


def test_foreign_token_identifies_its_own_user_only(member, outsider):
    _, member_raw = api_token_create(user=member, name="m", scopes=["discover"], expires_at=in_days(1))
    _, outsider_raw = api_token_create(user=outsider, name="o", scopes=["discover"], expires_at=in_days(1))
    assert api_token_verify(member_raw).user == member
    assert api_token_verify(outsider_raw).user == outsider


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"scopes": []}, "scopes"),
        ({"scopes": ["admin"]}, "scopes"),
        ({"scopes": ["server:"]}, "scopes"),
        ({"expires_at": timezone.now() - timedelta(days=1)}, "expires_at"),
    ],
)
def test_bad_token_requests_give_clear_errors(member, kwargs, field):
    args = {"user": member, "name": "t", "scopes": ["discover"], "expires_at": in_days(1), **kwargs}
    with pytest.raises(ValidationError) as exc:
        api_token_create(**args)
    assert field in exc.value.message_dict
    assert ApiToken.objects.count() == 0


def test_no_token_for_inactive_user(member):
    member.is_active = False
    member.save()
    with pytest.raises(ValidationError):
        api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
