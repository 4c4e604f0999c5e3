"""Audit: one event per governed action, with the full envelope, append-only."""

import pytest
from django.core.exceptions import ValidationError

from governance.choices import AuditEventType
from governance.models import AuditEvent, AuditLogImmutable, Tenant
from governance.selectors import policy_version_current
from governance.services.approvals import approval_consume, approval_decide, approval_request_create
from governance.services.audit import audit_record
from governance.services.permissions import permission_grant, permission_revoke

pytestmark = pytest.mark.django_db


def test_discovery_and_execution_events_carry_the_full_envelope(acme_token, tool):
    _, _, principal = acme_token
    event = audit_record(
        event_type=AuditEventType.EXECUTION,
        principal=principal,
        tool=tool,
        outcome="success",
        payload={"duration_ms": 12},
        trace_id="00-abc-01",
    )
    event.refresh_from_db()
    assert event.envelope == {
        "humanSubject": "member",
        "agentId": "acme-triage",
        "tenantId": "acme",
        "delegationChain": ["user:member", "agent:acme-triage", "scout-gateway"],
        "targetServer": "github",
        "tool": "github::list_issues",
        "environment": "production",
        "policyVersion": policy_version_current().number,
        "approvalId": None,
        "traceId": "00-abc-01",
    }
    assert event.token_ref == principal.token_ref and event.user == principal.user
    assert event.tool_definition_hash == tool.definition_hash
    assert event.tenant_scope_id == principal.tenant_id is not None


def test_grant_and_revoke_write_one_event_each(member, superuser, server):
    before = AuditEvent.objects.count()
    permission_grant(actor=superuser, target=server, action="discover", holder=member)
    permission_revoke(actor=superuser, target=server, action="discover", holder=member)
    events = list(AuditEvent.objects.order_by("id")[before:])
    assert [e.event_type for e in events] == ["grant", "revoke"]
    assert all(e.human_subject == "superuser" and e.target_server == "github" for e in events)
    assert events[0].payload == {"action": "discover", "holder": "user:member", "target": "github", "changed": True}


def test_approval_lifecycle_events_carry_the_approval_id(acme_token, approver, grant, server, mutating_tool):
    _, _, principal = acme_token
    Tenant.objects.get(slug="acme").members.add(approver)  # approvers see only their tenants' requests
    grant(principal.user, server, "discover", "execute")
    grant(approver, server, "approve")
    request = approval_request_create(principal=principal, tool=mutating_tool, arguments={"a": 1})
    approval_decide(request=request, approver=approver, approve=True, reason="fine")
    approval_consume(approval_id=request.approval_id, principal=principal, tool=mutating_tool, arguments={"a": 1})
    events = AuditEvent.objects.filter(approval_ref=request.approval_id).order_by("id")
    assert [e.event_type for e in events] == ["approval.requested", "approval.approved", "approval.consumed"]
    assert [e.human_subject for e in events] == ["member", "approver", "member"]
    assert all(e.policy_version == request.policy_version.number for e in events)
    assert events[0].agent == "acme-triage" and events[0].tenant == "acme"


def test_failed_change_leaves_no_event(member, superuser, server):
    before = AuditEvent.objects.count()
    with pytest.raises(ValidationError, match="administer"):
        permission_grant(actor=superuser, target=server, action="administer", holder=member)
    assert AuditEvent.objects.count() == before


def test_audit_events_cannot_be_updated_or_deleted(member_token, tool):
    _, _, principal = member_token
    event = audit_record(event_type="discovery", principal=principal, tool=tool, outcome="success", payload={})
    event.outcome = "denied"
    with pytest.raises(AuditLogImmutable):
        event.save()
    with pytest.raises(AuditLogImmutable):
        event.delete()
    with pytest.raises(AuditLogImmutable):
        AuditEvent.objects.filter(pk=event.pk).update(outcome="denied")
    with pytest.raises(AuditLogImmutable):
        AuditEvent.objects.filter(pk=event.pk).delete()
    with pytest.raises(AuditLogImmutable):
        AuditEvent.objects.all().delete()
    event.refresh_from_db()
    assert event.outcome == "success"


def test_deleting_a_user_or_tool_keeps_their_events_unchanged(member_token, tool):
    _, _, principal = member_token
    event = audit_record(event_type="discovery", principal=principal, tool=tool, outcome="success", payload={})
    tool.delete()
    principal.user.delete()
    event = AuditEvent.objects.get(pk=event.pk)
    assert event.human_subject == "member" and event.tool_ref == "github::list_issues"


def test_hostile_text_in_payload_and_trace_id_is_recorded_not_refused(member_token, tool):
    _, _, principal = member_token
    event = audit_record(
        event_type="execution",
        principal=principal,
        tool=tool,
        outcome="error",
        payload={"error": "bad\x00byte", "k\x00": ["\x00"]},
        trace_id="t\x00" + "x" * 500,
    )
    event.refresh_from_db()
    assert event.payload == {"error": "bad\ufffdbyte", "k\ufffd": ["\ufffd"]}
    assert len(event.trace_id) == 200 and "\x00" not in event.trace_id


@pytest.mark.skipif(
    __import__("django.db", fromlist=["connection"]).connection.vendor != "postgresql",
    reason="the database-level append-only trigger is installed on Postgres only (CI runs Postgres)",
)
def test_postgres_refuses_raw_sql_update_and_delete(member_token, tool):
    from django.db import DatabaseError, connection, transaction

    _, _, principal = member_token
    event = audit_record(event_type="discovery", principal=principal, tool=tool, outcome="success", payload={})
    for sql in (
        "UPDATE governance_auditevent SET outcome = 'denied' WHERE id = %s",
        "DELETE FROM governance_auditevent WHERE id = %s",
    ):
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [event.pk])
    event.refresh_from_db()
    assert event.outcome == "success"
