"""Curation writes: what curators add to make a tool findable. Never touches upstream fields."""

from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from catalog.models import Tool
from catalog.signals import tools_changed

CURATED_FIELDS = ("title", "purpose", "entity_types", "operation_verbs")


def tool_curation_update(
    *,
    tool: Tool,
    title: str | None = None,
    purpose: str | None = None,
    entity_types: list[str] | None = None,
    operation_verbs: list[str] | None = None,
    enabled: bool | None = None,
    related_tools: Iterable[Tool] | None = None,
    phrases_changed: bool = False,
) -> bool:
    """Write the given curation fields (``None`` = leave as is) and return whether anything changed.

    Values are compared with the stored row, not with ``tool`` (an admin form has already copied its input
    onto the instance). Only the curated columns are saved, so a sync writing upstream fields at the same
    time is never overwritten. ``phrases_changed`` says the caller edited aliases, keywords, examples or
    negative queries (child rows it saved itself). A curation change sets ``curated_at``; any change sends
    ``tools_changed`` once the transaction commits. Raises ValidationError for invalid values.
    """
    wanted = {
        "title": title,
        "purpose": purpose,
        "entity_types": entity_types,
        "operation_verbs": operation_verbs,
        "enabled": enabled,
    }
    wanted = {name: value for name, value in wanted.items() if value is not None}
    with transaction.atomic():
        stored = Tool.objects.select_for_update().filter(pk=tool.pk).values(*wanted.keys()).get() if wanted else {}
        update_fields = [name for name, value in wanted.items() if stored[name] != value]
        for name in update_fields:
            setattr(tool, name, wanted[name])
        related_changed = False
        if related_tools is not None:
            new_related = {other.pk for other in related_tools if other.pk != tool.pk}
            if new_related != set(tool.related_tools.values_list("pk", flat=True)):
                tool.related_tools.set(new_related)
                related_changed = True

        curated = phrases_changed or related_changed or any(name in CURATED_FIELDS for name in update_fields)
        if not (curated or update_fields):
            return False
        if curated:
            tool.curated_at = timezone.now()
            update_fields.append("curated_at")
        # Validate only what a curator wrote: upstream fields are the sync's business, whatever they hold.
        upstream = [f.name for f in Tool._meta.get_fields() if f.concrete and f.name not in wanted]
        tool.full_clean(exclude=upstream, validate_unique=False, validate_constraints=False)
        tool.save(update_fields=update_fields)
        pk = tool.pk
        transaction.on_commit(lambda: tools_changed.send(sender=Tool, tool_pks=[pk]))
    return True
