"""Grants and revocations of discover/execute/approve on servers and tools. Each one audits itself and
invalidates every cached visible set."""

from typing import Literal

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet

from catalog.models import Server, Tool
from governance.cache import visibility_invalidate
from governance.choices import ApprovalStatus, AuditEventType, AuditOutcome
from governance.constants import PERMISSION_ACTIONS
from governance.models import (
    ApprovalRequest,
    ServerGroupObjectPermission,
    ServerUserObjectPermission,
    ToolGroupObjectPermission,
    ToolUserObjectPermission,
)
from governance.principals import principal_for_user
from governance.selectors import server_tenant_id, servers_visible_to_operator
from governance.services.audit import audit_record

Action = Literal["discover", "execute", "approve"]


def _grant_model(target: Server | Tool, holder: AbstractBaseUser | Group):
    is_group = isinstance(holder, Group)
    if isinstance(target, Server):
        return ServerGroupObjectPermission if is_group else ServerUserObjectPermission
    if isinstance(target, Tool):
        return ToolGroupObjectPermission if is_group else ToolUserObjectPermission
    raise ValidationError("grants apply to servers and tools only")


def permission_for(*, target: Server | Tool, action: str) -> Permission:
    """The auth Permission row for ``action`` on the target's model (e.g. execute_tool)."""
    if action not in PERMISSION_ACTIONS:
        raise ValidationError(f"unknown action {action!r}; expected one of {', '.join(PERMISSION_ACTIONS)}")
    model = "server" if isinstance(target, Server) else "tool"
    return Permission.objects.get(
        content_type=ContentType.objects.get_for_model(type(target)), codename=f"{action}_{model}"
    )


def _holder_label(holder: AbstractBaseUser | Group) -> str:
    return f"group:{holder.name}" if isinstance(holder, Group) else f"user:{holder.get_username()}"


def _audit(
    *, event_type: str, actor: AbstractBaseUser, target: Server | Tool, holder, action: str, changed: bool
) -> None:
    tool = target if isinstance(target, Tool) else None
    server = target.server if isinstance(target, Tool) else target
    audit_record(
        event_type=event_type,
        principal=principal_for_user(actor, via="admin"),
        tool=tool,
        server=server,
        outcome=AuditOutcome.SUCCESS,
        payload={"action": action, "holder": _holder_label(holder), "target": str(target), "changed": changed},
    )


def permission_grant_check(*, actor: AbstractBaseUser, target: Server | Tool, holder: AbstractBaseUser | Group) -> None:
    """Z12: an operator grants only servers they may manage (shared ones and their tenants'), and a tenant's
    server only to that tenant's members. One error for a foreign and a missing server (nothing to learn)."""
    server = target.server if isinstance(target, Tool) else target
    if not Server.objects.filter(pk=server.pk).filter(servers_visible_to_operator(user=actor)).exists():
        raise ValidationError("no such server")
    tenant_id = server_tenant_id(server)
    if tenant_id is not None and not isinstance(holder, Group) and not holder.tenants.filter(pk=tenant_id).exists():
        raise ValidationError({"user": "this server belongs to a tenant the person is not a member of"})


SELF_GRANT_MESSAGE = (
    "You cannot give yourself approve (directly or through a group you belong to): another operator must grant "
    "it, so nobody decides on authority they gave themselves."
)


def grants_to_self(*, actor: AbstractBaseUser, holder: AbstractBaseUser | Group) -> bool:
    """Whether a grant to ``holder`` would reach ``actor``: the actor, or a group the actor belongs to."""
    if isinstance(holder, Group):
        return actor.pk is not None and actor.groups.filter(pk=holder.pk).exists()
    return holder.pk == actor.pk


def self_grant_refused(*, actor: AbstractBaseUser, holder: AbstractBaseUser | Group, action: str) -> bool:
    """Separation of duties, at grant time: nobody but a superuser grants ``approve`` to themselves (or to a
    group they are in). A superuser may, but such a grant still never lets them decide (see
    ``governance.selectors``: an approve grant never counts for the person who made it)."""
    return action == "approve" and not actor.is_superuser and grants_to_self(actor=actor, holder=holder)


