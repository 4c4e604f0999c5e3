"""/api/v1/approvals/ decided through a token that can do less than its person: a narrowed agent's token reads and
decides only requests for the tools its agent may discover (Z8: human ∩ agent ∩ token scope)."""

import pytest

from governance.services.tokens import api_token_verify
from tests.api.conftest import api_db, make_token

pytestmark = api_db


@pytest.fixture
def requests_on_two_servers(catalog, member, approver, grant):
    """A pending request by ``member`` on github and one on payroll; ``approver`` may approve both servers."""
    from governance.services.approvals import approval_request_create
    from tests.governance.factories import ToolFactory

    principal = api_token_verify(make_token(member, ["discover", "execute"]))
    asked = {}
    for server, name in ((catalog.github, "delete_repo"), (catalog.payroll, "pay_bonus")):
        grant(member, server, "discover", "execute")
        grant(approver, server, "approve")
        tool = ToolFactory(server=server, name=name, annotations=None)
        asked[server.slug] = approval_request_create(principal=principal, tool=tool, arguments={"to": "someone"})
    return asked


def test_a_narrowed_agents_token_decides_only_requests_for_tools_its_agent_may_discover(
    api, requests_on_two_servers, approver, catalog
):
    from governance.models import AgentGrant
    from tests.governance.factories import agent_of

    agent = agent_of(approver, "github-bot")  # narrowed: its own grants, github only
    AgentGrant.objects.create(agent=agent, server=catalog.github, action="discover")
    token = make_token(approver, ["api", "approve"], agent=agent)
    github, payroll = requests_on_two_servers["github"], requests_on_two_servers["payroll"]

    listed = api.get("approvals/", token=token).json()
    assert [item["approval_id"] for item in listed["results"]] == [github.approval_id]
    unknown = api.post("approvals/apr_AAAAAAAAAAAAAAAAAAAAAA/approve/", token=token, json={})
    for verb, body in (("approve", {}), ("deny", {"reason": "no"})):
        refused = api.post(f"approvals/{payroll.approval_id}/{verb}/", token=token, json=body)
        assert unknown.status_code == 404
        assert (refused.status_code, refused.content) == (unknown.status_code, unknown.content)
    assert api.get(f"approvals/{payroll.approval_id}/", token=token).status_code == 404
    payroll.refresh_from_db()
    assert payroll.status == "pending"

    decided = api.post(f"approvals/{github.approval_id}/approve/", token=token, json={})
    assert decided.status_code == 200 and decided.json()["status"] == "approved"
    # The person's own token (no agent) still decides the other one.
    person = make_token(approver, ["api", "approve"])
    assert api.post(f"approvals/{payroll.approval_id}/approve/", token=person, json={}).status_code == 200


def test_the_decision_service_keeps_to_the_deciding_tokens_limits(requests_on_two_servers, approver, catalog):
    """``approval_decide`` judges the token it is given, not only its person (a caller that skipped the inbox)."""
    from governance.models import AgentGrant
    from governance.services.approvals import ApprovalError, approval_decide
    from tests.governance.factories import agent_of

    agent = agent_of(approver, "github-bot")
    AgentGrant.objects.create(agent=agent, server=catalog.github, action="discover")
    narrowed = api_token_verify(make_token(approver, ["api", "approve"], agent=agent))
    github_only = api_token_verify(make_token(approver, ["api", "approve", "server:github"]))
    payroll = requests_on_two_servers["payroll"]
    for principal in (narrowed, github_only):
        with pytest.raises(ApprovalError) as refused:
            approval_decide(request=payroll, approver=approver, approve=True, reason="", principal=principal)
        assert refused.value.code == "forbidden"
    payroll.refresh_from_db()
    assert payroll.status == "pending"
