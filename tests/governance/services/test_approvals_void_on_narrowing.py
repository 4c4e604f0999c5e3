"""redteam55 (Z6): every admin or REST way of losing access to a tool voids the open approvals it took away at once,
audited, not at the sweep's next run (every five minutes): an approval outlived access taken and given back meanwhile.
Whoever keeps access keeps theirs. Leaving a group or tenant: test_approvals.py (redteam54)."""

import pytest
from django.contrib.auth.models import Group

from catalog.definitions import normalize_listing
from catalog.services.apply import catalog_apply_listing
from governance.choices import ApprovalStatus
from governance.models import AgentGrant, Entitlement
from governance.principals import principal_for_user
from governance.services.approvals import ApprovalError
from governance.services.authorize import call_authorize
from governance.services.review import tools_hold_for_signal
from governance.services.tokens import api_token_create, api_token_verify
from tests.governance.factories import agent_of, in_days
from tests.governance.services.test_approvals import ARGS_A, _expiries, approved_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(approver, grant, server, django_user_model):
    """Three people who may execute ``server``'s tools (one through group "callers"); ``approver`` may approve."""
    grant(approver, server, "approve")
    stays, leaves, grouped = (django_user_model.objects.create_user(username=n) for n in ("stays", "leaves", "grouped"))
    callers = Group.objects.create(name="callers")
    grouped.groups.add(callers)
    for holder in (stays, leaves, callers):
        grant(holder, server, "discover", "execute")
    return stays, leaves, grouped, callers


def _asked(people, tool, approver) -> dict:
    return {person: approved_request(principal_for_user(person), tool, approver) for person in people}


def _states(asked: dict) -> dict:
    for request in asked.values():
        request.refresh_from_db()
    return {person.username: request.status for person, request in asked.items()}


def test_taken_out_of_a_required_entitlement_from_either_side_voids_at_once(people, mutating_tool, approver):
    stays, leaves, grouped, callers = people
    writers = Entitlement.objects.create(slug="writers", name="Writers")
    writers.users.add(stays, leaves)
    writers.groups.add(callers)
    mutating_tool.policy.required_entitlements.add(writers)
    asked = _asked((stays, leaves, grouped), mutating_tool, approver)
    writers.users.remove(leaves)  # the admin's form: set() on the entitlement
    callers.entitlements.remove(writers)  # from the group's side
    assert _states(asked) == {"stays": "approved", "leaves": "expired", "grouped": "expired"}
    assert _expiries(asked[leaves]) == [("system", "requester_lost_access", "approved", "leaves")]
    writers.users.add(leaves)  # given back before the sweep: the old approval does not run
    with pytest.raises(ApprovalError) as refused:
        call_authorize(
            principal=principal_for_user(leaves),
            tool_id=mutating_tool.tool_id,
            arguments=ARGS_A,
            approval_id=asked[leaves].approval_id,
        )
    assert refused.value.code == "expired"


def test_an_entitlement_newly_required_voids_the_approvals_of_those_without_it(people, mutating_tool, approver):
    stays, leaves, grouped, _ = people
    asked = _asked((stays, leaves, grouped), mutating_tool, approver)
    writers = Entitlement.objects.create(slug="writers", name="Writers")
    writers.users.add(stays)
    writers.tool_policies.add(mutating_tool.policy)  # from the entitlement's side; the policy admin sets the policy's
    assert _states(asked) == {"stays": "approved", "leaves": "expired", "grouped": "expired"}


