"""Tenants (Z12) and agents (Z8) in governance's one visibility selector, through real tokens.

Tenant rule: a server, approval or audit event without a tenant is shared; one with a tenant is seen only by
principals acting in it. Agent rule: human ∩ every narrowed agent in the chain ∩ token scopes."""

import pytest
from django.core.exceptions import ValidationError

from catalog.models import Tool
from governance.models import AgentGrant, AuditEvent, ServerTenant
from governance.principals import principal_for_user
from governance.selectors import (
    ToolNotFound,
    approval_requests_for_approver,
    audit_events_visible_to,
    tool_get_for_principal,
    tool_pks_visible_to,
)
from governance.services.approvals import ApprovalError, approval_decide, approval_request_create
from governance.services.audit import audit_record
from governance.services.permissions import permission_grant
from governance.services.tokens import api_token_create, api_token_verify
from tests.governance.factories import GroupFactory, ServerFactory, ToolFactory, agent_of, in_days, tenant_with

pytestmark = pytest.mark.django_db


def token_principal(user, *, agent=None, tenant=None, scopes=("discover", "execute")):
    _, raw = api_token_create(
        user=user, name="t", agent=agent, tenant=tenant, scopes=list(scopes), expires_at=in_days(1)
    )
    principal = api_token_verify(raw)
    assert principal is not None
    return principal


def ids(principal, **kwargs) -> set[str]:
    pks = tool_pks_visible_to(principal=principal, **kwargs)
    return set(Tool.objects.filter(pk__in=pks).values_list("tool_id", flat=True))


@pytest.fixture
def world(member, outsider, grant):
    """member in tenant A, outsider in tenant B, both in one group that holds every server: a grant that
    spans tenants, so only the tenant rule keeps them apart. shared: no tenant; a-srv: A's; b-srv: B's."""
    tenant_a, tenant_b = tenant_with("a", member), tenant_with("b", outsider)
    everyone = GroupFactory(name="everyone")
    member.groups.add(everyone)
    outsider.groups.add(everyone)
    servers = {}
    for slug, tenant in (("shared", None), ("a-srv", tenant_a), ("b-srv", tenant_b)):
        server = ServerFactory(slug=slug)
        if tenant is not None:
            ServerTenant.objects.create(server=server, tenant=tenant)
        ToolFactory(server=server, name="read")
        ToolFactory(server=server, name="write")
        grant(everyone, server, "discover", "execute")
        servers[slug] = server
    return {"a": tenant_a, "b": tenant_b, **servers}


def test_each_tenant_sees_shared_servers_and_its_own_never_the_others(member, outsider, world):
    in_a = token_principal(member, tenant=world["a"])
    in_b = token_principal(outsider, tenant=world["b"])
    assert ids(in_a) == {"shared::read", "shared::write", "a-srv::read", "a-srv::write"}
    assert ids(in_b) == {"shared::read", "shared::write", "b-srv::read", "b-srv::write"}
    assert ids(in_a, permission="execute") == ids(in_a)
    with pytest.raises(ToolNotFound):
        tool_get_for_principal(principal=in_a, tool_id="b-srv::read", permission="discover")


def test_no_tenant_means_shared_servers_only(member, world):
    # The same person without a tenant on the token: only the shared space (a tenant's servers need its tenant).
    assert ids(token_principal(member)) == {"shared::read", "shared::write"}


def test_a_session_sees_every_tenant_its_user_belongs_to(member, world):
    world["b"].members.add(member)
    assert ids(principal_for_user(member)) == {
        f"{s}::{n}" for s in ("shared", "a-srv", "b-srv") for n in ("read", "write")
    }


def test_leaving_a_tenant_makes_its_tokens_refused(member, world):
    _, raw = api_token_create(user=member, name="t", tenant=world["a"], scopes=["discover"], expires_at=in_days(1))
    assert api_token_verify(raw) is not None
    world["a"].members.remove(member)
    assert api_token_verify(raw) is None


def test_tokens_only_for_a_tenant_the_user_belongs_to(member, world):
    with pytest.raises(ValidationError, match="not a member"):
        api_token_create(user=member, name="t", tenant=world["b"], scopes=["discover"], expires_at=in_days(1))


