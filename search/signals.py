"""React to catalog changes: enqueue a reindex of exactly the tools that changed."""

from django.dispatch import receiver

from catalog.signals import tools_changed


@receiver(tools_changed, dispatch_uid="search.reindex_changed_tools")
def reindex_changed_tools(sender: object, tool_pks: list[int], index: bool = True, **kwargs: object) -> None:
    from .tasks import reindex_tools

    if not index:
        return  # a bulk import deferred indexing to an operator's search_rebuild

    pks = sorted({int(pk) for pk in tool_pks})
    if pks:
        # The signal is sent after commit; delay_on_commit still guards a sender inside a transaction.
        reindex_tools.delay_on_commit(pks)
