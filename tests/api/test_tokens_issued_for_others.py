"""A token issued for someone else is that person in the REST API and /mcp. An operator (who may issue tokens, but
may neither decide approvals nor act as a superuser) could issue one for an approver with the "approve" scope and
approve their own request through it, or one for a superuser and hold every model permission over REST. The
"approve" scope is now only on tokens a person makes for themselves, and only a superuser issues a token for anyone
else (a superuser's included)."""

import re

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.roles import CURATORS, OPERATORS
from tests.api.conftest import api_db, make_token
from tests.governance.factories import in_days

pytestmark = api_db


@pytest.fixture
def oscar(django_user_model, grant, catalog):
    """An operator (preset role) with a pending request of his own on github, which the approver may approve."""
    from governance.services.approvals import approval_request_create
    from governance.services.tokens import api_token_verify
    from tests.governance.factories import ToolFactory

    oscar = django_user_model.objects.create_user(username="oscar", is_staff=True)
    oscar.groups.add(Group.objects.get(name=OPERATORS))
    tool = ToolFactory(server=catalog.github, name="delete_repo", annotations=None)
    grant(oscar, catalog.github, "discover", "execute")
    principal = api_token_verify(make_token(oscar, ["discover", "execute"]))
    return oscar, approval_request_create(principal=principal, tool=tool, arguments={"repo": "scout"})


def _issue(client, user, scopes) -> str | None:
    """The raw token the admin's add form shows, or None when it refused."""
    response = client.post(
        reverse("admin:governance_apitoken_add"),
        {
            "user": user.pk,
            "name": "for you",
            "base_scopes": scopes,
            "expires_at_0": in_days(7).strftime("%Y-%m-%d"),
            "expires_at_1": "12:00:00",
        },
    )
    found = re.search(r"(scout_[A-Za-z0-9_\-]{40,})", response.content.decode())
    return found.group(1) if found else None


def test_an_operator_cannot_approve_his_own_request_through_a_token_for_an_approver(
    api, client, oscar, approver, catalog, grant, superuser
):
    operator, pending = oscar
    grant(approver, catalog.github, "approve")
    client.force_login(operator)
    raw = _issue(client, approver, ["api", "approve"])
    if raw is not None:
        api.post(f"approvals/{pending.approval_id}/approve/", token=raw, json={})
    pending.refresh_from_db()
    assert pending.status == "pending"
    assert raw is None
    client.force_login(superuser)
    assert _issue(client, approver, ["api", "approve"]) is None  # not even by a superuser: deciding is their own act
    assert _issue(client, approver, ["api", "discover"]) is not None  # other scopes may still be issued for them


def test_an_operator_cannot_issue_a_superusers_token(api, client, oscar, superuser):
    operator, _ = oscar
    client.force_login(operator)
    raw = _issue(client, superuser, ["api", "discover"])
    assert raw is None or api.get("tools/", token=raw).status_code == 401
    client.force_login(superuser)
    assert _issue(client, superuser, ["api", "discover"]) is not None


def test_only_a_superuser_issues_a_token_for_someone_else(
    api, client, oscar, member, catalog, superuser, django_user_model
):
    """A token is its user over /mcp and REST, and the admin shows its raw value to whoever issued it: an operator
    issuing one for a member could search and call tools as that member (their grants, their approvals, their audit
    trail). Only a superuser, who may act for anyone already, issues tokens for other people; people mint their own."""
    operator, _ = oscar
    client.force_login(operator)
    raw = _issue(client, member, ["api", "discover", "execute"])
    assert raw is None or api.get("tools/", token=raw).status_code == 401
    assert _issue(client, operator, ["api", "discover"]) is not None  # his own, as before
    client.force_login(superuser)
    issued = _issue(client, member, ["api", "discover", "execute"])
    assert issued is not None
    assert api.get("tools/", token=issued).status_code == 200
    # A curator's token issued by an operator would curate with the curator's permissions: refused the same way.
    cora = django_user_model.objects.create_user(username="cora", is_staff=True)
    cora.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(operator)
    raw = _issue(client, cora, ["api", "discover"])
    path = f"tools/{catalog.visible.tool_id}/curation/"
    if raw is not None:
        api.patch(path, token=raw, json={"purpose": "whatever the operator says"})
    catalog.visible.refresh_from_db()
    assert catalog.visible.purpose != "whatever the operator says"
    assert raw is None
    own = api.patch(path, token=make_token(cora, ["api", "discover"]), json={"purpose": "cora's own words"})
    assert own.status_code == 200, own.text


