"""Every governance admin page checks permissions (Z11-style meta-test), and classification from the admin
goes through the service."""

import pytest
from django.contrib import admin
from django.urls import reverse

from governance.models import AuditEvent, Entitlement, RiskClass, ToolPolicy

pytestmark = pytest.mark.django_db

GOVERNANCE_MODELS = [m for m in admin.site._registry if m._meta.app_label == "governance"]


def test_every_governance_model_is_registered():
    names = {m.__name__ for m in GOVERNANCE_MODELS}
    assert {"ApiToken", "ApprovalRequest", "AuditEvent", "ToolReview", "ToolPolicy", "RiskClass"} <= names


@pytest.mark.parametrize("model", GOVERNANCE_MODELS, ids=lambda m: m.__name__)
def test_changelists_refuse_anonymous_non_staff_and_unprivileged_staff(client, member, owner, model):
    url = reverse(f"admin:governance_{model._meta.model_name}_changelist")
    assert client.get(url).status_code == 302  # to the login page
    client.force_login(member)  # not staff
    assert client.get(url).status_code == 302
    client.force_login(owner)  # staff without any governance permission or grant
    assert client.get(url).status_code == 403


@pytest.mark.parametrize("model", GOVERNANCE_MODELS, ids=lambda m: m.__name__)
def test_changelists_open_for_superuser(client, superuser, model):
    client.force_login(superuser)
    assert client.get(reverse(f"admin:governance_{model._meta.model_name}_changelist")).status_code == 200


def test_tool_policy_admin_classification_wins_and_is_audited(client, superuser, tool):
    client.force_login(superuser)
    policy = ToolPolicy.objects.get(tool=tool)
    critical = RiskClass.objects.get(name="critical")
    response = client.post(
        reverse("admin:governance_toolpolicy_change", args=[policy.pk]),
        {
            "operation_class": "execute",
            "reversibility": "irreversible",
            "risk_class": critical.pk,
            "allowed_environments": '["production"]',
            "data_classes": '["pii"]',
        },
    )
    assert response.status_code == 302, response.content[:2000]
    policy.refresh_from_db()
    assert policy.classified_by_admin and policy.classified_by == superuser
    assert (policy.operation_class, policy.risk_class, policy.data_classes) == ("execute", critical, ["pii"])
    assert AuditEvent.objects.filter(event_type="policy.changed", tool_ref=tool.tool_id).exists()


def test_entitlement_admin_changes_are_audited(client, superuser, member):
    client.force_login(superuser)
    response = client.post(
        reverse("admin:governance_entitlement_add"),
        {"slug": "payments", "name": "Payments", "description": "", "users": [member.pk], "groups": []},
    )
    assert response.status_code == 302, response.content[:2000]
    assert list(Entitlement.objects.get(slug="payments").users.all()) == [member]
    event = AuditEvent.objects.get(event_type="entitlement.changed")
    assert event.payload == {"entitlement": "payments", "users": ["member"], "groups": []}


def test_tool_policy_page_lists_who_has_access(client, superuser, member, grant, server, tool):
    grant(member, server, "discover")
    client.force_login(superuser)
    page = client.get(reverse("admin:governance_toolpolicy_change", args=[ToolPolicy.objects.get(tool=tool).pk]))
    html = page.content.decode()
    assert "user member: discover (on the server)" in html
    assert f"/admin/governance/tooluserobjectpermission/add/?content_object={tool.pk}" in html


def test_tool_policy_names_are_edited_comma_separated(client, superuser, tool):
    """The help said "e.g. pii, financial, secrets" and the form refused just that ("Enter a valid JSON"): the
    environments and data classes are edited as names, comma-separated (a JSON list is still read)."""
    client.force_login(superuser)
    policy = ToolPolicy.objects.get(tool=tool)
    url = reverse("admin:governance_toolpolicy_change", args=[policy.pk])
    form = {"operation_class": "write", "reversibility": "irreversible", "risk_class": policy.risk_class_id}
    response = client.post(url, {**form, "allowed_environments": "production, staging", "data_classes": "pii,pii"})
    assert response.status_code == 302, response.content[:2000]
    policy.refresh_from_db()
    assert (policy.allowed_environments, policy.data_classes) == (["production", "staging"], ["pii"])
    assert 'value="production, staging"' in client.get(url).content.decode()
    refused = client.post(url, {**form, "allowed_environments": '["production", ', "data_classes": ""})
    assert refused.status_code == 200 and "comma-separated" in refused.content.decode()
