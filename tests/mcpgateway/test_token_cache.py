"""Verified tokens kept per gateway process (issue 9): trusted again only while nothing changed, refused by every
process on the next request after a revocation, an expiry or a deactivation.

Two ``TokenCache`` instances stand for two worker processes: each keeps its own verified tokens, and only the
database is shared (tests/mcpgateway/test_cross_process.py runs the same check with two uvicorn workers).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governance.models import ApiToken
from governance.services.tokens import api_token_create, api_token_revoke, api_token_verify_versioned
from mcpgateway.auth import ScoutAccessToken, TokenCache, _access, access_confirm
from tests.governance.factories import agent_of, in_days, tenant_with

pytestmark = pytest.mark.django_db


def keep(cache: TokenCache, raw: str) -> None:
    """What the verifier does on a cache miss: verify against the database and keep the answer."""
    verified = api_token_verify_versioned(raw)
    assert verified is not None
    cache.put(raw, verified)


def next_request(cache: TokenCache, raw: str) -> ScoutAccessToken:
    """What the verifier hands the next request of this process: the kept answer, not yet confirmed."""
    kept = cache.get(raw)
    assert kept is not None
    return _access(raw, kept, confirmed=False)


def _revoke(token: ApiToken) -> None:
    api_token_revoke(token=token)


def _deactivate_user(token: ApiToken) -> None:
    token.user.is_active = False
    token.user.save()  # as the admin saves it


def _expire_in_admin(token: ApiToken) -> None:
    token.expires_at = timezone.now() - timedelta(seconds=1)
    token.save()


def _delete(token: ApiToken) -> None:
    token.delete()


def _leave_tenant(token: ApiToken) -> None:
    token.tenant.members.remove(token.user)


def _agent_moved_to_another_user(token: ApiToken) -> None:
    from django.contrib.auth import get_user_model

    agent = token.agent
    agent.user = get_user_model().objects.create_user(username="someone-else")
    agent.save()


@pytest.mark.parametrize(
    "change",
    [_revoke, _deactivate_user, _expire_in_admin, _delete, _leave_tenant, _agent_moved_to_another_user],
    ids=lambda change: change.__name__.strip("_"),
)
def test_a_change_refuses_the_kept_token_in_every_process(member, change: Callable[[ApiToken], None]):
    acme = tenant_with("acme", member)
    agent = agent_of(member, "triage", tenant=acme, all_user_tools=True)
    token, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1), agent=agent)
    worker_a, worker_b = TokenCache(), TokenCache()
    keep(worker_a, raw)
    keep(worker_b, raw)

    change(token)

    for worker in (worker_a, worker_b):
        access = next_request(worker, raw)
        assert access_confirm(access, worker) is None
        assert access._refused
        assert worker.get(raw) is None  # the next request goes to the database (and gets a 401 there)


def test_an_unchanged_token_is_confirmed_with_one_read(member):
    _, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    worker = TokenCache()
    keep(worker, raw)
    access = next_request(worker, raw)
    with CaptureQueriesContext(connection) as queries:
        principal = access_confirm(access, worker)
    assert principal is not None and principal.user == member
    assert len(queries) == 1, [query["sql"] for query in queries]  # the version row, nothing else
    assert access._confirmed and not access._refused


def test_a_change_elsewhere_verifies_again_and_keeps_the_new_answer(member):
    """Any rewrite of the version (here another user's grant-related save) is followed by a full verification,
    which may find the token still good: the new answer replaces the kept one."""
    token, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    worker = TokenCache()
    keep(worker, raw)
    before = worker.get(raw)
    ApiToken.objects.filter(pk=token.pk).update(scopes=["discover", "execute"])
    tenant_with("unrelated")  # rewrites the version
    access = next_request(worker, raw)
    principal = access_confirm(access, worker)
    assert principal is not None and principal.scopes == frozenset({"discover", "execute"})
    assert worker.get(raw) is not before and worker.get(raw).principal == principal


def test_expiry_is_checked_against_the_clock_on_every_request(member):
    token, raw = api_token_create(
        user=member, name="t", scopes=["discover"], expires_at=timezone.now() + timedelta(seconds=1)
    )
    worker = TokenCache()
    keep(worker, raw)
    deadline = time.monotonic() + 10
    while timezone.now() <= token.expires_at:  # nothing in the database changes: only the clock moves
        assert time.monotonic() < deadline
        time.sleep(0.05)
    access = next_request(worker, raw)
    assert access_confirm(access, worker) is None and access._refused


def test_the_cache_keeps_no_raw_token(member):
    _, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    worker = TokenCache()
    keep(worker, raw)
    assert raw not in repr(worker._entries.keys())
    assert worker.get(raw) is not None


def test_a_lowered_delegation_limit_refuses_a_kept_agent_token(member, settings):
    """The limit is a setting, not a row (no version rewrite): the kept answer is checked against it anyway."""
    parent = agent_of(member, "planner", all_user_tools=True)
    child = agent_of(member, "worker", parent=parent, all_user_tools=True)
    _, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1), agent=child)
    worker = TokenCache()
    keep(worker, raw)
    settings.SCOUT_DELEGATION_MAX_AGENTS = 1
    access = next_request(worker, raw)
    assert access_confirm(access, worker) is None and access._refused


def test_a_kept_token_names_no_principal_until_its_check_has_answered(member):
    """The event loop reads ``_confirmed`` without a lock while an ORM thread confirms the same request (the
    handler and ConfirmedAccess both may), then trusts ``_refused`` and ``_principal``. Set first, ``_confirmed``
    opened a window in which a revoked token's request read as confirmed with the kept principal: it acted."""
    token, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    worker = TokenCache()
    keep(worker, raw)
    seen: list[tuple[bool, object]] = []

    class Observed(ScoutAccessToken):
        def __setattr__(self, name: str, value: object) -> None:
            super().__setattr__(name, value)
            if name == "_confirmed" and value:  # what a reader on another thread finds from this moment on
                seen.append((self._refused, self._principal))

    kept = worker.get(raw)
    access = Observed(token=raw, client_id="c", scopes=["discover"], expires_at=None)
    access._verified, access._confirmed = kept, False
    assert access._principal is None  # nothing to act as before the check
    assert _access(raw, kept, confirmed=False)._principal is None
    _revoke(token)

    assert access_confirm(access, worker) is None
    assert seen == [(True, None)]