def permission_grant(
    *, actor: AbstractBaseUser, target: Server | Tool, action: Action, holder: AbstractBaseUser | Group
):
    """Grant ``action`` on ``target`` (a server covers all its tools) to a user or group, recording the actor.

    Idempotent: granting twice keeps one row (audits both calls; a granter the grant does not reach replaces the
    recorded one). Returns the grant row. Raises ValidationError for an unknown action or target, and (code
    ``self_grant``) when a non-superuser grants ``approve`` to themselves or a group they belong to."""
    if self_grant_refused(actor=actor, holder=holder, action=action):
        raise ValidationError(SELF_GRANT_MESSAGE, code="self_grant")
    model = _grant_model(target, holder)
    permission = permission_for(target=target, action=action)
    holder_field = "group" if isinstance(holder, Group) else "user"
    permission_grant_check(actor=actor, target=target, holder=holder)
    with transaction.atomic():
        grant, created = model.objects.get_or_create(
            **{holder_field: holder, "permission": permission, "content_object": target},
            defaults={"granted_by": actor if actor.pk is not None else None},
        )
        if not created and grant.granted_by_id != actor.pk and not grants_to_self(actor=actor, holder=holder):
            # Granted again by someone it does not reach: the right now also comes from them (an approve grant
            # someone made to themselves counts once another person grants the same).
            grant.granted_by = actor
            grant.save(update_fields=["granted_by"])
        _audit(
            event_type=AuditEventType.GRANT, actor=actor, target=target, holder=holder, action=action, changed=created
        )
        visibility_invalidate()
    return grant


def permission_held(*, target: Server | Tool, action: Action, holder: AbstractBaseUser | Group) -> bool:
    """Whether ``holder`` has a grant of its own of ``action`` on ``target``: the row ``permission_grant`` would
    find (not one through a group, nor a server's for one of its tools)."""
    model = _grant_model(target, holder)
    holder_field = "group" if isinstance(holder, Group) else "user"
    permission = permission_for(target=target, action=action)
    return model.objects.filter(**{holder_field: holder, "permission": permission, "content_object": target}).exists()


def permission_revoke(
    *, actor: AbstractBaseUser, target: Server | Tool, action: Action, holder: AbstractBaseUser | Group
) -> bool:
    """Revoke ``action`` on ``target`` from a user or group. Takes effect on the next call: the visible-set
    cache is invalidated, and approvals are re-checked against current grants when used.
    Returns whether a grant existed."""
    model = _grant_model(target, holder)
    permission = permission_for(target=target, action=action)
    holder_field = "group" if isinstance(holder, Group) else "user"
    with transaction.atomic():
        if action == "approve":
            _lock_holders(holder)
        deleted, _ = model.objects.filter(
            **{holder_field: holder, "permission": permission, "content_object": target}
        ).delete()
        _audit(
            event_type=AuditEventType.REVOKE,
            actor=actor,
            target=target,
            holder=holder,
            action=action,
            changed=bool(deleted),
        )
        visibility_invalidate()
        if deleted and action in ("discover", "execute"):
            _void_approvals_after_revocation(target=target, holder=holder)
    return bool(deleted)


def _lock_holders(holder: AbstractBaseUser | Group) -> None:
    """Lock the rows of the people ``holder`` stands for until the revocation commits (``rows_lock``)."""
    people = get_user_model().objects.all()
    rows_lock(people.filter(groups=holder) if isinstance(holder, Group) else people.filter(pk=holder.pk))


def rows_lock(rows: QuerySet) -> None:
    """Lock ``rows`` (people, agents, or a server) until the transaction commits, as a change that may take an approve
    right away must (a revoked grant, a group or tenant left, a group deleted, an agent's grant deleted, a server moved
    to another tenant): a decision under way holds its decider's row, their agents' and the tool's server's while it
    checks the right and writes itself (``approval_decide``), so the change waits for it, and one begun after sees the
    change. NO KEY UPDATE, as the decision takes; in the order of their ids."""
    list(rows.select_for_update(no_key=True, of=("self",)).order_by("pk").values_list("pk", flat=True))


def _void_approvals_after_revocation(*, target: Server | Tool, holder: AbstractBaseUser | Group) -> int:
    """Expire pending and approved requests whose requester can no longer execute the tool (Z6), each audited
    (``approvals_expire``).

    Use would fail anyway (every call is re-authorized); voiding also clears the approver inbox."""
    from governance.selectors import tool_executable_by

    requests = ApprovalRequest.objects.filter(status__in=[ApprovalStatus.PENDING, ApprovalStatus.APPROVED])
    requests = requests.filter(tool__server=target) if isinstance(target, Server) else requests.filter(tool=target)
    if isinstance(holder, Group):
        requests = requests.filter(requester__groups=holder)
    else:
        requests = requests.filter(requester=holder)
    from governance.services.approvals import approvals_expire  # it imports this module

    lost = [
        request.pk
        for request in requests.select_related("requester").distinct()
        if not tool_executable_by(principal=principal_for_user(request.requester), tool_pk=request.tool_id)
    ]
    return approvals_expire(ApprovalRequest.objects.filter(pk__in=lost), reason="requester_lost_access") if lost else 0
