"""Policy versions bump when approval rules change, and are recorded on approvals and audit events."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from catalog.definitions import normalize_listing
from catalog.models import Tool
from catalog.services.apply import catalog_apply_listing
from governance.models import AuditEvent, PolicyVersion, RiskClass, ToolPolicy
from governance.selectors import policy_version_current, tool_pks_visible_to
from governance.services.approvals import approval_request_create, policy_for_tool
from governance.services.policy import (
    risk_class_update,
    tool_policy_ensure,
)
from tests.governance.conftest import as_principal, classify
from tests.governance.factories import ServerFactory

pytestmark = pytest.mark.django_db


def test_four_risk_classes_are_seeded():
    assert list(RiskClass.objects.order_by("rank").values_list("name", flat=True)) == [
        "low",
        "moderate",
        "high",
        "critical",
    ]
    assert PolicyVersion.objects.filter(number=1).exists()


def test_risk_class_rule_change_bumps_the_version_and_is_audited(superuser, mutating_tool):
    before = policy_version_current().number
    high = RiskClass.objects.get(name="high")
    risk_class_update(
        risk_class=high,
        actor=superuser,
        requires_approval=True,
        requires_approval_for_mutating=True,
        approval_ttl=timedelta(minutes=3),
    )
    assert policy_version_current().number == before + 1
    assert policy_for_tool(mutating_tool).ttl == timedelta(minutes=3)
    event = AuditEvent.objects.get(event_type="policy.changed")
    assert event.policy_version == before + 1 and event.payload["risk_class"] == "high"


def test_a_non_positive_approval_ttl_is_refused_on_its_field(superuser):
    """The admin form shows the error beside the TTL field; nothing changes."""
    before = policy_version_current().number
    high = RiskClass.objects.get(name="high")
    stored_ttl = high.approval_ttl
    with pytest.raises(ValidationError) as refused:
        risk_class_update(
            risk_class=high,
            actor=superuser,
            requires_approval=True,
            requires_approval_for_mutating=True,
            approval_ttl=timedelta(0),
        )
    assert refused.value.message_dict == {"approval_ttl": ["must be positive"]}
    assert RiskClass.objects.get(name="high").approval_ttl == stored_ttl
    assert policy_version_current().number == before


def test_an_ensured_policy_is_the_one_its_tool_then_answers(mutating_tool, django_assert_num_queries):
    """A tool without a policy gets one from its definition, and the same tool object answers it from then on
    (approvals and review read ``tool.policy`` after ensuring it)."""
    ToolPolicy.objects.filter(tool=mutating_tool).delete()
    tool = Tool.objects.get(pk=mutating_tool.pk)
    policy = tool_policy_ensure(tool=tool)
    assert policy.pk is not None and policy.risk_class.name == "high"
    with django_assert_num_queries(0):
        assert tool.policy == policy


def test_unchanged_rules_do_not_bump(superuser):
    low = RiskClass.objects.get(name="low")
    before = policy_version_current().number
    risk_class_update(
        risk_class=low,
        actor=superuser,
        requires_approval=low.requires_approval,
        requires_approval_for_mutating=low.requires_approval_for_mutating,
        approval_ttl=low.approval_ttl,
    )
    assert policy_version_current().number == before


def test_approvals_record_the_version_in_force(member_token, superuser, mutating_tool):
    _, _, principal = member_token
    classify(
        mutating_tool.policy,
        actor=superuser,
        operation_class="write",
        reversibility="reversible",
        risk="moderate",
    )
    request = approval_request_create(principal=principal, tool=mutating_tool, arguments={})
    assert request.policy_version == policy_version_current() and request.policy_version.number == 2


def test_risk_class_admin_edit_goes_through_the_service(client, superuser):
    critical = RiskClass.objects.get(name="critical")
    client.force_login(superuser)
    response = client.post(
        reverse("admin:governance_riskclass_change", args=[critical.pk]),
        {
            "description": "prod",
            "requires_approval": "on",
            "requires_approval_for_mutating": "on",
            "approval_ttl": "00:02:00",
        },
    )
    assert response.status_code == 302
    critical.refresh_from_db()
    assert critical.approval_ttl == timedelta(minutes=2)
    assert policy_version_current().number == 2


def test_tombstoned_tool_leaves_the_visible_set_after_commit(member, grant, django_capture_on_commit_callbacks):
    server = ServerFactory(slug="calc")
    listing = [{"name": "add", "description": "Adds."}, {"name": "sub", "description": "Subtracts."}]
    definitions, _, names = normalize_listing(listing, max_bytes=10_000)
    catalog_apply_listing(server=server, definitions=definitions, keep_names=names)
    grant(member, server, "discover")
    principal = as_principal(member)
    assert len(tool_pks_visible_to(principal=principal)) == 2
    definitions, _, names = normalize_listing(listing[:1], max_bytes=10_000)
    with django_capture_on_commit_callbacks(execute=True):
        catalog_apply_listing(server=server, definitions=definitions, keep_names=names)
    assert len(tool_pks_visible_to(principal=principal)) == 1
