"""Catalog admin: where operators watch servers and syncs and curators make tools findable.

Upstream fields are read-only everywhere (only sync and import write them); curation goes through
``tool_curation_update``; SyncRuns and ToolRevisions are append-only records. Upstream text is untrusted:
everything rendered here goes through ``format_html``/``escape``, never ``mark_safe`` on raw input.
"""

from .records import SyncRunAdmin, ToolRevisionAdmin
from .servers import ServerAdmin
from .tools import ToolAdmin

__all__ = ["ServerAdmin", "SyncRunAdmin", "ToolAdmin", "ToolRevisionAdmin"]
