"""Policy: versions, risk classes, tool classification (ToolPolicy)."""

from collections.abc import Mapping
from datetime import timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from catalog.models import Tool
from catalog.signals import tools_changed
from governance.cache import visibility_invalidate
from governance.choices import AuditEventType, AuditOutcome, OperationClass, Reversibility
from governance.classification import Classification, classification_derive
from governance.models import Entitlement, PolicyVersion, RiskClass, ToolPolicy
from governance.principals import principal_for_user
from governance.selectors import policy_version_current, tool_shaped_by

APPROVAL_FIELDS = ("requires_approval", "requires_approval_for_mutating", "approval_ttl")
# A tenant's admin asking to classify (or review) a tool of a server every tenant shares.
SHARED_TOOL_REFUSED = (
    "A shared server's tools are classified and reviewed by a superuser: every tenant's calls follow the decision."
)


def policy_version_bump(*, reason: str, actor: AbstractBaseUser | None = None) -> PolicyVersion:
    """Start a new policy version. Approvals granted under an older version can no longer be used."""
    for _ in range(5):
        try:
            with transaction.atomic():
                number = policy_version_current().number + 1
                return PolicyVersion.objects.create(number=number, reason=reason[:300], created_by=actor)
        except IntegrityError:  # a concurrent bump took the number; take the next one
            continue
    raise RuntimeError("could not allocate a policy version number")


# The seeded risk classes (migration 0002), recreated if a table flush removed them (transactional tests).
DEFAULT_RISK_CLASSES = {
    "low": {"rank": 1, "requires_approval": False, "requires_approval_for_mutating": False, "minutes": 60},
    "moderate": {"rank": 2, "requires_approval": False, "requires_approval_for_mutating": True, "minutes": 30},
    "high": {"rank": 3, "requires_approval": True, "requires_approval_for_mutating": True, "minutes": 15},
    "critical": {"rank": 4, "requires_approval": True, "requires_approval_for_mutating": True, "minutes": 5},
}


def _risk_class(name: str) -> RiskClass:
    risk = RiskClass.objects.filter(name=name).first()
    if risk is not None:
        return risk
    seed = DEFAULT_RISK_CLASSES[name]
    risk, _ = RiskClass.objects.get_or_create(
        name=name,
        defaults={
            "rank": seed["rank"],
            "requires_approval": seed["requires_approval"],
            "requires_approval_for_mutating": seed["requires_approval_for_mutating"],
            "approval_ttl": timedelta(minutes=seed["minutes"]),
        },
    )
    return risk


def policy_defaults_ensure() -> None:
    """Create any missing seeded risk class and the first policy version; never changes existing rows.

    Runs after every migrate and every database flush (the ``post_migrate`` signal, as Django re-creates
    content types and permissions), so seeds a flush removed are back before the next reader needs them."""
    risk_classes_by_name()
    policy_version_current()


def risk_classes_by_name() -> dict[str, RiskClass]:
    """Every seeded risk class by name, in one query (recreating any a table flush removed).
    Batch services pass it on so that deriving defaults for many tools costs no query per tool."""
    risks = {risk.name: risk for risk in RiskClass.objects.all()}
    for name in DEFAULT_RISK_CLASSES.keys() - risks.keys():
        risks[name] = _risk_class(name)
    return risks


def tool_classification_derive(*, tool: Tool) -> Classification:
    """Defaults for a tool no admin has classified: its annotations (untrusted hints), never less strict than
    what its own name, title and description say it does (governance.classification)."""
    return classification_derive(
        annotations=tool.annotations, name=tool.name, title=tool.upstream_title, description=tool.description
    )


def tool_policy_build(*, tool: Tool, risk_classes: Mapping[str, RiskClass] | None = None) -> ToolPolicy:
    """An unsaved policy for ``tool`` with defaults derived from its definition."""
    derived = tool_classification_derive(tool=tool)
    return ToolPolicy(
        tool=tool,
        operation_class=derived.operation_class,
        reversibility=derived.reversibility,
        risk_class=risk_classes[derived.risk] if risk_classes else _risk_class(derived.risk),
        classification_note=derived.note,
    )


def tool_policy_ensure(*, tool: Tool) -> ToolPolicy:
    """The tool's policy, created from its definition if it has none yet."""
    try:
        return tool.policy
    except ToolPolicy.DoesNotExist:
        pass
    built = tool_policy_build(tool=tool)
    policy, _ = ToolPolicy.objects.get_or_create(
        tool=tool,
        defaults={
            "operation_class": built.operation_class,
            "reversibility": built.reversibility,
            "risk_class": built.risk_class,
            "classification_note": built.classification_note,
        },
    )
    tool.policy = policy
    return policy