def test_visibility_cache_is_keyed_by_tenant_and_agent(member, world):
    """Two tokens of one person: the cached set of one is never served to the other."""
    world["b"].members.add(member)
    first = ids(token_principal(member, tenant=world["a"]))
    assert ids(token_principal(member, tenant=world["b"])) != first
    narrow = agent_of(member, "narrow", tenant=world["a"])
    AgentGrant.objects.create(agent=narrow, tool=Tool.objects.get(tool_id="a-srv::read"), action="discover")
    assert ids(token_principal(member, agent=narrow)) == {"a-srv::read"}
    # The same principal twice (the second answer may come from the cache) gives the same set.
    principal = token_principal(member, agent=narrow)
    assert ids(principal) == ids(principal) == {"a-srv::read"}
    fingerprint = principal.cache_fingerprint()
    assert f"tn{world['a'].pk}" in fingerprint and f"ag{narrow.pk}" in fingerprint


# --- agents (Z8) ------------------------------------------------------------------------------------------


@pytest.fixture
def own(member, grant):
    """member may discover and execute two tools of "own"; "other" holds a tool member has no grant on."""
    server = ServerFactory(slug="own")
    read, write = ToolFactory(server=server, name="read"), ToolFactory(server=server, name="write")
    foreign = ToolFactory(server=ServerFactory(slug="other"), name="secret")
    grant(member, server, "discover", "execute")
    return {"server": server, "read": read, "write": write, "foreign": foreign}


def test_agent_grant_within_the_humans_narrows(member, own):
    agent = agent_of(member, "reader")
    AgentGrant.objects.create(agent=agent, tool=own["read"], action="discover")
    principal = token_principal(member, agent=agent)
    assert ids(principal) == {"own::read"}
    assert ids(principal, permission="execute") == set()  # discover only
    AgentGrant.objects.create(agent=agent, tool=own["read"], action="execute")
    assert ids(principal, permission="execute") == {"own::read"}


def test_agent_grant_beyond_the_humans_gives_nothing(member, own):
    agent = agent_of(member, "greedy")
    AgentGrant.objects.create(agent=agent, server=own["foreign"].server, action="discover")
    AgentGrant.objects.create(agent=agent, server=own["foreign"].server, action="execute")
    assert ids(token_principal(member, agent=agent)) == set()


def test_an_agent_without_grants_sees_nothing_unless_it_takes_all_its_users_tools(member, own):
    assert ids(token_principal(member, agent=agent_of(member, "bare"))) == set()
    assert ids(token_principal(member, agent=agent_of(member, "full", all_user_tools=True))) == {
        "own::read",
        "own::write",
    }


def test_token_scopes_narrow_the_agent_further(member, own):
    agent = agent_of(member, "both")
    for tool in (own["read"], own["write"]):
        for action in ("discover", "execute"):
            AgentGrant.objects.create(agent=agent, tool=tool, action=action)
    assert ids(token_principal(member, agent=agent), permission="execute") == {"own::read", "own::write"}
    assert ids(token_principal(member, agent=agent, scopes=("discover",)), permission="execute") == set()
    other = ServerFactory(slug="else")
    assert ids(token_principal(member, agent=agent, scopes=("discover", f"server:{other.slug}"))) == set()


def test_a_sub_agent_is_narrowed_by_every_agent_above_it(member, own):
    parent = agent_of(member, "parent")
    AgentGrant.objects.create(agent=parent, tool=own["read"], action="discover")
    child = agent_of(member, "child", parent=parent)
    AgentGrant.objects.create(agent=child, server=own["server"], action="discover")  # wider than its parent
    principal = token_principal(member, agent=child)
    assert ids(principal) == {"own::read"}
    assert principal.delegation_chain == ("user:member", "agent:parent", "agent:child", "scout-gateway")
    # Even a child that takes "all its user's tools" stays within its parent.
    free_child = agent_of(member, "free-child", parent=parent, all_user_tools=True)
    assert ids(token_principal(member, agent=free_child)) == {"own::read"}


def test_delegation_depth_is_capped(member, own, settings):
    settings.SCOUT_DELEGATION_MAX_AGENTS = 2
    top = agent_of(member, "top", all_user_tools=True)
    middle = agent_of(member, "middle", parent=top, all_user_tools=True)
    with pytest.raises(ValidationError, match="limited to 2 agents"):
        agent_of(member, "bottom", parent=middle)
    _, raw = api_token_create(user=member, name="t", agent=middle, scopes=["discover"], expires_at=in_days(1))
    assert api_token_verify(raw) is not None
    settings.SCOUT_DELEGATION_MAX_AGENTS = 1  # lowered after the token was issued: refused from now on
    assert api_token_verify(raw) is None
    with pytest.raises(ValidationError, match="limited to 1 agents"):
        api_token_create(user=member, name="t2", agent=middle, scopes=["discover"], expires_at=in_days(1))


