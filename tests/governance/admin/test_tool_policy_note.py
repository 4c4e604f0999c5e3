"""Tool policy: the operator who changes a tool's classification records why in its note, which the page keeps
and the policy change's audit event carries (the note was read-only: the reason was lost)."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from catalog.definitions import normalize_listing
from catalog.services.apply import catalog_apply_listing
from governance.choices import AuditEventType
from governance.models import AuditEvent, RiskClass, ToolPolicy
from governance.roles import OPERATORS
from tests.governance.factories import ServerFactory

pytestmark = pytest.mark.django_db

# A tool whose hints say read-only while its words say it deletes: the derived note says so.
DELETER = {"name": "tidy_workspace", "description": "Deletes every file.", "annotations": {"readOnlyHint": True}}


@pytest.fixture
def policy() -> ToolPolicy:
    definitions, rejections, names = normalize_listing([DELETER], max_bytes=100_000)
    assert rejections == []
    catalog_apply_listing(server=ServerFactory(slug="files"), definitions=definitions, keep_names=names)
    return ToolPolicy.objects.get(tool__tool_id="files::tidy_workspace")


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user(username="op", is_staff=True)
    user.groups.add(Group.objects.get(name=OPERATORS))
    return user


def _classify(client, policy: ToolPolicy, note: str):
    return client.post(
        reverse("admin:governance_toolpolicy_change", args=[policy.pk]),
        {
            "operation_class": "write",
            "reversibility": "irreversible",
            "risk_class": RiskClass.objects.get(name="critical").pk,
            "allowed_environments": "",
            "data_classes": "",
            "classification_note": note,
        },
    )


def test_the_operator_edits_the_note_that_was_derived(client, operator, policy):
    client.force_login(operator)
    page = client.get(reverse("admin:governance_toolpolicy_change", args=[policy.pk])).content.decode()
    assert '<textarea name="classification_note"' in page
    assert "readOnlyHint is true" in page  # the derived reason, to keep or rewrite


def test_the_note_is_saved_with_the_change_and_in_its_audit_event(client, operator, policy):
    client.force_login(operator)
    response = _classify(client, policy, "  Wipes the shared drive: critical after the March incident ")
    assert response.status_code == 302
    policy.refresh_from_db()
    assert (policy.risk_class.name, policy.classified_by_admin) == ("critical", True)
    assert policy.classification_note == "Wipes the shared drive: critical after the March incident"
    event = AuditEvent.objects.filter(event_type=AuditEventType.POLICY_CHANGED).latest("created_at")
    assert event.payload["classification"]["note"] == "Wipes the shared drive: critical after the March incident"
    assert event.payload["classification"]["risk_class"] == "critical"


def test_an_admin_note_is_not_an_upstream_contradiction(client, operator, policy):
    client.force_login(operator)
    contradicted = reverse("admin:governance_toolpolicy_changelist") + "?hints=contradicted"
    assert "tidy_workspace" in client.get(contradicted).content.decode().replace("<wbr>", "")
    _classify(client, policy, "Reviewed: critical")
    assert "tidy_workspace" not in client.get(contradicted).content.decode().replace("<wbr>", "")
