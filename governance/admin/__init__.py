"""Governance admin: grants, risk classes, tool policies, change review, API tokens, the approver inbox
and the read-only audit trail. Every write goes through a service (which audits itself)."""

from . import (  # noqa: F401 - registers the ModelAdmins
    access,
    approvals,
    audit,
    grants,
    notifications,
    people,
    policy,
    review,
    tenant_scope,
    tenants,
    tokens,
)