def test_an_agents_grant_deleted_or_the_agent_narrowed_voids_its_tokens_approvals(
    people, server, mutating_tool, approver
):
    stays, *_ = people
    narrowed = agent_of(stays, "narrowed")
    grants = [AgentGrant.objects.create(agent=narrowed, server=server, action=a) for a in ("discover", "execute")]
    wide, other = agent_of(stays, "wide", all_user_tools=True), agent_of(stays, "other", all_user_tools=True)
    principals = {}
    for agent in (narrowed, wide, other):
        _, raw = api_token_create(
            user=stays, name=agent.name, agent=agent, scopes=["discover", "execute"], expires_at=in_days(1)
        )
        principals[agent.name] = api_token_verify(raw)
    asked = {name: approved_request(principal, mutating_tool, approver) for name, principal in principals.items()}
    grants[1].delete()  # the agent admin's inline, its row deleted
    other.all_user_tools = False  # the agent admin's form: narrowed to nothing
    other.save()
    for request in asked.values():
        request.refresh_from_db()
    assert {name: r.status for name, r in asked.items()} == {
        "narrowed": ApprovalStatus.EXPIRED,
        "wide": ApprovalStatus.APPROVED,
        "other": ApprovalStatus.EXPIRED,
    }


def test_a_tool_held_voids_its_approvals_at_once(people, mutating_tool, tool, approver):
    stays, *_ = people
    held, kept = (approved_request(principal_for_user(stays), t, approver) for t in (mutating_tool, tool))
    assert tools_hold_for_signal(tool_pks=[mutating_tool.pk], marker="topic-spread") == [mutating_tool.pk]
    held.refresh_from_db()
    kept.refresh_from_db()
    assert (held.status, kept.status) == (ApprovalStatus.EXPIRED, ApprovalStatus.APPROVED)
    assert _expiries(held) == [("system", "requester_lost_access", "approved", "stays")]


def test_a_definition_changed_and_changed_back_leaves_no_approval_from_before(people, server, mutating_tool, approver):
    """Held by a re-sync, released when the upstream goes back to the accepted definition: the approval asked
    before the hold does not run again."""
    stays, *_ = people
    principal = principal_for_user(stays)
    request = approved_request(principal, mutating_tool, approver)
    before = mutating_tool.definition_hash
    for description in ("Deletes a repository and its backups.", mutating_tool.description):
        listing = [{"name": mutating_tool.name, "description": description, "inputSchema": mutating_tool.input_schema}]
        definitions, _, names = normalize_listing(listing, max_bytes=100_000)
        catalog_apply_listing(server=server, definitions=definitions, keep_names=names)
    mutating_tool.refresh_from_db()
    assert mutating_tool.definition_hash == before and not mutating_tool.policy.held
    with pytest.raises(ApprovalError) as refused:
        call_authorize(
            principal=principal, tool_id=mutating_tool.tool_id, arguments=ARGS_A, approval_id=request.approval_id
        )
    assert refused.value.code == "expired"


def test_a_tool_disabled_or_its_server_archived_voids_its_approvals_at_once(people, server, mutating_tool, approver):
    """The tool admin's "enabled" unticked, the server list's "archive" action: each voids the open approvals, so
    re-enabling or restoring before the sweep gives none back."""
    from catalog.services.curation import tool_curation_update
    from catalog.services.servers import server_archive, server_restore

    stays, *_ = people
    principal = principal_for_user(stays)
    disabled = approved_request(principal, mutating_tool, approver)
    tool_curation_update(tool=mutating_tool, enabled=False)
    tool_curation_update(tool=mutating_tool, enabled=True)
    disabled.refresh_from_db()
    assert disabled.status == ApprovalStatus.EXPIRED
    archived = approved_request(principal, mutating_tool, approver, arguments={"repo": "acme/other", "force": True})
    server_archive(server=server)
    server_restore(server=server)
    archived.refresh_from_db()
    assert archived.status == ApprovalStatus.EXPIRED
    for request in (disabled, archived):
        assert _expiries(request) == [("system", "requester_lost_access", "approved", "stays")]


def test_a_person_made_inactive_has_no_approval_left_once_active_again(people, mutating_tool, approver):
    stays, leaves, *_ = people
    asked = _asked((stays, leaves), mutating_tool, approver)
    leaves.is_active = False  # the person's admin form
    leaves.save()
    leaves.is_active = True
    leaves.save()
    assert _states(asked) == {"stays": "approved", "leaves": "expired"}
