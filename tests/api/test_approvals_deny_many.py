"""POST /api/v1/approvals/deny/: the inbox's "Deny selected" over REST. Several requests denied with one reason, each
checked, decided and audited as one denial is; a request outside the caller's inbox reads as an unknown id."""

import pytest

from governance.models import ApprovalRequest, AuditEvent
from governance.services.tokens import api_token_verify
from tests.api.conftest import api_db, error_of, make_token

pytestmark = api_db
UNKNOWN = "apr_AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture
def asked(pending, member):
    """Three pending github requests of ``member``: ``pending`` and two more."""
    from governance.services.approvals import approval_request_create

    principal = api_token_verify(make_token(member, ["discover", "execute"]))
    more = [
        approval_request_create(principal=principal, tool=pending.tool, arguments={"repo": f"r{n}"}) for n in (1, 2)
    ]
    return [pending, *more]


@pytest.fixture
def approver_token(approver, catalog, grant):
    grant(approver, catalog.github, "approve")
    return make_token(approver, ["api", "approve"])


def _statuses(requests) -> list[str]:
    return [ApprovalRequest.objects.get(pk=request.pk).status for request in requests]


def test_denies_the_named_requests_with_one_reason_each_audited(api, asked, approver_token):
    named = [asked[0].approval_id, asked[2].approval_id]
    response = api.post("approvals/deny/", token=approver_token, json={"approval_ids": named, "reason": "incident 42"})
    assert response.status_code == 200, response.text
    assert response.json() == {
        "denied": 2,
        "results": [{"approval_id": named[0], "outcome": "denied"}, {"approval_id": named[1], "outcome": "denied"}],
    }
    assert _statuses(asked) == ["denied", "pending", "denied"]
    assert set(ApprovalRequest.objects.filter(status="denied").values_list("decision_reason", flat=True)) == {
        "incident 42"
    }
    events = AuditEvent.objects.filter(event_type="approval.denied")
    assert sorted(events.values_list("approval_ref", flat=True)) == sorted(named)
    token_ref = api_token_verify(approver_token).token_ref
    assert set(events.values_list("token_ref", flat=True)) == {token_ref}  # decided by this token (T15)


def test_a_denial_needs_a_reason_and_denies_none_without_one(api, asked, approver_token):
    ids = [request.approval_id for request in asked]
    for body in ({"approval_ids": ids}, {"approval_ids": ids, "reason": "  "}):
        response = api.post("approvals/deny/", token=approver_token, json=body)
        assert response.status_code == 400 and "reason" in error_of(response)["fields"], response.text
    assert _statuses(asked) == ["pending"] * 3


def test_a_request_outside_the_inbox_reads_as_an_unknown_id_and_is_not_denied(
    api, asked, member, catalog, grant, approver_token
):
    """Without the approve right on its server (payroll), a request is neither denied nor said to exist."""
    from governance.services.approvals import approval_request_create
    from tests.governance.factories import ToolFactory

    grant(member, catalog.payroll, "discover", "execute")
    principal = api_token_verify(make_token(member, ["discover", "execute"]))
    payroll = approval_request_create(
        principal=principal, tool=ToolFactory(server=catalog.payroll, name="pay", annotations=None), arguments={}
    )
    named = [payroll.approval_id, UNKNOWN, asked[1].approval_id]
    response = api.post("approvals/deny/", token=approver_token, json={"approval_ids": named, "reason": "no"})
    assert response.json()["results"] == [
        {"approval_id": payroll.approval_id, "outcome": "not_found"},
        {"approval_id": UNKNOWN, "outcome": "not_found"},
        {"approval_id": asked[1].approval_id, "outcome": "denied"},
    ]
    assert _statuses([payroll]) == ["pending"]


def test_someone_who_approves_nothing_denies_nothing(api, asked, outsider):
    token = make_token(outsider, ["api", "approve"])
    ids = [request.approval_id for request in asked]
    response = api.post("approvals/deny/", token=token, json={"approval_ids": ids, "reason": "no"})
    assert response.status_code == 200
    assert response.json() == {"denied": 0, "results": [{"approval_id": i, "outcome": "not_found"} for i in ids]}
    assert _statuses(asked) == ["pending"] * 3


def test_needs_the_approve_scope(api, asked, approver, catalog, grant):
    grant(approver, catalog.github, "approve")
    token = make_token(approver, ["api", "discover"])
    response = api.post("approvals/deny/", token=token, json={"approval_ids": [asked[0].approval_id], "reason": "x"})
    assert response.status_code == 403 and error_of(response)["code"] == "insufficient_scope"
    assert _statuses(asked) == ["pending"] * 3


def test_says_why_a_request_was_not_denied(api, asked, member, catalog, grant, approver_token):
    """Decided meanwhile: not_pending; one's own request (the requester approves github too): self_approval."""
    first = api.post(
        "approvals/deny/", token=approver_token, json={"approval_ids": [asked[0].approval_id], "reason": "first"}
    )
    assert first.json()["denied"] == 1
    again = api.post(
        "approvals/deny/", token=approver_token, json={"approval_ids": [asked[0].approval_id], "reason": "again"}
    )
    assert again.json()["results"] == [{"approval_id": asked[0].approval_id, "outcome": "not_pending"}]
    grant(member, catalog.github, "approve")
    own = api.post(
        "approvals/deny/",
        token=make_token(member, ["api", "approve"]),
        json={"approval_ids": [asked[1].approval_id], "reason": "mine"},
    )
    assert own.json()["results"] == [{"approval_id": asked[1].approval_id, "outcome": "self_approval"}]
    assert _statuses(asked) == ["denied", "pending", "pending"]


def test_names_at_most_a_hundred_requests_and_at_least_one(api, approver_token):
    for ids in ([], [UNKNOWN] * 101):
        response = api.post("approvals/deny/", token=approver_token, json={"approval_ids": ids, "reason": "x"})
        assert response.status_code == 400 and "approval_ids" in error_of(response)["fields"]
