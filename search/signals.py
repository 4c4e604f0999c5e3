"""React to catalog changes: enqueue a reindex of exactly the tools that changed; forget what a server's tools
learned when the server changes tenant; withdraw what a person taught tools they may no longer execute."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete, pre_save
from django.dispatch import receiver

from catalog.signals import tools_changed
from governance.models import (
    ServerGroupObjectPermission,
    ServerTenant,
    ServerUserObjectPermission,
    Tenant,
    ToolGroupObjectPermission,
    ToolUserObjectPermission,
)


@receiver(tools_changed, dispatch_uid="search.reindex_changed_tools")
def reindex_changed_tools(sender: object, tool_pks: list[int], index: bool = True, **kwargs: object) -> None:
    from .tasks import reindex_tools

    if not index:
        return  # a bulk import deferred indexing to an operator's search_rebuild

    pks = sorted({int(pk) for pk in tool_pks})
    if pks:
        # The signal is sent after commit; delay_on_commit still guards a sender inside a transaction.
        reindex_tools.delay_on_commit(pks)


@receiver(pre_save, sender=ServerTenant, dispatch_uid="search.forget_learning_of_a_server_given_a_tenant")
def forget_learning_of_a_server_given_a_tenant(sender: object, instance: ServerTenant, raw: bool = False, **kwargs):
    from .usage import learned_requests_forget

    if raw:
        return
    before = ServerTenant.objects.filter(pk=instance.pk).values_list("tenant_id", flat=True).first()
    if before != instance.tenant_id:
        learned_requests_forget(server_pk=instance.pk)


@receiver(post_delete, sender=ServerTenant, dispatch_uid="search.forget_learning_of_a_server_shared")
def forget_learning_of_a_server_shared(sender: object, instance: ServerTenant, **kwargs: object) -> None:
    from .usage import learned_requests_forget

    learned_requests_forget(server_pk=instance.pk)


def _recheck_teachers_on_commit(user_pks: list[int]) -> None:
    """After the change commits (its visibility is then the database's), withdraw what these people taught tools
    they may no longer execute (``learned_teachers_recheck``)."""
    from .usage import learned_teachers_recheck

    if user_pks:
        transaction.on_commit(lambda: learned_teachers_recheck(user_pks=user_pks))


@receiver(post_delete, sender=ServerUserObjectPermission, dispatch_uid="search.recheck_teacher_server_user_grant")
@receiver(post_delete, sender=ToolUserObjectPermission, dispatch_uid="search.recheck_teacher_tool_user_grant")
def recheck_teacher_of_a_revoked_user_grant(sender: object, instance, **kwargs: object) -> None:
    _recheck_teachers_on_commit([instance.user_id])


@receiver(post_delete, sender=ServerGroupObjectPermission, dispatch_uid="search.recheck_teacher_server_group_grant")
@receiver(post_delete, sender=ToolGroupObjectPermission, dispatch_uid="search.recheck_teacher_tool_group_grant")
def recheck_teachers_of_a_revoked_group_grant(sender: object, instance, **kwargs: object) -> None:
    _recheck_teachers_on_commit(
        list(get_user_model().objects.filter(groups=instance.group_id).values_list("pk", flat=True))
    )


@receiver(m2m_changed, sender=Group.user_set.through, dispatch_uid="search.recheck_teachers_leaving_a_group")
@receiver(m2m_changed, sender=Tenant.members.through, dispatch_uid="search.recheck_teachers_leaving_a_tenant")
def recheck_teachers_leaving(sender: object, instance, action: str, pk_set, **kwargs: object) -> None:
    """People left a group or a tenant (changed from either side): its grants no longer reach them."""
    if action not in ("post_remove", "pre_clear"):
        return
    if isinstance(instance, get_user_model()):
        user_pks = [instance.pk]
    elif action == "post_remove":
        user_pks = list(pk_set or ())
    else:  # a group's or tenant's people all removed at once: who they are, before they go
        people = instance.user_set if isinstance(instance, Group) else instance.members
        user_pks = list(people.values_list("pk", flat=True))
    _recheck_teachers_on_commit(user_pks)


@receiver(pre_delete, sender=Group, dispatch_uid="search.recheck_teachers_of_a_deleted_group")
def recheck_teachers_of_a_deleted_group(sender: object, instance: Group, **kwargs: object) -> None:
    """Its people, read before the group and its memberships go (no m2m signal for a cascade)."""
    _recheck_teachers_on_commit(list(instance.user_set.values_list("pk", flat=True)))


def recheck_teacher_made_inactive(sender: object, instance, **kwargs: object) -> None:
    """An inactive person executes nothing: what they taught stops counting."""
    if not instance.is_active:
        _recheck_teachers_on_commit([instance.pk])


post_save.connect(
    recheck_teacher_made_inactive, sender=get_user_model(), dispatch_uid="search.recheck_inactive_teacher"
)


def recheck_teacher_deleted(sender: object, instance, **kwargs: object) -> None:
    """A deleted person teaches nothing (their group and tenant memberships go by cascade, without m2m signals)."""
    _recheck_teachers_on_commit([instance.pk])


post_delete.connect(recheck_teacher_deleted, sender=get_user_model(), dispatch_uid="search.recheck_deleted_teacher")
