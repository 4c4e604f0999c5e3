"""Signals other apps react to (dependencies point upward: catalog never imports them)."""

from django.dispatch import Signal

# A tool's upstream definition is new or changed. Sent INSIDE the transaction that records it, so a
# receiver (governance's change review) can hold the tool atomically: no window where it is visible.
# kwargs: tool (Tool), revision (ToolRevision), previous_hash (str | None: None for a first sight)
tool_definition_changed = Signal()

# Tools whose searchable content changed (upstream text, curation, enabled, removal, restore).
# Sent AFTER the transaction commits, so a receiver (search's reindex) never reads uncommitted rows.
# kwargs: tool_pks (list[int])
tools_changed = Signal()
