"""A tool's admin history (Django's LogEntry, its *History* page and its curator's "Recent actions") for curation made
outside the tool's form: the workbench's attach and a learned request's promotion or rejection wrote nothing there,
so the curator's home said "None available" after a morning of curation, and the tool's history missed its example
requests' origin."""

from django.contrib.admin.models import CHANGE, LogEntry

from catalog.models import Tool


def tool_history_note(*, user, tool: Tool, message: str) -> None:
    """Record on ``tool``'s history that ``user`` changed it, in ``message``'s words (a plain sentence)."""
    LogEntry.objects.log_actions(
        user_id=user.pk, queryset=[tool], action_flag=CHANGE, change_message=message, single_object=True
    )