def tool_policy_apply_hints(
    *, policy: ToolPolicy, tool: Tool, risk_classes: Mapping[str, RiskClass] | None = None
) -> None:
    """Re-derive defaults after an upstream change, unless an admin classified the tool (the admin wins)."""
    if policy.classified_by_admin:
        return
    derived = tool_classification_derive(tool=tool)
    policy.operation_class = derived.operation_class
    policy.reversibility = derived.reversibility
    policy.classification_note = derived.note
    if policy.risk_class.name != derived.risk:
        policy.risk_class = risk_classes[derived.risk] if risk_classes else _risk_class(derived.risk)


def tool_policy_classify(
    *,
    policy: ToolPolicy,
    actor: AbstractBaseUser,
    operation_class: str,
    reversibility: str,
    risk_class: RiskClass,
    allowed_environments: list[str],
    data_classes: list[str],
    required_entitlements: list[Entitlement] | None = None,
    classification_note: str = "",
) -> ToolPolicy:
    """An admin's classification of a tool; it survives syncs. ``classification_note`` is the admin's reason for
    it, kept on the policy and in the audit event. Bumps the policy version when the fields that decide approvals
    (operation class, risk class) change. Raises ValidationError on bad values, and
    PermissionDenied (SHARED_TOOL_REFUSED) when ``actor`` may not shape the tool (``tool_shaped_by``: a shared
    server's tools are a superuser's once there are tenants, since every tenant's calls follow the class)."""
    if not tool_shaped_by(user=actor, tool=policy.tool):
        raise PermissionDenied(SHARED_TOOL_REFUSED)
    if operation_class not in OperationClass.values:
        raise ValidationError({"operation_class": "unknown operation class"})
    if reversibility not in Reversibility.values:
        raise ValidationError({"reversibility": "unknown reversibility"})
    for label, values in (("allowed_environments", allowed_environments), ("data_classes", data_classes)):
        if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
            raise ValidationError({label: "must be a list of non-empty strings"})
    with transaction.atomic():
        before = (policy.operation_class, policy.risk_class_id)
        policy.operation_class = operation_class
        policy.reversibility = reversibility
        policy.risk_class = risk_class
        policy.allowed_environments = allowed_environments
        policy.data_classes = data_classes
        policy.classified_by_admin = True
        policy.classification_note = classification_note.strip()  # the admin's reason replaces the derived one
        policy.classified_by = actor
        policy.classified_at = timezone.now()
        policy.full_clean()
        policy.save()
        if required_entitlements is not None:
            policy.required_entitlements.set(required_entitlements)
        if before != (operation_class, risk_class.pk):
            policy_version_bump(reason=f"classification of {policy.tool.tool_id} changed", actor=actor)
        if before[0] != operation_class:  # search reads the class as the tool's operation (a read or not)
            tool_pk = policy.tool_id
            transaction.on_commit(lambda: tools_changed.send(sender=Tool, tool_pks=[tool_pk]))
        _audit_policy_change(actor=actor, tool=policy.tool, payload={"classification": _policy_snapshot(policy)})
        visibility_invalidate()
    return policy


def risk_class_update(
    *,
    risk_class: RiskClass,
    actor: AbstractBaseUser,
    requires_approval: bool,
    requires_approval_for_mutating: bool,
    approval_ttl,
    description: str | None = None,
) -> RiskClass:
    """Change a risk class's approval rules; bumps the policy version when they changed."""
    with transaction.atomic():
        before = {f: getattr(risk_class, f) for f in APPROVAL_FIELDS}
        risk_class.requires_approval = requires_approval
        risk_class.requires_approval_for_mutating = requires_approval_for_mutating
        risk_class.approval_ttl = approval_ttl
        if description is not None:
            risk_class.description = description
        risk_class.full_clean()
        if approval_ttl.total_seconds() <= 0:
            raise ValidationError({"approval_ttl": "must be positive"})
        risk_class.save()
        after = {f: getattr(risk_class, f) for f in APPROVAL_FIELDS}
        if before != after:
            policy_version_bump(reason=f"risk class {risk_class.name} changed", actor=actor)
            _audit_policy_change(
                actor=actor,
                tool=None,
                payload={"risk_class": risk_class.name, "before": _jsonable(before), "after": _jsonable(after)},
            )
    return risk_class


def _jsonable(values: dict) -> dict:
    return {k: (v.total_seconds() if hasattr(v, "total_seconds") else v) for k, v in values.items()}


def _policy_snapshot(policy: ToolPolicy) -> dict:
    return {
        "operation_class": policy.operation_class,
        "reversibility": policy.reversibility,
        "risk_class": policy.risk_class.name,
        "allowed_environments": policy.allowed_environments,
        "data_classes": policy.data_classes,
        "note": policy.classification_note,
    }


def _audit_policy_change(*, actor: AbstractBaseUser, tool: Tool | None, payload: dict) -> None:
    from governance.services.audit import audit_record

    audit_record(
        event_type=AuditEventType.POLICY_CHANGED,
        principal=principal_for_user(actor, via="admin"),
        tool=tool,
        outcome=AuditOutcome.SUCCESS,
        payload=payload,
    )
