"""Governance admin: grants, risk classes, tool policies, change review, API tokens, the approver inbox
and the read-only audit trail. Every write goes through a service (which audits itself)."""

from . import approvals, audit, grants, policy, review, server_access, tenant_scope, tenants, tokens  # noqa: F401 - registers the ModelAdmins
