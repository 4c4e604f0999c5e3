"""Approvals bound to the exact call (SECURITY-TESTS.md Z9): each bypass is rejected."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.choices import ServerStatus
from catalog.definitions import normalize_listing
from catalog.services.apply import catalog_apply_listing
from governance.choices import ApprovalStatus
from governance.models import ApprovalRequest, AuditEvent
from governance.principals import Principal
from governance.selectors import ToolNotFound
from governance.services.approvals import (
    ApprovalError,
    ArgumentsNotCanonical,
    approval_consume,
    approval_decide,
    approval_request_create,
    arguments_digest,
    policy_for_tool,
)
from governance.services.authorize import call_authorize
from tests.celery_results import task_result
from tests.governance.conftest import classify
from tests.governance.factories import ToolFactory

pytestmark = pytest.mark.django_db

ARGS_A = {"repo": "acme/site", "force": True}
ARGS_B = {"repo": "acme/payroll", "force": True}


@pytest.fixture
def setup(member_token, approver, grant, server, mutating_tool):
    """member may execute delete_repo (needs approval); approver may approve it."""
    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    grant(approver, server, "approve")
    return principal, mutating_tool


def approved_request(principal, tool, approver, arguments=ARGS_A) -> ApprovalRequest:
    request = approval_request_create(principal=principal, tool=tool, arguments=arguments)
    return approval_decide(request=request, approver=approver, approve=True, reason="ok")


def test_call_without_approval_creates_a_pending_request_and_does_not_allow(setup):
    principal, tool = setup
    decision = call_authorize(principal=principal, tool_id=tool.tool_id, arguments=ARGS_A)
    assert decision.allowed is False
    request = decision.approval_request
    assert request.status == ApprovalStatus.PENDING
    assert request.requester == principal.user and request.token_id == principal.token_id
    assert request.agent == "triage-agent" and request.tenant is None
    assert request.tool_definition_hash == tool.definition_hash
    assert request.arguments_digest == arguments_digest(ARGS_A)
    assert request.policy_version.number >= 1
    assert len(request.approval_id) >= 20  # >= 128 random bits
    # asking again for the same call returns the same pending request
    again = call_authorize(principal=principal, tool_id=tool.tool_id, arguments=ARGS_A)
    assert again.approval_request.pk == request.pk


def test_approved_call_is_allowed_exactly_once(setup, approver):
    principal, tool = setup
    request = approved_request(principal, tool, approver)
    decision = call_authorize(
        principal=principal,
        tool_id=tool.tool_id,
        arguments=dict(reversed(list(ARGS_A.items()))),
        approval_id=request.approval_id,
    )
    assert decision.allowed and decision.approval.status == ApprovalStatus.CONSUMED
    with pytest.raises(ApprovalError) as exc:
        call_authorize(principal=principal, tool_id=tool.tool_id, arguments=ARGS_A, approval_id=request.approval_id)
    assert exc.value.code == "used"


def test_approval_for_arguments_a_cannot_be_used_for_b(setup, approver):
    principal, tool = setup
    request = approved_request(principal, tool, approver)
    with pytest.raises(ApprovalError) as exc:
        approval_consume(approval_id=request.approval_id, principal=principal, tool=tool, arguments=ARGS_B)
    assert exc.value.code == "arguments_mismatch"
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED  # still usable for A
    assert AuditEvent.objects.filter(event_type="approval.rejected", payload__code="arguments_mismatch").exists()


def test_requester_cannot_approve_their_own_request(setup, grant):
    principal, tool = setup
    grant(principal.user, tool.server, "approve")
    request = approval_request_create(principal=principal, tool=tool, arguments=ARGS_A)
    with pytest.raises(ApprovalError) as exc:
        approval_decide(request=request, approver=principal.user, approve=True, reason="me")
    assert exc.value.code == "self_approval"
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING


def test_user_without_approve_permission_cannot_decide(setup, outsider, owner, grant):
    principal, tool = setup
    grant(owner, tool.server, "discover", "execute")  # execute rights are not approve rights
    request = approval_request_create(principal=principal, tool=tool, arguments=ARGS_A)
    for user in (outsider, owner):
        with pytest.raises(ApprovalError) as exc:
            approval_decide(request=request, approver=user, approve=True, reason="")
        assert exc.value.code == "forbidden"
    request.refresh_from_db()
    assert request.status == ApprovalStatus.PENDING


def test_tool_approve_grant_is_narrower_than_server_grant(setup, owner, grant, server):
    principal, tool = setup
    other = ToolFactory(server=server, name="drop_branch", annotations=None)
    grant(owner, tool, "approve")
    on_other = approval_request_create(principal=principal, tool=other, arguments=ARGS_A)
    with pytest.raises(ApprovalError):
        approval_decide(request=on_other, approver=owner, approve=True, reason="")
    on_tool = approval_request_create(principal=principal, tool=tool, arguments=ARGS_A)
    assert approval_decide(request=on_tool, approver=owner, approve=True, reason="").status == "approved"


def test_schema_change_after_approval_voids_it(setup, approver, server):
    principal, tool = setup
    request = approved_request(principal, tool, approver)
    definitions, _, names = normalize_listing(
        [
            {
                "name": tool.name,
                "description": "Deletes a repository.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"repo": {"type": "string"}, "also_delete_backups": {"type": "boolean"}},
                },
            }
        ],
        max_bytes=100_000,
    )
    catalog_apply_listing(server=server, definitions=definitions, keep_names=names)
    tool.refresh_from_db()
    with pytest.raises(ApprovalError) as exc:
        approval_consume(approval_id=request.approval_id, principal=principal, tool=tool, arguments=ARGS_A)
    # The changed tool is held, and a hold voids the open approvals for it at once (redteam55); one asked after the
    # hold was lifted is refused as ``definition_changed`` (test_approval_attacks).
    assert exc.value.code == "expired"
    # and through the gateway path the changed tool is held, hence not even found
    with pytest.raises(ToolNotFound):
        call_authorize(principal=principal, tool_id=tool.tool_id, arguments=ARGS_A, approval_id=request.approval_id)


def test_expired_approval_is_rejected(setup, approver):
    principal, tool = setup
    request = approved_request(principal, tool, approver)
    ApprovalRequest.objects.filter(pk=request.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(ApprovalError) as exc:
        approval_consume(approval_id=request.approval_id, principal=principal, tool=tool, arguments=ARGS_A)
    assert exc.value.code == "expired"
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXPIRED


def test_pending_and_denied_requests_cannot_be_used(setup, approver):
    principal, tool = setup
    pending = approval_request_create(principal=principal, tool=tool, arguments=ARGS_A)
    with pytest.raises(ApprovalError) as exc:
        approval_consume(approval_id=pending.approval_id, principal=principal, tool=tool, arguments=ARGS_A)
    assert exc.value.code == "not_approved"
    approval_decide(request=pending, approver=approver, approve=False, reason="too risky")
    with pytest.raises(ApprovalError) as exc:
        approval_consume(approval_id=pending.approval_id, principal=principal, tool=tool, arguments=ARGS_A)
    assert exc.value.code == "denied"


def test_denial_needs_a_reason(setup, approver):
    principal, tool = setup
    request = approval_request_create(principal=principal, tool=tool, arguments=ARGS_A)
    with pytest.raises(ApprovalError) as exc:
        approval_decide(request=request, approver=approver, approve=False, reason="  ")
    assert exc.value.code == "reason_required"


def test_deciding_twice_is_refused(setup, approver):
    principal, tool = setup
    request = approved_request(principal, tool, approver)
    with pytest.raises(ApprovalError) as exc:
        approval_decide(request=request, approver=approver, approve=False, reason="changed my mind")
    assert exc.value.code == "not_pending"


@pytest.mark.parametrize("approval_id", ["apr_doesnotexist0000000", "", "x" * 5000, None, 42, "apr_\x00"])
def test_unknown_approval_ids_give_a_clear_error(setup, approval_id):
    principal, tool = setup
    with pytest.raises(ApprovalError) as exc:
        approval_consume(approval_id=approval_id, principal=principal, tool=tool, arguments=ARGS_A)
    assert exc.value.code == "unknown"
    assert str(exc.value) == "Unknown approval id"


def test_approval_of_another_principal_looks_unknown(setup, approver, outsider, grant, server):
    principal, tool = setup
    request = approved_request(principal, tool, approver)
    grant(outsider, server, "discover", "execute")
    thief = Principal(
        user=outsider,
        token_id=None,
        agent="",
        tenant="",
        scopes=frozenset({"discover", "execute"}),
        delegation_chain=("user:outsider",),
    )
    other_agent = Principal(
        user=principal.user,
        token_id=principal.token_id,
        agent="other-agent",
        tenant="acme",
        scopes=principal.scopes,
        delegation_chain=principal.delegation_chain,
    )
    for who in (thief, other_agent):
        with pytest.raises(ApprovalError) as exc:
            approval_consume(approval_id=request.approval_id, principal=who, tool=tool, arguments=ARGS_A)
        assert exc.value.code == "unknown"
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED


def test_approval_for_another_tool_is_rejected(setup, approver, server):
    principal, tool = setup
    request = approved_request(principal, tool, approver)
    other = ToolFactory(server=server, name="other_mutation", annotations=None)
    with pytest.raises(ApprovalError) as exc:
        approval_consume(approval_id=request.approval_id, principal=principal, tool=other, arguments=ARGS_A)
    assert exc.value.code == "unknown"


def test_policy_change_after_approval_voids_it(setup, approver, superuser):
    principal, tool = setup
    request = approved_request(principal, tool, approver)
    classify(
        tool.policy,
        actor=superuser,
        operation_class="execute",
        reversibility="irreversible",
        risk="critical",
    )
    with pytest.raises(ApprovalError) as exc:
        approval_consume(approval_id=request.approval_id, principal=principal, tool=tool, arguments=ARGS_A)
    assert exc.value.code == "policy_changed"


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"x": float("nan")}, "NaN"),
        ({"x": float("inf")}, "NaN or Infinity"),
        ({"x": {1, 2}}, "set"),
        ({"x": object()}, "object"),
        ({1: "a"}, "keys must be strings"),
        ([1, 2], "must be a JSON object"),
        ("text", "must be a JSON object"),
    ],
)
def test_uncanonicalizable_arguments_give_a_clear_error(setup, arguments, message):
    principal, tool = setup
    with pytest.raises(ArgumentsNotCanonical) as exc:
        call_authorize(principal=principal, tool_id=tool.tool_id, arguments=arguments)
    assert message in str(exc.value)
    assert ApprovalRequest.objects.count() == 0


def test_deeply_nested_arguments_fail_fast_without_recursion_error(setup):
    principal, tool = setup
    deep: dict = {}
    node = deep
    for _ in range(10_000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(ArgumentsNotCanonical, match="nested deeper"):
        call_authorize(principal=principal, tool_id=tool.tool_id, arguments=deep)


def test_big_integers_and_negative_zero_are_preserved_exactly():
    assert arguments_digest({"n": 2**64}) != arguments_digest({"n": 2**64 + 1})
    assert arguments_digest({"z": -0.0}) != arguments_digest({"z": 0.0})


def test_the_digest_is_of_the_value_sent_whatever_its_spelling_in_the_request():
    """redteam49: an approval is for the value the upstream is sent, which the gateway re-serialises from the parsed
    request: 1 and 1.0 are different values (an integer, a float: sent as written), while 1.0, 1.00 and 10e-1 are one
    float (sent as 1.0) and an object's key order is no part of its value. So an approval of one spelling covers
    exactly the others the upstream cannot tell from it, never a different value."""

    def digest(raw: str) -> str:
        return arguments_digest(json.loads(raw))

    assert digest('{"n": 1}') != digest('{"n": 1.0}')
    assert digest('{"n": 1.0}') == digest('{"n": 1.00}') == digest('{"n": 10e-1}')
    assert json.dumps(json.loads('{"n": 10e-1}')) == '{"n": 1.0}'  # what is sent and shown to the approver
    assert digest('{"a": 1, "b": [2, {"c": 3, "d": 4}]}') == digest('{"b": [2, {"d": 4, "c": 3}], "a": 1}')
    assert digest('{"b": [1, 2]}') != digest('{"b": [2, 1]}')  # an array's order is its value
    assert digest('{"s": "caf\\u00e9"}') != digest('{"s": "cafe\\u0301"}')  # no Unicode normalisation


def test_tool_without_annotations_needs_approval(mutating_tool):
    assert policy_for_tool(mutating_tool).needs_approval is True


def test_read_hint_overridden_by_admin_as_mutating_needs_approval(superuser, tool):
    assert policy_for_tool(tool).needs_approval is False  # readOnlyHint upstream
    classify(
        tool.policy,
        actor=superuser,
        operation_class="write",
        reversibility="compensatable",
        risk="moderate",
    )
    assert policy_for_tool(tool).needs_approval is True


def test_read_only_low_risk_tool_runs_without_approval(member, grant, server, tool):
    from tests.governance.conftest import as_principal

    grant(member, server, "discover", "execute")
    decision = call_authorize(principal=as_principal(member), tool_id=tool.tool_id, arguments={"q": "bug"})
    assert decision.allowed and decision.approval is None


def test_hidden_tool_call_is_not_found_and_creates_nothing(member_token, mutating_tool):
    _, _, principal = member_token
    with pytest.raises(ToolNotFound):
        call_authorize(principal=principal, tool_id=mutating_tool.tool_id, arguments=ARGS_A)
    assert ApprovalRequest.objects.count() == 0


def _expiries(request: ApprovalRequest) -> list[tuple[str, str, str, str]]:
    """The ``approval.expired`` events of ``request``: who, why, what it was, whose."""
    events = AuditEvent.objects.filter(event_type="approval.expired", approval_ref=request.approval_id)
    return [(e.human_subject, e.payload["reason"], e.payload["status"], e.payload["requester"]) for e in events]


def test_revoking_execute_voids_pending_and_approved_requests(setup, approver, superuser):
    from governance.services.permissions import permission_revoke

    principal, tool = setup
    approved = approved_request(principal, tool, approver)
    pending = approval_request_create(principal=principal, tool=tool, arguments=ARGS_B)
    permission_revoke(actor=superuser, target=tool.server, action="execute", holder=principal.user)
    approved.refresh_from_db()
    pending.refresh_from_db()
    assert approved.status == pending.status == ApprovalStatus.EXPIRED
    assert [reason for _, reason, _, _ in _expiries(approved) + _expiries(pending)] == ["requester_lost_access"] * 2
    with pytest.raises(ApprovalError) as exc:
        approval_consume(approval_id=approved.approval_id, principal=principal, tool=tool, arguments=ARGS_A)
    assert exc.value.code == "expired"


def test_expire_task_marks_stale_requests_and_the_trail_says_why(setup, approver):
    """A request the sweep expires leaves the inbox with an ``approval.expired`` event on its history, as an approver
    reads it: before, it vanished with nothing on the record saying why."""
    from governance.selectors.audit import approval_request_history
    from governance.tasks import expire_approvals

    principal, tool = setup
    request = approved_request(principal, tool, approver)
    pending = approval_request_create(principal=principal, tool=tool, arguments=ARGS_B)
    ApprovalRequest.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert task_result(expire_approvals.delay()) == 2
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXPIRED
    assert _expiries(request) == [("system", "timed_out", "approved", principal.user.username)]
    assert _expiries(pending) == [("system", "timed_out", "pending", principal.user.username)]
    history = approval_request_history(user=approver, approval_id=pending.approval_id)
    assert [event.event_type for event in history] == ["approval.requested", "approval.expired"]
    assert history[-1].tool_ref == tool.tool_id and history[-1].policy_version == pending.policy_version.number
    assert task_result(expire_approvals.delay()) == 0
    assert len(_expiries(request)) == len(_expiries(pending)) == 1  # once


def test_someone_in_the_requests_delegation_chain_cannot_approve_it(setup, approver):
    principal, tool = setup
    delegated = Principal(
        user=principal.user,
        token_id=principal.token_id,
        agent=principal.agent,
        tenant=principal.tenant,
        scopes=principal.scopes,
        delegation_chain=("user:approver", *principal.delegation_chain),
    )
    request = approval_request_create(principal=delegated, tool=tool, arguments=ARGS_A)
    with pytest.raises(ApprovalError) as exc:
        approval_decide(request=request, approver=approver, approve=True, reason="")
    assert exc.value.code == "self_approval"


def test_overlong_delegation_chain_is_refused(setup):
    principal, tool = setup
    deep = Principal(
        user=principal.user,
        token_id=principal.token_id,
        agent=principal.agent,
        tenant=principal.tenant,
        scopes=principal.scopes,
        delegation_chain=tuple(f"agent:hop{i}" for i in range(20)),
    )
    with pytest.raises(ApprovalError) as exc:
        approval_request_create(principal=deep, tool=tool, arguments=ARGS_A)
    assert exc.value.code == "forbidden"
    assert ApprovalRequest.objects.count() == 0


def _delete_execute_grant_behind_the_services_back(user) -> None:
    """Access removed as ``manage.py shell`` would: the grant row deleted, no permission_revoke (no voiding)."""
    from governance.models import ServerUserObjectPermission

    assert ServerUserObjectPermission.objects.filter(user=user, permission__codename="execute_server").delete()[0]


def test_an_approval_is_void_on_use_when_its_requester_lost_access_by_any_path(setup, approver):
    principal, tool = setup
    request = approved_request(principal, tool, approver)
    _delete_execute_grant_behind_the_services_back(principal.user)
    request.refresh_from_db()
    assert request.status == ApprovalStatus.APPROVED  # nothing voided it yet
    with pytest.raises(ApprovalError) as exc:
        approval_consume(approval_id=request.approval_id, principal=principal, tool=tool, arguments=ARGS_A)
    assert exc.value.code == "requester_lost_access"
    request.refresh_from_db()
    assert request.status == ApprovalStatus.EXPIRED
    assert AuditEvent.objects.filter(event_type="approval.rejected", approval_ref=request.approval_id).exists()


def test_a_request_whose_requester_lost_access_cannot_be_approved_and_the_sweep_voids_the_rest(setup, approver):
    from governance.tasks import expire_approvals

    principal, tool = setup
    approved = approved_request(principal, tool, approver)
    pending = approval_request_create(principal=principal, tool=tool, arguments=ARGS_B)
    _delete_execute_grant_behind_the_services_back(principal.user)
    with pytest.raises(ApprovalError) as exc:
        approval_decide(request=pending, approver=approver, approve=True, reason="ok")
    assert exc.value.code == "requester_lost_access"
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.EXPIRED
    assert task_result(expire_approvals.delay()) == 1  # the approved one, which is unexpired by time
    approved.refresh_from_db()
    assert approved.status == ApprovalStatus.EXPIRED
    for request, status in ((pending, "pending"), (approved, "approved")):
        assert _expiries(request) == [("system", "requester_lost_access", status, principal.user.username)]


def _server_status(tool, status: ServerStatus) -> None:
    server = tool.server
    server.status = status
    server.save()


@pytest.mark.parametrize("passing", [ServerStatus.DEGRADED, ServerStatus.UNAVAILABLE])
def test_a_server_not_serving_for_now_voids_no_request_and_they_wait_for_it(setup, approver, passing):
    """One failed sync (or an unanswered health check) hides a server's tools but takes no one's access: the sweep
    leaves its open requests, approving says why and keeps the request pending, and once the server is back both are
    decided and used as if nothing happened. A server an operator disabled voids them at once, as lost access does."""
    from governance.tasks import expire_approvals

    principal, tool = setup
    approved = approved_request(principal, tool, approver)
    pending = approval_request_create(principal=principal, tool=tool, arguments=ARGS_B)
    _server_status(tool, passing)
    assert task_result(expire_approvals.delay()) == 0
    with pytest.raises(ApprovalError) as exc:
        approval_decide(request=pending, approver=approver, approve=True, reason="ok")
    assert exc.value.code == "server_not_serving"
    approved.refresh_from_db()
    pending.refresh_from_db()
    assert (approved.status, pending.status) == (ApprovalStatus.APPROVED, ApprovalStatus.PENDING)

    _server_status(tool, ServerStatus.ACTIVE)
    assert approval_decide(request=pending, approver=approver, approve=True, reason="ok").status == "approved"
    used = call_authorize(principal=principal, tool_id=tool.tool_id, arguments=ARGS_A, approval_id=approved.approval_id)
    assert used.allowed

    _server_status(tool, ServerStatus.DISABLED)  # voided at once (redteam55), not left to the sweep
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.EXPIRED
    assert task_result(expire_approvals.delay()) == 0


def _open_requests_of(person, tool, count: int) -> None:
    from governance.principals import principal_for_user

    for n in range(count):
        approval_request_create(principal=principal_for_user(person), tool=tool, arguments={"repo": f"acme/{n}"})


def test_the_sweep_judges_open_requests_a_page_at_a_time_in_queries_that_do_not_grow_with_them(
    setup, approver, grant, server, django_user_model, monkeypatch
):
    """Set-based: each page of open requests is judged in a fixed number of queries and expired in one update, so a
    backlog costs per page, not per request; exactly the requests whose requester lost access expire."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from governance.services import approvals
    from governance.services.approvals import approval_expire_stale

    principal, tool = setup
    lost = [django_user_model.objects.create_user(username=f"lost{n}") for n in range(6)]
    for person in lost:
        grant(person, server, "discover", "execute")
    _open_requests_of(principal.user, tool, 3)
    _open_requests_of(lost[0], tool, 2)
    for person in lost:
        _delete_execute_grant_behind_the_services_back(person)

    queries = []
    for more in (lost[1:2], lost[2:]):  # one more person who lost access, then four more with three requests each
        for person in more:
            _open_requests_of(person, tool, 3)
        with CaptureQueriesContext(connection) as captured:
            approval_expire_stale()
        queries.append(len(captured))
    assert queries[0] == queries[1]  # 5 requests and 5 askers, then 12 and 4 others: the same queries
    monkeypatch.setattr(approvals, "EXPIRE_PAGE", 2)
    _open_requests_of(lost[0], tool, 3)
    assert approval_expire_stale() == 3  # across pages of two: the member's three stay open
    still_open = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING)
    assert set(still_open.values_list("requester", flat=True)) == {principal.user.pk} and still_open.count() == 3
    assert ApprovalRequest.objects.filter(status=ApprovalStatus.EXPIRED).count() == 2 + 3 + 12 + 3