def test_whoever_issued_the_requesters_token_cannot_decide_its_requests(
    api, client, oscar, member, approver, catalog, grant, superuser
):
    """A superuser who issues a token for a member holds its raw value and can call tools as that member: the
    requests it raises are the issuer's own calls, so the issuer cannot decide them (four eyes, as for their own
    requests), nor is told of them; another approver decides them as before."""
    from governance.selectors import approval_requests_waiting_for
    from governance.services.approvals import approval_request_create
    from governance.services.notifications import approvers_for
    from governance.services.permissions import permission_grant
    from governance.services.tokens import api_token_verify

    operator, oscars = oscar
    grant(member, catalog.github, "discover", "execute")
    for holder in (superuser, approver):  # another person's grant: it counts for the superuser too
        permission_grant(actor=operator, target=catalog.github, action="approve", holder=holder)
    client.force_login(superuser)
    issued = _issue(client, member, ["discover", "execute"])
    assert issued is not None
    tool = catalog.github.tools.get(name="delete_repo")
    asked = [
        approval_request_create(principal=api_token_verify(issued), tool=tool, arguments={"repo": f"r{n}"})
        for n in range(2)
    ]
    assert superuser not in approvers_for(request=asked[0]) and approver in approvers_for(request=asked[0])
    # Nor counted as waiting for them: only the operator's own request is.
    assert approval_requests_waiting_for(user=superuser) == [oscars]
    assert set(approval_requests_waiting_for(user=approver)) == {oscars, *asked}

    own = make_token(superuser, ["api", "approve"])
    for verb, body in (("approve", {}), ("deny", {"reason": "no"})):
        refused = api.post(f"approvals/{asked[0].approval_id}/{verb}/", token=own, json=body)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "self_approval", refused.text
    decide = reverse("admin:governance_approvalrequest_decide", args=[asked[1].pk])
    page = client.post(decide, {"_approve": "1", "reason": ""})
    assert page.status_code == 403 and "You cannot decide on your own request" in page.content.decode()
    for request in asked:
        request.refresh_from_db()
        assert request.status == "pending"

    decided = api.post(
        f"approvals/{asked[0].approval_id}/approve/", token=make_token(approver, ["api", "approve"]), json={}
    )
    assert decided.status_code == 200 and decided.json()["status"] == "approved"


def test_a_token_minted_through_an_issued_token_is_still_its_issuers(
    api, client, oscar, member, approver, catalog, grant, superuser
):
    """The issued token with the api scope mints another over REST (tokens/): that one is the issuer's too (they
    hold the token that made it), so the requests it raises are still not theirs to decide. Before (redteam29), the
    copy was recorded as made by the member, and the superuser approved their own call through it."""
    from governance.models import ApiToken
    from governance.services.approvals import approval_request_create
    from governance.services.permissions import permission_grant
    from governance.services.tokens import api_token_verify

    operator, _ = oscar
    grant(member, catalog.github, "discover", "execute")
    permission_grant(actor=operator, target=catalog.github, action="approve", holder=superuser)
    client.force_login(superuser)
    issued = _issue(client, member, ["api", "discover", "execute"])
    assert issued is not None
    minted = api.post(
        "tokens/",
        token=issued,
        json={"name": "copy", "scopes": ["discover", "execute"], "expires_at": in_days(1).isoformat()},
    )
    assert minted.status_code == 201, minted.text
    child = minted.json()["token"]
    tool = catalog.github.tools.get(name="delete_repo")
    asked = approval_request_create(principal=api_token_verify(child), tool=tool, arguments={"repo": "scout"})

    refused = api.post(f"approvals/{asked.approval_id}/approve/", token=make_token(superuser, ["api", "approve"]))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "self_approval", refused.text
    asked.refresh_from_db()
    assert asked.status == "pending"
    assert ApiToken.objects.get(pk=minted.json()["id"]).created_by == superuser  # who holds it, as the admin shows
    # The member's own mint (a session, or a token they made) is still theirs.
    own = api.post(
        "tokens/",
        token=make_token(member, ["api", "discover"], days=2),
        json={"name": "mine", "scopes": ["discover"], "expires_at": in_days(1).isoformat()},
    )
    assert own.status_code == 201, own.text
    assert ApiToken.objects.get(pk=own.json()["id"]).created_by == member
