"""Governance background jobs."""

from celery import shared_task

from governance.services.approvals import approval_expire_stale
from governance.services.notifications import WebhookError, approval_notify


@shared_task(name="governance.tasks.expire_approvals")
def expire_approvals() -> int:
    """Mark pending and approved requests past their expiry as expired (keeps the inbox current).

    Use is refused after expiry regardless; this only tidies the status. Idempotent."""
    return approval_expire_stale()


@shared_task(
    bind=True,
    name="governance.tasks.notify_approval_requested",
    autoretry_for=(WebhookError,),
    retry_backoff=True,
    max_retries=5,
)
def notify_approval_requested(self, request_pk: int) -> dict:
    """E-mail the approvers of a new request and call the approval webhook (retried if it fails); every
    attempt is recorded for operators."""
    return approval_notify(request_pk=request_pk, attempt=self.request.retries + 1)
