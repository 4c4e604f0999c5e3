"""Reads of the policy version in force: what approvals bind and every audit event records."""

from django.utils import timezone

from ..cache import visibility_row_token
from ..choices import OperationClass
from ..models import ApprovalRequest, PolicyVersion, RiskClass, ToolPolicy


def policy_version_current() -> PolicyVersion:
    """The policy version in force (created as number 1 if the table is empty)."""
    version = PolicyVersion.objects.order_by("-number").first()
    if version is None:
        version, _ = PolicyVersion.objects.get_or_create(number=1, defaults={"reason": "initial policy"})
    return version


# (visibility row token, policy number read after it): this process's last answer of policy_version_number.
_number_kept: tuple[str, int] | None = None


def policy_version_number() -> int:
    """The number of the policy version in force: what audit events record (a tool_search writes one; issue 9).

    Kept per process while the visibility version stands: every PolicyVersion save rewrites it in its own
    transaction (governance.receivers), and the token is read before the number, so a kept number is never
    older than the token it is kept under. In a search the token is the one the search read already."""
    global _number_kept
    token = visibility_row_token()
    kept = _number_kept
    if kept is not None and kept[0] == token:
        return kept[1]
    number = PolicyVersion.objects.order_by("-number").values_list("number", flat=True).first()
    if number is None:
        number = policy_version_current().number
    _number_kept = (token, number)
    return number


def approval_hold_reasons(*, request: ApprovalRequest) -> list[str]:
    """Why ``request``'s call waits for an approver, as the approver reads it on the decide page: the risk class's
    rule that held it, then where the tool's risk and operation classes came from (an admin's classification, Scout's
    note where it was stricter than the server's hints, or the hints themselves)."""
    risk = RiskClass.objects.filter(name=request.risk_class).first()
    label, operation = request.get_risk_class_display(), request.get_operation_class_display()
    if risk is not None and risk.requires_approval:
        rule = f"The {label} risk class's rule: every call of a tool of this class needs an approval."
    elif risk is not None and request.operation_class != OperationClass.READ and risk.requires_approval_for_mutating:
        rule = (
            f"The {label} risk class's rule: a tool of this class that changes something (its operation is "
            f"{operation}, not Read) needs an approval for every call."
        )
    else:
        rule = f"The {label} risk class needed an approval for this call when it was asked ({request.policy_version})."
    return [reason for reason in (rule, _classification_source(request)) if reason]


def _classification_source(request: ApprovalRequest) -> str:
    policy = ToolPolicy.objects.select_related("risk_class").filter(tool_id=request.tool_id).first()
    if policy is None:
        return ""
    if (policy.risk_class.name, policy.operation_class) != (request.risk_class, request.operation_class):
        now = f"{policy.risk_class.get_name_display()} risk, {policy.get_operation_class_display()}"
        return f"The tool has been classified again since this call was asked: it is now {now}."
    classes = f"{request.get_risk_class_display()} risk, {request.get_operation_class_display()}"
    if policy.classified_by_admin:
        when = f" on {timezone.localtime(policy.classified_at):%Y-%m-%d}" if policy.classified_at else ""
        why = f": {policy.classification_note}" if policy.classification_note else "."
        return f"An admin classified the tool {classes}{when}{why}"
    if policy.classification_note:
        return f"Scout's default ({classes}), stricter than the server's hints: {policy.classification_note}"
    hints = request.tool.annotations if isinstance(request.tool.annotations, dict) else {}
    if hints.get("readOnlyHint") is True:
        said = "marks it read-only (readOnlyHint true)"
    elif hints.get("destructiveHint") is False:
        said = "marks it as changing things without destroying any (destructiveHint false)"
    elif hints.get("destructiveHint") is True:
        said = "marks it destructive (destructiveHint true)"
    else:
        said = "does not mark it read-only or non-destructive, so it counts as changing things irreversibly"
    return f"Scout's default from the server's own hints ({classes}): the server {said}."
