"""Z12, a request's history on its page: read as its reader may read the audit trail, never wider. Tenant A's
approver reads a shared request of tenant B's person as someone in another tenant's, and not tenant B's decision of
it at all; a superuser reads every step, named."""

import re

import pytest
from django.urls import reverse

from governance.constants import OTHER_TENANT_PERSON
from governance.services.approvals import approval_decide
from tests.governance.admin.test_other_tenants_people import abroad, bobs_request  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def _history(client, request) -> list[str]:
    html = client.get(reverse("admin:governance_approvalrequest_decide", args=[request.pk])).content.decode()
    panel = re.search(r'<div class="scout-panel" id="approval-history">(.*?)</div>', html, re.S).group(1)
    steps = re.findall(r'<li class="history-event">(.*?)</li>', panel, re.S)
    return [" ".join(step.split()).split(" — ", 1)[1] for step in steps]


def test_a_requests_history_is_read_as_the_audit_trail_would_be(client, abroad, bobs_request, superuser):  # noqa: F811
    approval_decide(request=bobs_request, approver=abroad["bea"], approve=False, reason="no")  # tenant B's decision
    client.force_login(abroad["ann"])
    assert _history(client, bobs_request) == [f"Approval requested: pending, {OTHER_TENANT_PERSON}"]

    client.force_login(superuser)
    assert _history(client, bobs_request) == ["Approval requested: pending, bob-b", "Approval denied: success, bea-b"]
