"""The audit trail: one append-only AuditEvent per governed action, in the caller's transaction."""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from catalog.models import Server, Tool
from governance.models import ApprovalRequest, AuditEvent
from governance.principals import Principal
from governance.selectors import policy_version_number
from governance.writebehind import write_behind

MAX_TRACE_ID = 200


def _no_nul(value: Any) -> Any:
    """Hostile text may carry NUL, which Postgres text and jsonb refuse; an audit write must never fail on it."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_no_nul(k): _no_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nul(v) for v in value]
    return value


def _tenant_scope_id(
    principal: Principal | None, server: Server | None, approval: ApprovalRequest | None = None
) -> int | None:
    """Whose audit views show an event: the tenant the caller acts in, else the approval request's (deciding a
    tenant's request is that tenant's business, whoever decides it), else the server's (a system or platform action
    on a tenant's server is that tenant's business), else nobody's (shared)."""
    if principal is not None and principal.tenant_id is not None:
        return principal.tenant_id
    if approval is not None and approval.tenant_id is not None:
        return approval.tenant_id
    if server is None or server.pk is None:
        return None
    from governance.selectors import server_tenant_id

    return server_tenant_id(server)


def audit_record(
    *,
    event_type: str,
    principal: Principal | None,
    outcome: str,
    payload: dict[str, Any] | None = None,
    tool: Tool | None = None,
    server: Server | None = None,
    approval: ApprovalRequest | None = None,
    trace_id: str | None = None,
    environment: str | None = None,
    actor: AbstractBaseUser | None = None,
    policy_version: int | None = None,
    deferred: bool = False,
) -> AuditEvent:
    """Write one audit event carrying the identity and delegation envelope.

    ``principal`` is the verified caller (None for system actions such as a sync holding a tool; then
    ``actor`` may name the admin user). Server and environment default to the tool's. The policy version
    defaults to the approval's, else the current one. Runs in the caller's transaction: if the caller rolls
    back, the event goes too, so write it in the same ``atomic`` block as the change it records.
    ``payload`` must be JSON-serializable; keep it small and never put secrets in it.
    ``deferred``: queued and inserted in a batch shortly after (governance/writebehind.py), outside any
    transaction; only for discovery events, never for an execution's (it must be durable before the result).
    """
    event = audit_event_build(
        event_type=event_type,
        principal=principal,
        outcome=outcome,
        payload=payload,
        tool=tool,
        server=server,
        approval=approval,
        trace_id=trace_id,
        environment=environment,
        actor=actor,
        policy_version=policy_version,
    )
    if deferred:
        write_behind().add(event)
        return event
    event.save(force_insert=True)
    return event


def audit_record_many(*, events: list[AuditEvent]) -> list[AuditEvent]:
    """Write events built by ``audit_event_build`` in one bulk insert, in the caller's transaction (a sync
    holding many tools at once). Build them with an explicit ``policy_version`` and ``server`` to keep the
    batch at a bounded number of queries."""
    return AuditEvent.objects.bulk_create(events, batch_size=500)


def audit_event_build(
    *,
    event_type: str,
    principal: Principal | None,
    outcome: str,
    payload: dict[str, Any] | None = None,
    tool: Tool | None = None,
    server: Server | None = None,
    approval: ApprovalRequest | None = None,
    trace_id: str | None = None,
    environment: str | None = None,
    actor: AbstractBaseUser | None = None,
    policy_version: int | None = None,
) -> AuditEvent:
    """An unsaved audit event (see ``audit_record`` for the arguments); ``audit_record_many`` writes a batch."""
    user = principal.user if principal is not None else actor
    if server is None and tool is not None:
        server = tool.server
    if policy_version is None:
        policy_version = approval.policy_version.number if approval is not None else policy_version_number()
    if environment is None:
        environment = server.environment if server is not None else ""
    return AuditEvent(
        created_at=timezone.now(),
        event_type=event_type,
        outcome=outcome,
        user=user if user is not None and user.pk is not None else None,
        human_subject=user.get_username() if user is not None else "system",
        token_ref=principal.token_ref if principal is not None else "",
        agent=principal.agent if principal is not None else "",
        tenant=principal.tenant if principal is not None else "",
        tenant_scope_id=_tenant_scope_id(principal, server, approval),
        delegation_chain=list(principal.delegation_chain) if principal is not None else [],
        target_server=server.slug if server is not None else "",
        tool=tool,
        tool_ref=tool.tool_id if tool is not None else "",
        tool_definition_hash=tool.definition_hash if tool is not None else "",
        environment=environment,
        policy_version=policy_version,
        approval_ref=approval.approval_id if approval is not None else "",
        trace_id=_no_nul(trace_id or "")[:MAX_TRACE_ID],
        payload=_no_nul(payload or {}),
    )
