"""One call for the gateway: may this principal run this tool with these arguments now?"""

from dataclasses import dataclass
from typing import Any

from catalog.models import Tool
from governance.models import ApprovalRequest
from governance.principals import Principal
from governance.selectors import tool_get_for_principal
from governance.services.approvals import (
    ApprovalPolicy,
    approval_consume,
    approval_request_create,
    arguments_canonical,
    policy_for_tool,
)


@dataclass(frozen=True)
class CallDecision:
    """``allowed``: execute now (``approval`` is the consumed approval, if one was needed).
    Not allowed: ``approval_request`` is the pending request to show the caller (its ``approval_id``)."""

    allowed: bool
    tool: Tool
    policy: ApprovalPolicy
    approval: ApprovalRequest | None = None
    approval_request: ApprovalRequest | None = None


def call_authorize(
    *, principal: Principal, tool_id: str, arguments: Any, approval_id: str | None = None, trace_id: str = ""
) -> CallDecision:
    """Re-authorize a call (never trusting earlier discovery) and apply the approval policy.

    Raises ToolNotFound (missing, hidden or not executable: one error), ArgumentsNotCanonical,
    ApprovalError (approval unknown, foreign, used, expired, for other arguments, tool or policy changed).
    Writes approval.requested / approval.consumed / approval.rejected / approval.polled audit events; the caller
    records the execution itself with ``audit_record(event_type="execution", ...)`` once the upstream call returns."""
    tool = tool_get_for_principal(principal=principal, tool_id=tool_id, permission="execute")
    return call_decide(principal=principal, tool=tool, arguments=arguments, approval_id=approval_id, trace_id=trace_id)


def call_decide(
    *,
    principal: Principal,
    tool: Tool,
    arguments: Any,
    approval_id: str | None = None,
    trace_id: str = "",
    call_id: str = "",
) -> CallDecision:
    """``call_authorize`` for a tool already re-authorized in this piece of work: ``tool`` must be what
    ``tool_get_for_principal(principal=principal, permission="execute")`` has just returned (the gateway looks
    it up once per call: a second lookup of the same row cost as much as the rest of the call, issue execspeed).
    Applies the approval policy; raises and writes as ``call_authorize`` does (``call_id``: the gateway's call asking
    for approval, in its audit events' payload, ``approval_request_create``)."""
    arguments_canonical(arguments)  # fail early, before any approval is touched
    policy = policy_for_tool(tool)
    if not policy.needs_approval:
        return CallDecision(allowed=True, tool=tool, policy=policy)
    if approval_id is None:
        request = approval_request_create(
            principal=principal, tool=tool, arguments=arguments, trace_id=trace_id, call_id=call_id
        )
        return CallDecision(allowed=False, tool=tool, policy=policy, approval_request=request)
    approval = approval_consume(approval_id=approval_id, principal=principal, tool=tool, arguments=arguments)
    return CallDecision(allowed=True, tool=tool, policy=policy, approval=approval)
