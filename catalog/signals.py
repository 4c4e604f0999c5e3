"""Signals other apps react to (dependencies point upward: catalog never imports them)."""

from typing import NamedTuple

from django.dispatch import Signal

from catalog.models import Tool, ToolRevision


class DefinitionChange(NamedTuple):
    """One tool whose upstream definition is new or changed. ``previous_hash`` is None at first sight."""

    tool: Tool
    revision: ToolRevision | None
    previous_hash: str | None


# Tools whose upstream definitions are new or changed: sent ONCE per reconciled listing, INSIDE the transaction
# that records them, so a receiver (governance's change review) can hold them atomically: no window where a
# changed tool is visible. A receiver handles the whole batch with a bounded number of queries.
# kwargs: changes (list[DefinitionChange]), never empty
tool_definitions_changed = Signal()

# Tools whose searchable content changed (upstream text, curation, enabled, removal, restore).
# Sent AFTER the transaction commits, so a receiver (search's reindex) never reads uncommitted rows.
# kwargs: tool_pks (list[int]); index (bool, default True): False when the sender defers derived indexes to an
# operator's full rebuild (``catalog_import --no-index``); caches must still be invalidated.
tools_changed = Signal()

# Tools or servers changed through bulk writes or QuerySet.update(), which send no model signals: tools
# added, changed, removed or restored by a listing, a server's status. Sent INSIDE the writing transaction,
# so a receiver (governance's visibility version) commits with the change. kwargs: none.
catalog_rows_changed = Signal()
