"""/api/v1/approvals/: the caller's inbox, approve, deny with a reason; never one's own request."""

import pytest

from governance.services.tokens import api_token_verify
from tests.api.conftest import api_db, error_of, make_token

pytestmark = api_db


@pytest.fixture
def approver_token(approver, catalog, grant):
    grant(approver, catalog.github, "approve")
    return make_token(approver, ["api", "approve"])


def test_inbox_lists_pending(api, pending, approver_token):
    body = api.get("approvals/", token=approver_token).json()
    assert body["count"] == 1
    item = body["results"][0]
    assert item["approval_id"] == pending.approval_id and item["status"] == "pending"
    assert item["requester"] == "member" and item["arguments"] == {"repo": "scout"}
    assert api.get(f"approvals/{pending.approval_id}/", token=approver_token).json()["tool_id"] == "github::delete_repo"


def test_approve(api, pending, approver_token):
    response = api.post(f"approvals/{pending.approval_id}/approve/", token=approver_token, json={})
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "approved" and response.json()["decided_by"] == "approver"
    assert api.get("approvals/", token=approver_token).json()["count"] == 0
    assert api.get("approvals/?status=approved", token=approver_token).json()["count"] == 1
    again = api.post(f"approvals/{pending.approval_id}/deny/", token=approver_token, json={"reason": "late"})
    assert again.status_code == 409 and error_of(again)["code"] == "not_pending"


def test_deny_needs_a_reason(api, pending, approver_token):
    missing = api.post(f"approvals/{pending.approval_id}/deny/", token=approver_token, json={})
    assert missing.status_code == 400 and "reason" in error_of(missing)["fields"]
    pending.refresh_from_db()
    assert pending.status == "pending"
    denied = api.post(f"approvals/{pending.approval_id}/deny/", token=approver_token, json={"reason": "not today"})
    assert denied.status_code == 200
    assert denied.json()["status"] == "denied" and denied.json()["decision_reason"] == "not today"


def test_requester_cannot_approve_their_own(api, pending, member, catalog, grant):
    grant(member, catalog.github, "approve")
    token = make_token(member, ["api", "approve"])
    assert api.get("approvals/", token=token).json()["count"] == 1
    response = api.post(f"approvals/{pending.approval_id}/approve/", token=token, json={})
    assert response.status_code == 403 and error_of(response)["code"] == "self_approval"
    pending.refresh_from_db()
    assert pending.status == "pending"


def test_non_approver_sees_nothing(api, pending, outsider):
    token = make_token(outsider, ["api", "approve"])
    assert api.get("approvals/", token=token).json()["count"] == 0
    unknown = api.post("approvals/apr_AAAAAAAAAAAAAAAAAAAAAA/approve/", token=token, json={})
    other = api.post(f"approvals/{pending.approval_id}/approve/", token=token, json={})
    assert unknown.status_code == 404
    assert (other.status_code, other.content) == (unknown.status_code, unknown.content)
    pending.refresh_from_db()
    assert pending.status == "pending"


def test_needs_approve_scope(api, pending, approver, catalog, grant):
    grant(approver, catalog.github, "approve")
    token = make_token(approver, ["api", "discover"])
    for response in (
        api.get("approvals/", token=token),
        api.post(f"approvals/{pending.approval_id}/approve/", token=token, json={}),
    ):
        assert response.status_code == 403 and error_of(response)["code"] == "insufficient_scope"
    pending.refresh_from_db()
    assert pending.status == "pending"


def test_bad_status_filter(api, pending, approver_token):
    response = api.get("approvals/?status=whatever", token=approver_token)
    assert response.status_code == 400 and "status" in error_of(response)["fields"]


def test_inbox_pagination(api, pending, approver_token, member):
    from governance.services.approvals import approval_request_create

    principal = api_token_verify(make_token(member, ["discover", "execute"]))
    for n in range(3):
        approval_request_create(principal=principal, tool=pending.tool, arguments={"repo": f"r{n}"})
    body = api.get("approvals/?page_size=3", token=approver_token).json()
    assert body["count"] == 4 and len(body["results"]) == 3 and body["next"]


@pytest.mark.parametrize("approve", [True, False])
def test_a_decision_by_token_is_audited_with_the_token(api, pending, approver, catalog, grant, approve):
    """T15: the trail says a token decided, not that someone did in the admin. (An agent's token decides nothing:
    test_approvals_token_limits.py::test_an_agents_token_decides_nothing.)"""
    from governance.models import AuditEvent

    grant(approver, catalog.github, "approve")
    token = make_token(approver, ["api", "approve"])
    verb = "approve" if approve else "deny"
    response = api.post(f"approvals/{pending.approval_id}/{verb}/", token=token, json={"reason": "checked"})
    assert response.status_code == 200, response.text
    event = AuditEvent.objects.get(event_type="approval.approved" if approve else "approval.denied")
    principal = api_token_verify(token)
    assert event.token_ref == principal.token_ref != ""
    assert event.agent == ""
    assert event.delegation_chain == list(principal.delegation_chain)
    assert "admin" not in event.delegation_chain
