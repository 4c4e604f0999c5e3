"""Admin pages of records that only services write (sync runs, revisions, audit events, approvals, the query log)."""

from typing import Any

from django.db import models
from django.http import HttpRequest


def fields_shown(model: type[models.Model], shown_as: dict[str, list[str]]) -> list[str]:
    """A record page's read-only fields: ``model``'s fields in their order, each shown as itself or as the fields
    ``shown_as`` names for it (none: left out), e.g. ``{"id": [], "latency_ms": ["latency"]}``."""
    return [shown for field in model._meta.fields for shown in shown_as.get(field.name, [field.name])]


class ReadOnlyMixin:
    """Viewable, never added, changed or deleted through the admin (a ModelAdmin or an inline: put it first)."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def render_change_form(self, request: HttpRequest, context: dict, *args: Any, **kwargs: Any):
        # No "History" button (templates/admin/change_form_object_tools.html): nobody changes such a record in the
        # admin, so its history page could only ever say it has none.
        context["hide_history"] = True
        return super().render_change_form(request, context, *args, **kwargs)  # type: ignore[misc]
