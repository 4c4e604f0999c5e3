"""An operator of tenant A in a real browser: a shared server's page and the grant and token lists show the
people of tenant A and shared people, never tenant B's (nor who in tenant B made a grant or a token)."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from governance.models import Agent, ApiToken, ServerUserObjectPermission, ToolUserObjectPermission
from governance.services.tokens import api_token_create
from tests.governance.factories import ToolFactory

from .conftest import OPERATOR_A, admin_login, click_through, find_now, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def shared_server(shared_server_tenants):
    world = shared_server_tenants(tenant_a=("alice-a",), tenant_b=("bob-b", "op-bravo"), shared=("sam-shared",))
    alice, bob, sam, op_b = (world.people[name] for name in ("alice-a", "bob-b", "sam-shared", "op-bravo"))
    server = world.server
    tool = ToolFactory(server=server, name="shared_tool")
    discover, discover_tool = (Permission.objects.get(codename=f"discover_{m}") for m in ("server", "tool"))
    for person, granter in ((alice, None), (sam, op_b), (bob, op_b)):
        ServerUserObjectPermission.objects.create(
            user=person, permission=discover, content_object=server, granted_by=granter
        )
        ToolUserObjectPermission.objects.create(
            user=person, permission=discover_tool, content_object=tool, granted_by=granter
        )
        Agent.objects.create(user=person, name=f"{person.username} agent")  # in no tenant: shared
    expires = timezone.now() + timedelta(days=1)
    for person in (sam, bob):
        token, _ = api_token_create(
            user=person, name=f"{person.username} laptop", scopes=["discover"], expires_at=expires
        )
        # Issued by op_b before only superusers issued tokens for others: such rows remain.
        ApiToken.objects.filter(pk=token.pk).update(created_by=op_b)
    return server


def _show(browser, element_id: str) -> None:
    browser.execute_script(f"document.getElementById('{element_id}').scrollIntoView()")


def _body(browser) -> str:
    return browser.find_element("tag name", "body").text


def test_an_operator_reads_no_other_tenants_people_on_shared_pages(browser, live_server, shared_server):
    admin_login(browser, live_server.url, *OPERATOR_A)

    browser.get(f"{live_server.url}/admin/catalog/server/{shared_server.pk}/change/")
    page = _body(browser)
    assert "alice-a" in page and "sam-shared" in page and "bob-b" not in page
    _show(browser, "user_grants-group")
    screenshot(browser, "tenant-a-operator-shared-server-access")

    tool = shared_server.tools.get()
    browser.get(f"{live_server.url}/admin/catalog/tool/{tool.pk}/change/")
    page = _body(browser)
    assert "alice-a" in page and "sam-shared" in page and "bob-b" not in page
    _show(browser, "user_grants-group")
    screenshot(browser, "tenant-a-operator-shared-tool-access")

    for model in ("serveruserobjectpermission", "tooluserobjectpermission"):
        browser.get(f"{live_server.url}/admin/governance/{model}/")
        page = _body(browser)
        assert "alice-a" in page and "sam-shared" in page and "someone in another tenant" in page, model
        assert "bob-b" not in page and "op-bravo" not in page, model
        screenshot(browser, f"tenant-a-operator-{model}-list")

    browser.get(f"{live_server.url}/admin/governance/agent/")
    page = _body(browser)
    assert "alice-a agent" in page and "sam-shared agent" in page and "bob-b" not in page
    screenshot(browser, "tenant-a-operator-agents")

    browser.get(f"{live_server.url}/admin/governance/apitoken/")
    page = _body(browser)
    assert "sam-shared laptop" in page and "bob-b" not in page
    click_through(browser, browser.find_element("link text", "sam-shared laptop"))
    page = _body(browser)
    assert "someone in another tenant" in page and "op-bravo" not in page
    assert not find_now(browser, "name", "created_by")  # read-only, not a choice
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    screenshot(browser, "tenant-a-operator-shared-token")


@pytest.fixture
def shared_calls(shared_server_tenants, django_user_model):
    """bob-b (tenant B) searches and asks to call a shared server's mutating tool with a tenant-less token; a
    tenant B operator bumped the policy; op-alpha is tenant A's operator and approver."""
    from governance.principals import principal_for_user
    from governance.services.approvals import approval_request_create
    from governance.services.audit import audit_record
    from governance.services.permissions import permission_grant
    from governance.services.policy import policy_version_bump
    from governance.services.tokens import api_token_verify

    world = shared_server_tenants(tenant_b=("bob-b", "op-bravo"))
    operator, bob, op_b = world.operator, world.people["bob-b"], world.people["op-bravo"]
    root = django_user_model.objects.create_superuser(username="root", email=None, password=None)
    server = world.server
    tool = ToolFactory(server=server, name="delete_repo", annotations=None)
    for action in ("discover", "execute"):
        permission_grant(actor=root, target=server, action=action, holder=bob)
    permission_grant(actor=root, target=server, action="approve", holder=operator)
    _, raw = api_token_create(
        user=bob, name="bob laptop", scopes=["discover", "execute"], expires_at=timezone.now() + timedelta(days=1)
    )
    principal = api_token_verify(raw)
    audit_record(event_type="discovery", principal=principal, tool=tool, outcome="success", payload={})
    request = approval_request_create(principal=principal, tool=tool, arguments={"repo": "scout"})
    policy_version_bump(reason="tenant B reclassified a tool", actor=op_b)
    assert principal_for_user(bob).tenant_ids
    return request


def test_an_operator_reads_no_other_tenants_person_in_audit_approvals_and_policy(browser, live_server, shared_calls):
    from governance.models import AuditEvent

    admin_login(browser, live_server.url, *OPERATOR_A)
    someone = "someone in another tenant"

    browser.get(f"{live_server.url}/admin/")
    page = _body(browser)
    assert "shared-srv::delete_repo" in page and someone in page and "bob-b" not in page
    screenshot(browser, "tenant-a-operator-home-approvals")

    browser.get(f"{live_server.url}/admin/governance/auditevent/")
    page = _body(browser)
    assert someone in page and "bob-b" not in page and "op-bravo" not in page
    screenshot(browser, "tenant-a-operator-audit-list")
    event = AuditEvent.objects.get(event_type="discovery")
    browser.get(f"{live_server.url}/admin/governance/auditevent/{event.pk}/change/")
    page = _body(browser)
    assert someone in page and "bob-b" not in page
    screenshot(browser, "tenant-a-operator-audit-event")

    browser.get(f"{live_server.url}/admin/governance/approvalrequest/")
    page = _body(browser)
    assert shared_calls.approval_id in page and someone in page and "bob-b" not in page
    screenshot(browser, "tenant-a-approver-inbox")
    browser.get(f"{live_server.url}/admin/governance/approvalrequest/{shared_calls.pk}/decide/")
    page = _body(browser)
    assert f"human subject: {someone}" in page and "bob-b" not in page
    screenshot(browser, "tenant-a-approver-decide-page")

    browser.get(f"{live_server.url}/admin/governance/policyversion/")
    page = _body(browser)
    assert "tenant B reclassified a tool" in page and someone in page and "op-bravo" not in page
    screenshot(browser, "tenant-a-operator-policy-versions")