def test_a_request_asked_with_a_token_revoked_or_expired_since_is_not_usable(setup, approver):
    """Only the token that asked may use an approval (approval_consume): once it is revoked or expired the call
    can never run, so the inbox must not count its request usable, nor may an approver approve it."""
    from governance.models import ApiToken
    from governance.selectors import approval_requester_may_execute, approval_requests_usable
    from governance.services.tokens import api_token_create, api_token_revoke, api_token_verify

    principal, tool = setup
    asked = {"live": approval_request_create(principal=principal, tool=tool, arguments=ARGS_A)}
    for name in ("revoked", "expired"):
        token, raw = api_token_create(
            user=principal.user, name=name, scopes=["discover", "execute"], expires_at=timezone.now() + timedelta(1)
        )
        asked[name] = approval_request_create(principal=api_token_verify(raw), tool=tool, arguments=ARGS_A)
        if name == "revoked":
            api_token_revoke(token=token)
        else:
            ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert len({request.pk for request in asked.values()}) == 3
    assert approval_requests_usable(requests=asked.values()) == {asked["live"].pk}
    assert not approval_requester_may_execute(request=asked["revoked"])
    with pytest.raises(ApprovalError) as exc:
        approval_decide(request=asked["expired"], approver=approver, approve=True, reason="ok")
    assert exc.value.code == "requester_lost_access"


