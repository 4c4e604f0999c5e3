"""Z12: the audit events of a tenant's approval request stay that tenant's. A request of tenant A on a shared server
decided by an approver acting in no one tenant (a person in several) was audited as shared: every tenant's operators
read the decision, its approval id and the approver's reason."""

import pytest

from governance.principals import principal_for_user
from governance.selectors import audit_events_visible_to
from governance.services.approvals import approval_decide, approval_request_create
from tests.governance.factories import tenant_token, tenant_with

pytestmark = pytest.mark.django_db
REASON = "fine: the acme merger repo is being retired"


def test_a_tenants_approval_decision_is_audited_in_that_tenant(
    member, approver, outsider, grant, server, mutating_tool
):
    _, _, principal = tenant_token(member, "acme")
    grant(member, server, "discover", "execute")
    tenant_with("acme", approver), tenant_with("globex", approver)  # the approver is in two tenants
    grant(approver, server, "approve")
    request = approval_request_create(principal=principal, tool=mutating_tool, arguments={"repo": "acme/site"})
    approval_decide(request=request, approver=approver, approve=True, reason=REASON)
    tenant_with("initech", outsider)
    initech = audit_events_visible_to(principal=principal_for_user(outsider))
    assert not initech.filter(approval_ref=request.approval_id).exists()
    acme = audit_events_visible_to(principal=principal_for_user(member))
    assert acme.filter(approval_ref=request.approval_id, event_type="approval.approved").exists()