def test_an_agent_acts_for_its_own_user_and_tenant_only(member, outsider, own):
    agent = agent_of(member, "mine")
    with pytest.raises(ValidationError, match="another user"):
        api_token_create(user=outsider, name="t", agent=agent, scopes=["discover"], expires_at=in_days(1))
    elsewhere = tenant_with("elsewhere")
    with pytest.raises(ValidationError, match="not a member"):
        agent_of(member, "foreign", tenant=elsewhere)


# --- approvals and audit --------------------------------------------------------------------------------


def test_approvals_never_cross_tenants(member, outsider, approver, world, superuser):
    """An approver of tenant A, holding approve on every server, sees and decides A's requests only."""
    permission_grant(actor=superuser, target=world["shared"], action="approve", holder=approver)
    world["a"].members.add(approver)
    mutating = ToolFactory(server=world["shared"], name="delete", annotations=None)
    from_a = approval_request_create(principal=token_principal(member, tenant=world["a"]), tool=mutating, arguments={})
    from_b = approval_request_create(
        principal=token_principal(outsider, tenant=world["b"]), tool=mutating, arguments={}
    )
    assert (from_a.tenant, from_b.tenant) == (world["a"], world["b"])
    inbox = set(approval_requests_for_approver(user=approver).values_list("approval_id", flat=True))
    assert inbox == {from_a.approval_id}
    with pytest.raises(ApprovalError) as refused:
        approval_decide(request=from_b, approver=approver, approve=False, reason="not mine")
    assert refused.value.code == "forbidden"


def test_audit_views_show_shared_events_and_the_viewers_tenants(member, outsider, world):
    in_a = token_principal(member, tenant=world["a"])
    in_b = token_principal(outsider, tenant=world["b"])
    a_tool, b_tool = Tool.objects.get(tool_id="a-srv::read"), Tool.objects.get(tool_id="b-srv::read")
    by_a = audit_record(event_type="execution", principal=in_a, tool=a_tool, outcome="success")
    by_b = audit_record(event_type="execution", principal=in_b, tool=b_tool, outcome="success")
    system_on_b = audit_record(event_type="review.held", principal=None, tool=b_tool, outcome="success")
    shared = audit_record(
        event_type="review.held", principal=None, tool=Tool.objects.get(tool_id="shared::read"), outcome="success"
    )
    assert system_on_b.tenant_scope_id == world["b"].pk  # a system event on B's server is B's business
    seen_by_a = set(audit_events_visible_to(principal=in_a).values_list("pk", flat=True))
    seen_by_b = set(audit_events_visible_to(principal=in_b).values_list("pk", flat=True))
    assert {by_a.pk, shared.pk} <= seen_by_a and not {by_b.pk, system_on_b.pk} & seen_by_a
    assert {by_b.pk, system_on_b.pk, shared.pk} <= seen_by_b and by_a.pk not in seen_by_b
    assert AuditEvent.objects.filter(pk=by_a.pk, tenant_scope=world["a"]).exists()


def test_an_operator_of_tenant_a_cannot_grant_tenant_bs_servers(member, outsider, world, django_user_model):
    operator = django_user_model.objects.create_user(username="op-a", is_staff=True)
    world["a"].members.add(operator)
    with pytest.raises(ValidationError, match="no such server"):
        permission_grant(actor=operator, target=world["b-srv"], action="discover", holder=member)
    with pytest.raises(ValidationError, match="not a member"):
        permission_grant(actor=operator, target=world["a-srv"], action="discover", holder=outsider)
    permission_grant(actor=operator, target=world["a-srv"], action="discover", holder=member)  # its own: fine


def test_verifying_a_tenant_agent_token_stays_one_query(member, own, django_assert_num_queries):
    """The hot path: tenant membership and the agent chain (two agents) come with the token in one SELECT."""
    parent = agent_of(member, "parent")
    child = agent_of(member, "child", parent=parent)
    tenant = tenant_with("solo", member)
    _, with_tenant = api_token_create(user=member, name="t", tenant=tenant, scopes=["discover"], expires_at=in_days(1))
    _, with_agents = api_token_create(user=member, name="a", agent=child, scopes=["discover"], expires_at=in_days(1))
    for raw in (with_tenant, with_agents):
        api_token_verify(raw)  # writes last_used_at once
        with django_assert_num_queries(1):
            assert api_token_verify(raw) is not None