def test_leaving_a_tenant_or_a_group_deleted_voids_the_requests_it_gave_access_for_at_once(
    approver, grant, server, mutating_tool, django_user_model
):
    """redteam54 (Z6): access lost by leaving a tenant (or a group, tests/mcpgateway/test_approval_attacks.py) or by
    the group's deletion voids the requester's open requests then, audited, as a revoked grant does; left to the
    sweep, an approval outlived a membership taken and given back meanwhile. Whoever keeps access keeps theirs."""
    from django.contrib.auth.models import Group

    from governance.models import ServerTenant
    from governance.principals import principal_for_user
    from tests.governance.factories import tenant_with

    acme = tenant_with("acme", approver)
    ServerTenant.objects.create(server=server, tenant=acme)
    grant(approver, server, "approve")
    stays, leaves, grouped = (django_user_model.objects.create_user(username=n) for n in ("stays", "leaves", "grouped"))
    acme.members.add(stays, leaves, grouped)
    callers = Group.objects.create(name="callers")
    grouped.groups.add(callers)
    for holder in (stays, leaves, callers):
        grant(holder, server, "discover", "execute")
    asked = {
        person: approved_request(principal_for_user(person), mutating_tool, approver)
        for person in (stays, leaves, grouped)
    }
    acme.members.remove(leaves)
    callers.delete()
    for person, request in asked.items():
        request.refresh_from_db()
        assert request.status == (ApprovalStatus.APPROVED if person is stays else ApprovalStatus.EXPIRED), person
    for person in (leaves, grouped):
        assert _expiries(asked[person]) == [("system", "requester_lost_access", "approved", person.username)]
