"""Governance background jobs."""

from celery import shared_task

from governance.services.approvals import approval_expire_stale


@shared_task(name="governance.tasks.expire_approvals")
def expire_approvals() -> int:
    """Mark pending and approved requests past their expiry as expired (keeps the inbox current).

    Use is refused after expiry regardless; this only tidies the status. Idempotent."""
    return approval_expire_stale()
