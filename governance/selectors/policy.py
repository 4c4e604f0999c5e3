"""Reads of the policy version in force: what approvals bind and every audit event records."""

from ..cache import visibility_row_token
from ..models import PolicyVersion


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
