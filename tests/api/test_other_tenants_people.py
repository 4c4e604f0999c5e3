"""Z12 over the REST API: a tenant-less token's audit events and approval requests are shared, but when its
person is tenant B's, a caller of tenant A reads "someone in another tenant" (the audit trail's user, chain and
payload; an approval's requester, chain and decider) and cannot find them by name. Superusers read the names."""

import pytest

from governance.constants import OTHER_TENANT_PERSON
from governance.services.tokens import api_token_verify
from tests.api.conftest import api_db, give_perms, make_token
from tests.governance.factories import tenant_with

pytestmark = api_db


@pytest.fixture
def abroad(catalog, grant, owner, approver, django_user_model):
    """bob-b (tenant B) asks to call a mutating github tool with a tenant-less token; owner and approver are
    tenant A's auditor and approver, bea-b tenant B's approver."""
    from governance.principals import principal_for_user
    from governance.services.approvals import approval_request_create
    from mcpgateway.services.discovery import gateway_search
    from tests.governance.factories import ToolFactory

    bob = django_user_model.objects.create_user(username="bob-b")
    bea = django_user_model.objects.create_user(username="bea-b", is_staff=True)
    tenant_with("tenant-a", owner, approver)
    tenant_with("tenant-b", bob, bea)
    tool = ToolFactory(server=catalog.github, name="delete_repo", annotations=None)
    grant(bob, catalog.github, "discover", "execute")
    grant(approver, catalog.github, "approve")
    grant(bea, catalog.github, "approve")
    principal = api_token_verify(make_token(bob, ["discover", "execute"]))
    gateway_search(principal=principal, query="list issues")
    give_perms(owner, "governance.view_auditevent")
    request = approval_request_create(principal=principal, tool=tool, arguments={"repo": "scout"})
    assert principal_for_user(bob).tenant_ids  # bob-b is tenant B's, his token acts in no tenant
    return {"request": request, "bea": bea}


def test_the_audit_trail_names_another_tenants_person_nowhere(api, abroad, owner, superuser):
    auditor = make_token(owner, ["api"])
    listed = api.get("audit/?event_type=discovery", token=auditor)
    assert listed.status_code == 200
    (event,) = listed.json()["results"]
    assert event["user"] == OTHER_TENANT_PERSON
    assert event["delegation_chain"][0] == f"user:{OTHER_TENANT_PERSON}"
    everything = api.get("audit/", token=auditor)
    assert everything.json()["count"] >= 3  # the token's creation (payload: for whom), the search, the request
    assert "bob-b" not in everything.text
    assert api.get(f"audit/{event['id']}/", token=auditor).json()["user"] == OTHER_TENANT_PERSON
    assert api.get("audit/?user=bob-b", token=auditor).json()["count"] == 0  # not found by name

    give_perms(superuser, "governance.view_auditevent")
    superuser.is_staff = True
    superuser.save()
    platform = make_token(superuser, ["api"])
    assert api.get("audit/?user=bob-b&event_type=discovery", token=platform).json()["results"][0]["user"] == "bob-b"


def test_an_approval_names_another_tenants_requester_and_decider_nowhere(api, abroad, approver):
    request = abroad["request"]
    inbox = make_token(approver, ["api", "approve"])
    body = api.get("approvals/", token=inbox)
    (item,) = body.json()["results"]
    assert item["approval_id"] == request.approval_id and item["requester"] == OTHER_TENANT_PERSON
    assert item["delegation_chain"][0] == f"user:{OTHER_TENANT_PERSON}"
    assert "bob-b" not in body.text
    approved = api.post(f"approvals/{request.approval_id}/approve/", token=inbox, json={})
    assert approved.status_code == 200 and approved.json()["decided_by"] == "approver"
    assert approved.json()["requester"] == OTHER_TENANT_PERSON and "bob-b" not in approved.text

    theirs = make_token(abroad["bea"], ["api", "approve"])  # tenant B's approver reads bob-b, not tenant A's
    decided = api.get(f"approvals/{request.approval_id}/", token=theirs).json()
    assert decided["requester"] == "bob-b" and decided["decided_by"] == OTHER_TENANT_PERSON


def test_the_audit_trail_names_another_tenants_persons_token_nowhere(api, abroad, owner, member, grant, catalog):
    """Their token reference (``tok-<id>``) groups a masked person's events as a name would: shown empty where the
    person is someone in another tenant; a visible person's is shown."""
    from mcpgateway.services.discovery import gateway_search

    grant(member, catalog.github, "discover")
    tenant_with("tenant-a", member)
    visible = api_token_verify(make_token(member, ["discover"]))
    gateway_search(principal=visible, query="list issues")
    bob = api_token_verify(make_token(abroad["request"].requester, ["discover"]))
    gateway_search(principal=bob, query="list issues")

    listed = api.get("audit/?event_type=discovery", token=make_token(owner, ["api"]))
    assert listed.status_code == 200
    refs = {event["user"]: event["token_ref"] for event in listed.json()["results"]}
    assert refs == {OTHER_TENANT_PERSON: "", "member": visible.token_ref}
    assert bob.token_ref not in listed.text and abroad["request"].token_ref not in listed.text
