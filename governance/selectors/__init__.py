"""Reads: the one visibility selector every surface (admin, search, API, gateway) uses.

Permission model, in short:
- A tool is visible ("discover") to a principal when the user, or one of the user's groups, holds
  ``discover_server`` on its server or ``discover_tool`` on the tool itself (guardian direct-FK grants),
  AND the tool is enabled, not removed, has a policy that is not held for review and accepted its current
  definition (fail closed: no policy or an unreviewed change means invisible), its server is ACTIVE, the
  user holds every entitlement the tool requires, and the token's scopes allow it ("discover";
  "server:<slug>" limits).
- "execute" = visible AND an ``execute_server``/``execute_tool`` grant AND the "execute" scope.
- "approve" (admin inbox) = an ``approve_server``/``approve_tool`` grant; a session, not a token.
- Tenants (Z12), one rule for every row that belongs to a tenant (servers, approvals, audit events): a row
  without a tenant is shared; a row with one is seen only by principals acting in that tenant
  (``tenant_q``). A tool is visible only if its server is. An install without tenants is one shared space.
- Agents (Z8): each agent in the token's chain that is narrowed keeps only the tools its ``AgentGrant`` rows
  name, for that action; the human's grants are still required (human ∩ agents ∩ token scopes).
- Model-level permissions never grant objects (unlike guardian's ``accept_global_perms`` default), and
  superusers get no implicit grants here: an admin sees everything in the admin, but an agent acting for a
  superuser sees only what was granted. Inactive users see nothing.

One module per subject: ``tools`` (servers and tools), ``grants``, ``tenants``, ``approvals``, ``audit``,
``people``, ``agents``, ``groups``, ``tokens``, ``policy``. Import from ``governance.selectors``: every public name
is here.
"""

from .agents import agent_and_agents_below, agent_shown, agents_visible_to_operator
from .approvals import (
    approval_request_groups_usable,
    approval_request_pks_decidable_by,
    approval_requester_may_execute,
    approval_requests_for_approver,
    approval_requests_usable,
    approval_requests_waiting_count,
    approval_requests_waiting_for,
    approval_waiting_forget,
    notification_attempts_visible_to,
    tools_approvable_by,
    user_approves_only_by_own_grant,
    user_can_approve,
    user_is_approver,
    with_approval_people_shown,
)
from .audit import (
    AUDIT_PAYLOAD_GROUPS,
    AUDIT_PAYLOAD_PEOPLE,
    approval_calls,
    approval_request_history,
    audit_events_visible_to,
    audit_payload_shown,
    delegation_chain_shown,
)
from .grants import tool_discover_granted
from .groups import groups_visible_to_operator
from .people import person_shown, person_visible_to, users_visible_to_operator
from .policy import approval_hold_reasons, policy_version_current, policy_version_number
from .tenants import (
    install_wide_visible_to,
    server_fields_locked,
    server_tenant_id,
    server_tenant_q,
    servers_fields_locked,
    servers_registrable_by,
    shared_shaped_by,
    tenant_q,
)
from .tokens import (
    api_tokens_with_membership,
    principal_as_now,
    principal_for_token,
    token_ends_at,
    token_scopes_over_limit,
)
from .tools import (
    MAX_TOOL_ID_LENGTH,
    VISIBLE_SERVER_STATUSES,
    Permission,
    ToolNotFound,
    servers_not_serving_for,
    servers_shaped_by,
    servers_visible_to_operator,
    tool_executable_by,
    tool_get_for_principal,
    tool_pks_visible_to,
    tool_server_not_serving,
    tool_shaped_by,
    tool_still_executable_by,
    tools_narrow,
    tools_not_serving_for,
    tools_servable,
    tools_visible_to,
)

__all__ = [
    "AUDIT_PAYLOAD_GROUPS",
    "AUDIT_PAYLOAD_PEOPLE",
    "MAX_TOOL_ID_LENGTH",
    "Permission",
    "ToolNotFound",
    "VISIBLE_SERVER_STATUSES",
    "agent_shown",
    "agent_and_agents_below",
    "agents_visible_to_operator",
    "api_tokens_with_membership",
    "approval_hold_reasons",
    "approval_request_groups_usable",
    "approval_request_pks_decidable_by",
    "approval_requester_may_execute",
    "approval_requests_usable",
    "approval_requests_waiting_count",
    "approval_requests_waiting_for",
    "approval_waiting_forget",
    "approval_requests_for_approver",
    "approval_calls",
    "approval_request_history",
    "audit_events_visible_to",
    "audit_payload_shown",
    "delegation_chain_shown",
    "groups_visible_to_operator",
    "policy_version_current",
    "policy_version_number",
    "install_wide_visible_to",
    "notification_attempts_visible_to",
    "person_shown",
    "person_visible_to",
    "principal_as_now",
    "principal_for_token",
    "token_ends_at",
    "token_scopes_over_limit",
    "server_fields_locked",
    "servers_registrable_by",
    "server_tenant_id",
    "server_tenant_q",
    "servers_fields_locked",
    "servers_shaped_by",
    "servers_visible_to_operator",
    "shared_shaped_by",
    "tenant_q",
    "tool_discover_granted",
    "tool_executable_by",
    "tool_get_for_principal",
    "tool_pks_visible_to",
    "tool_shaped_by",
    "tool_still_executable_by",
    "tools_approvable_by",
    "tools_narrow",
    "tool_server_not_serving",
    "tools_servable",
    "servers_not_serving_for",
    "tools_not_serving_for",
    "tools_visible_to",
    "user_approves_only_by_own_grant",
    "user_can_approve",
    "user_is_approver",
    "users_visible_to_operator",
    "with_approval_people_shown",
]
