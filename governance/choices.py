from django.db import models


class OperationClass(models.TextChoices):
    READ = "read", "Read"
    WRITE = "write", "Write"
    EXECUTE = "execute", "Execute"
    APPROVE = "approve", "Approve"


class Reversibility(models.TextChoices):
    REVERSIBLE = "reversible", "Reversible"
    COMPENSATABLE = "compensatable", "Compensatable"
    IRREVERSIBLE = "irreversible", "Irreversible"


class RiskLevel(models.TextChoices):
    LOW = "low", "Low"
    MODERATE = "moderate", "Moderate"
    HIGH = "high", "High"
    CRITICAL = "critical", "Critical"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    DENIED = "denied", "Denied"
    CONSUMED = "consumed", "Used"
    EXPIRED = "expired", "Expired"


class ReviewStatus(models.TextChoices):
    PENDING = "pending", "Pending review"
    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected (tool stays held)"
    SUPERSEDED = "superseded", "Superseded by a later revision"


class ReviewKind(models.TextChoices):
    CHANGED = "changed", "Definition changed after acceptance"
    SUSPICIOUS = "suspicious", "Suspicious text on first sight"


class AuditEventType(models.TextChoices):
    DISCOVERY = "discovery", "Discovery (search / inspect)"
    EXECUTION = "execution", "Execution"
    GRANT = "grant", "Permission granted"
    REVOKE = "revoke", "Permission revoked"
    APPROVAL_REQUESTED = "approval.requested", "Approval requested"
    APPROVAL_APPROVED = "approval.approved", "Approval approved"
    APPROVAL_DENIED = "approval.denied", "Approval denied"
    APPROVAL_CONSUMED = "approval.consumed", "Approval used"
    APPROVAL_REJECTED = "approval.rejected", "Approval refused at use"
    APPROVAL_POLLED = "approval.polled", "Approval asked about before use"
    APPROVAL_EXPIRED = "approval.expired", "Approval expired (timed out, or its requester lost access)"
    TOKEN_CREATED = "token.created", "API token created"
    TOKEN_REVOKED = "token.revoked", "API token revoked"
    REVIEW_HELD = "review.held", "Tool held for review"
    REVIEW_ACCEPTED = "review.accepted", "Tool revision accepted"
    REVIEW_REJECTED = "review.rejected", "Tool revision rejected"
    POLICY_CHANGED = "policy.changed", "Policy changed"
    ENTITLEMENT_CHANGED = "entitlement.changed", "Entitlement holders changed"
    REQUEST_REJECTED = "request.rejected", "Request refused before dispatch"


class AuditOutcome(models.TextChoices):
    SUCCESS = "success", "Success"
    DENIED = "denied", "Denied"
    ERROR = "error", "Error"
    PENDING = "pending", "Pending"
    UNKNOWN = "unknown", "Unknown (e.g. upstream crashed mid-call)"


class NotificationChannel(models.TextChoices):
    EMAIL = "email", "E-mail"
    WEBHOOK = "webhook", "Webhook"


class NotificationOutcome(models.TextChoices):
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"
