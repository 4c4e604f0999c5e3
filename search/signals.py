"""React to catalog changes: enqueue a reindex of exactly the tools that changed; forget what a server's tools
learned when the server changes tenant; count only the teachers who may execute their tools now."""

from django.db import transaction
from django.db.models.signals import post_delete, pre_save
from django.dispatch import receiver

from catalog.signals import tools_changed
from governance.models import ServerTenant
from governance.signals import visibility_changed


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


@receiver(visibility_changed, dispatch_uid="search.recount_teachers_when_visibility_changes")
def recount_teachers_when_visibility_changes(sender: object, **kwargs: object) -> None:
    """Who may execute what changed (any way: a grant, an entitlement, a membership, a person, a tool's state):
    after commit, queue a recount of the teachers who may execute their tools now (``learned_teachers_recount``)."""
    from .usage import learned_teachers_recount_queue

    connection = transaction.get_connection()
    if not connection.get_autocommit() and not connection.in_atomic_block:
        # Manual transaction management (autocommit off outside atomic) has no on_commit: queue now. A recount that
        # starts before this commit misses the change until the next one queues another.
        learned_teachers_recount_queue()
        return
    transaction.on_commit(learned_teachers_recount_queue)
