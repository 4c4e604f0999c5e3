"""Change review ("rug pull" defence): hold a tool whose accepted definition changed, or whose text looks
like an injection at first sight, until a curator accepts it.

Errors: ReviewError when a review cannot be decided (already decided, or a newer revision superseded it).
"""

import difflib
import json

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from catalog.models import Tool, ToolRevision
from governance.cache import visibility_invalidate
from governance.choices import AuditEventType, AuditOutcome, ReviewKind, ReviewStatus
from governance.models import ToolPolicy, ToolReview
from governance.principals import principal_for_user
from governance.sanitize import definition_text, suspicious_markers
from governance.services.audit import audit_record
from governance.services.policy import tool_policy_apply_hints, tool_policy_build, tool_policy_ensure


class ReviewError(Exception):
    """A review cannot be decided; the message says why."""


def _definition_of(tool: Tool, revision: ToolRevision | None) -> dict:
    if revision is not None:
        return revision.definition
    return {
        "name": tool.name,
        "title": tool.upstream_title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": tool.annotations,
    }


def tool_definition_review(*, tool: Tool, revision: ToolRevision | None, previous_hash: str | None) -> ToolPolicy:
    """React to a new or changed upstream definition (called inside the sync's transaction).

    First sight of clean text: accepted. First sight of suspicious text, or any change after a definition
    was accepted: held, with a pending ToolReview, so the tool leaves every visible set in this same
    transaction. A tool that returns to its accepted definition is released. Governance defaults are
    re-derived from the new annotations unless an admin classified the tool."""
    # Runs once per changed tool inside a sync, so it keeps to a few queries (3 for a new clean tool).
    policy = ToolPolicy.objects.select_related("risk_class").filter(tool_id=tool.pk).first()
    is_new = policy is None
    if is_new:
        policy = tool_policy_build(tool=tool)
    else:
        tool_policy_apply_hints(policy=policy, annotations=tool.annotations)
        # Older pending reviews are replaced by the one for the current definition.
        ToolReview.objects.filter(tool=tool, status=ReviewStatus.PENDING).update(status=ReviewStatus.SUPERSEDED)
    markers = suspicious_markers(definition_text(_definition_of(tool, revision)))
    new_hash = tool.definition_hash
    first_sight = previous_hash is None or not policy.accepted_hash
    if new_hash == policy.accepted_hash and not markers:
        policy.held, policy.hold_reason, policy.markers = False, "", []
    elif first_sight and not markers:
        policy.accepted_hash, policy.held, policy.hold_reason, policy.markers = new_hash, False, "", []
    else:
        kind = ReviewKind.SUSPICIOUS if first_sight else ReviewKind.CHANGED
        policy.held = True
        policy.markers = markers
        policy.hold_reason = (
            f"suspicious text: {', '.join(markers)}" if markers else "upstream definition changed after acceptance"
        )[:300]
        ToolReview.objects.create(
            tool=tool,
            revision=revision,
            definition_hash=new_hash,
            previous_hash=policy.accepted_hash,
            kind=kind,
            markers=markers,
        )
        audit_record(
            event_type=AuditEventType.REVIEW_HELD,
            principal=None,
            tool=tool,
            outcome=AuditOutcome.SUCCESS,
            payload={"kind": kind, "old_hash": policy.accepted_hash, "new_hash": new_hash, "markers": markers},
        )
    policy.save()
    visibility_invalidate()
    return policy


def _decide(*, review: ToolReview, actor: AbstractBaseUser, reason: str, accept: bool) -> ToolReview:
    with transaction.atomic():
        review = ToolReview.objects.select_for_update().get(pk=review.pk)
        if review.status != ReviewStatus.PENDING:
            raise ReviewError(f"this review is already {review.get_status_display().lower()}")
        tool = Tool.objects.select_related("server").get(pk=review.tool_id)
        if accept and review.definition_hash != tool.definition_hash:
            raise ReviewError("the tool changed again since this review; review the newer revision")
        policy = tool_policy_ensure(tool=tool)
        review.status = ReviewStatus.ACCEPTED if accept else ReviewStatus.REJECTED
        review.decided_by, review.decided_at, review.reason = actor, timezone.now(), (reason or "")[:2000]
        review.save()
        old_hash = policy.accepted_hash
        if accept:
            policy.accepted_hash = tool.definition_hash
            policy.held, policy.hold_reason, policy.markers = False, "", []
            policy.save()
        audit_record(
            event_type=AuditEventType.REVIEW_ACCEPTED if accept else AuditEventType.REVIEW_REJECTED,
            principal=principal_for_user(actor, via="admin"),
            tool=tool,
            outcome=AuditOutcome.SUCCESS,
            payload={"old_hash": old_hash, "new_hash": review.definition_hash, "reason": review.reason},
        )
        visibility_invalidate()
    return review


def tool_review_accept(*, review: ToolReview, actor: AbstractBaseUser, reason: str = "") -> ToolReview:
    """Accept the reviewed definition: the tool is released (visible again to those granted it).
    Raises ReviewError if the review is decided already or the tool changed again since."""
    return _decide(review=review, actor=actor, reason=reason, accept=True)


def tool_review_reject(*, review: ToolReview, actor: AbstractBaseUser, reason: str = "") -> ToolReview:
    """Reject the reviewed definition: the tool stays held. Raises ReviewError if already decided."""
    return _decide(review=review, actor=actor, reason=reason, accept=False)


def tool_review_diff(*, review: ToolReview) -> str:
    """Unified diff between the accepted definition and the reviewed one (pretty JSON, text)."""
    new = _definition_of(review.tool, review.revision)
    old_revision = (
        ToolRevision.objects.filter(tool_id=review.tool_id, definition_hash=review.previous_hash).first()
        if review.previous_hash
        else None
    )
    old = old_revision.definition if old_revision is not None else {}

    def lines(definition: dict) -> list[str]:
        return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=True).splitlines()

    return "\n".join(difflib.unified_diff(lines(old), lines(new), "accepted", "new revision", lineterm="", n=3))
