"""Lookups the admin refuses, for every ModelAdmin in the project: query-string lookups into JSON fields, and a
raw-id box naming an object its field may not pick."""

from __future__ import annotations

from typing import Any

from django.contrib.admin.widgets import ForeignKeyRawIdWidget
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest


class ChoicesRawIdWidget(ForeignKeyRawIdWidget):
    """A raw-id box that names the object it holds only when its field may pick it. Django's looks any id up in the
    whole table, so an id typed into a form that then failed named another tenant's server, tool, agent or person
    beside the box (Z12)."""

    choices_queryset: models.QuerySet | None = None

    def label_and_url_for_value(self, value: Any) -> tuple[str, str]:
        key = self.rel.get_related_field().name
        try:
            if self.choices_queryset is None or not self.choices_queryset.filter(**{key: value}).exists():
                return "", ""
        except (ValueError, TypeError, ValidationError):
            return "", ""
        return super().label_and_url_for_value(value)


class RawIdChoicesMixin:
    """For a ModelAdmin or inline: its raw-id boxes name only objects among their field's choices (narrow the
    choices in ``formfield_for_foreignkey``, as for any other select)."""

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]
        if field is not None and type(field.widget) is ForeignKeyRawIdWidget:
            stock = field.widget
            field.widget = ChoicesRawIdWidget(stock.rel, stock.admin_site, attrs=stock.attrs, using=stock.db)
            field.widget.choices_queryset = field.queryset
        return field


class StrictLookupsMixin(RawIdChoicesMixin):
    """Refuses changelist lookups into JSON fields (``?payload__contains=``) with a 400, the way Django refuses
    any disallowed lookup. Which JSON lookups work differs per database (on SQLite ``contains`` fails only when
    the query runs, a 500), and no admin filter needs them.

    ``hidden_lookups`` names the fields some viewers read masked (another tenant's person on a shared row): any
    query-string lookup on them is refused too, or ``?human_subject__startswith=a`` would spell the hidden name
    out one letter at a time in the row count (Z12), or ``?user=17`` tell which ids have rows. Searches go through
    the masked values; ``filter_lookups`` are the parameters of the admin's own list filters on a hidden field,
    which narrow to what the viewer may see themselves."""

    model: type[models.Model]
    hidden_lookups: tuple[str, ...] = ()
    filter_lookups: tuple[str, ...] = ()

    def lookup_allowed(self, lookup: str, value: Any, request: HttpRequest | None = None) -> bool:
        model: Any = self.model
        first = lookup.split(LOOKUP_SEP)[0]
        try:
            first = model._meta.get_field(first).name  # ``user_id`` is the field ``user``
        except FieldDoesNotExist:
            pass
        if first in self.hidden_lookups and lookup not in self.filter_lookups:
            return False
        for part in lookup.split(LOOKUP_SEP):
            try:
                field = model._meta.get_field(part)
            except FieldDoesNotExist:
                break
            if isinstance(field, models.JSONField):
                return False
            if not field.is_relation or field.related_model is None:
                break
            model = field.related_model
        return super().lookup_allowed(lookup, value, request)  # type: ignore[misc]
