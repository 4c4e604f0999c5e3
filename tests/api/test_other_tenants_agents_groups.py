"""Z12 over the REST API, agents and groups: bob-b (tenant B) calls a shared server through his tenant-less agent,
and tenant B's group holds a grant on it. Tenant A's auditor and approver read an agent in another tenant and a
group in another tenant (the audit trail's agent, chain and payload; an approval's agent and chain), never the
names; their own and shared ones stay named. Superusers read every name."""

import pytest
from django.contrib.auth.models import Group

from governance.constants import OTHER_TENANT_AGENT, OTHER_TENANT_GROUP
from governance.services.tokens import api_token_verify
from tests.api.conftest import api_db, give_perms, make_token
from tests.governance.factories import agent_of, tenant_with

pytestmark = api_db
B_AGENT = "b-secret-agent"
B_GROUP = "b-payments-team"


@pytest.fixture
def abroad(catalog, grant, owner, approver, django_user_model):
    from governance.services.approvals import approval_request_create
    from mcpgateway.services.discovery import gateway_search
    from tests.governance.factories import ToolFactory

    bob = django_user_model.objects.create_user(username="bob-b")
    tenant_with("tenant-a", owner, approver)
    tenant_with("tenant-b", bob)
    b_team = Group.objects.create(name=B_GROUP)
    b_team.user_set.add(bob)
    a_team = Group.objects.create(name="a-ops-team")
    a_team.user_set.add(owner)
    grant(b_team, catalog.github, "discover")
    grant(a_team, catalog.github, "discover")
    tool = ToolFactory(server=catalog.github, name="delete_repo", annotations=None)
    grant(bob, catalog.github, "discover", "execute")
    grant(approver, catalog.github, "approve")
    agent = agent_of(bob, B_AGENT, all_user_tools=True)
    principal = api_token_verify(make_token(bob, ["discover", "execute"], agent=agent))
    gateway_search(principal=principal, query="list issues")
    give_perms(owner, "governance.view_auditevent")
    return approval_request_create(principal=principal, tool=tool, arguments={"repo": "scout"})


def test_the_audit_trail_names_no_other_tenants_agent_or_group(api, abroad, owner, superuser):
    auditor = make_token(owner, ["api"])
    (search,) = api.get("audit/?event_type=discovery", token=auditor).json()["results"]
    assert search["agent"] == OTHER_TENANT_AGENT
    assert f"agent:{OTHER_TENANT_AGENT}" in search["delegation_chain"]
    assert api.get(f"audit/{search['id']}/", token=auditor).json()["agent"] == OTHER_TENANT_AGENT
    grants = api.get("audit/?event_type=grant", token=auditor).json()["results"]
    holders = {event["payload"]["holder"] for event in grants}
    assert f"group:{OTHER_TENANT_GROUP}" in holders and "group:a-ops-team" in holders
    everything = api.get("audit/", token=auditor)
    assert everything.status_code == 200
    assert B_AGENT not in everything.text and B_GROUP not in everything.text

    give_perms(superuser, "governance.view_auditevent")
    superuser.is_staff = True
    superuser.save()
    platform = api.get("audit/", token=make_token(superuser, ["api"]))
    assert B_AGENT in platform.text and B_GROUP in platform.text


def test_an_approval_names_no_other_tenants_agent(api, abroad, approver):
    inbox = api.get("approvals/", token=make_token(approver, ["api", "approve"]))
    (item,) = inbox.json()["results"]
    assert item["approval_id"] == abroad.approval_id
    assert item["agent"] == OTHER_TENANT_AGENT and f"agent:{OTHER_TENANT_AGENT}" in item["delegation_chain"]
    assert B_AGENT not in inbox.text
