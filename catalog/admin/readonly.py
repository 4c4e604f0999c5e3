"""Admin pages of records that only services write (sync runs, revisions, audit events, approvals, the query log)."""

from typing import Any

from django.http import HttpRequest


class ReadOnlyMixin:
    """Viewable, never added, changed or deleted through the admin (a ModelAdmin or an inline: put it first)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
