"""/api/v1/approvals/ through a token that can do less than its person: a narrowed agent's token reads only requests for
the tools its agent may discover (Z8: human ∩ agent ∩ token scope), and no agent's token decides any (redteam37)."""

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

    # Its own inbox's request it reads and does not decide (redteam37: test_an_agents_token_decides_nothing).
    assert api.post(f"approvals/{github.approval_id}/approve/", token=token, json={}).status_code == 403
    # The person's own token (no agent) decides both.
    person = make_token(approver, ["api", "approve"])
    for request in (github, payroll):
        assert api.post(f"approvals/{request.approval_id}/approve/", token=person, json={}).status_code == 200


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


@pytest.mark.parametrize("all_user_tools", [True, False])
def test_an_agents_token_decides_nothing(api, requests_on_two_servers, approver, member, catalog, all_user_tools):
    """Redteam37 (T5/Z9): an approval is a person's check on an agent's call, but a token acting for an approver's
    agent (the approve scope its person gave it) approved and denied other people's requests in its inbox, one at a
    time or many at once: an LLM judging arguments another agent wrote, one prompt injection away from approving
    them (200 before). It reads its inbox still; every decision through it is a 403 saying whose act it is, the
    request stays pending and nothing is audited as decided; an unknown id and a request outside its inbox are one
    404 as before (nothing is told); the person's own token decides."""
    from governance.models import AgentGrant, AuditEvent
    from tests.governance.factories import agent_of

    agent = agent_of(approver, "inbox-bot", all_user_tools=all_user_tools)
    if not all_user_tools:
        AgentGrant.objects.create(agent=agent, server=catalog.github, action="discover")
    token = make_token(approver, ["api", "approve"], agent=agent)
    github = requests_on_two_servers["github"]
    listed = api.get("approvals/", token=token).json()["results"]
    assert github.approval_id in [item["approval_id"] for item in listed]
    assert api.get(f"approvals/{github.approval_id}/", token=token).status_code == 200
    for verb, body in (("approve", {}), ("deny", {"reason": "looks wrong"})):
        refused = api.post(f"approvals/{github.approval_id}/{verb}/", token=token, json=body)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["code"] == "agent_decides"
        assert "person's act" in refused.json()["error"]["message"]
    many = api.post("approvals/deny/", token=token, json={"approval_ids": [github.approval_id], "reason": "no"})
    assert many.status_code == 403 and many.json()["error"]["code"] == "agent_decides", many.text
    github.refresh_from_db()
    assert github.status == "pending" and github.decided_by_id is None
    assert not AuditEvent.objects.filter(event_type__in=["approval.approved", "approval.denied"]).exists()
    person = make_token(approver, ["api", "approve"])
    assert api.post(f"approvals/{github.approval_id}/approve/", token=person, json={}).status_code == 200
