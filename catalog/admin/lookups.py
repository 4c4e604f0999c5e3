"""Lookups the admin refuses, for every ModelAdmin in the project: query-string lookups into JSON fields, times the
database cannot compare, and a raw-id box naming an object its field may not pick."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

from django.contrib.admin.widgets import ForeignKeyRawIdWidget
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest
from django.utils.dateparse import parse_datetime

from catalog.fields import OrderedJSONField

DATE_PARTS = ("year", "month", "day")
WIDEST_OFFSET = timedelta(hours=14)  # the widest UTC offset in use; Postgres refuses one past 15:59


def time_lookup_refused(lookup: str, value: Any) -> bool:
    """Whether ``value`` for ``lookup`` on a date or time field is one the admin would answer with a 500: a year its
    date hierarchy cannot step past (it takes year + 1), a time past year 9999 in UTC (SQLite) or an offset Postgres
    refuses. A value that is no year or time at all is left to Django, which refuses it as any bad value."""
    if not isinstance(value, str):
        return False
    if lookup.rsplit(LOOKUP_SEP, 1)[-1] in DATE_PARTS:
        return value.isdigit() and not (len(value) <= 4 and 1 <= int(value) <= 9998)
    try:
        parsed = parse_datetime(value.strip())
    except ValueError:
        return False
    if parsed is None or parsed.tzinfo is None:
        return False
    try:
        parsed.astimezone(UTC)
    except OverflowError:
        return True
    offset = parsed.utcoffset()
    return offset is not None and abs(offset) > WIDEST_OFFSET


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
            if isinstance(field, models.JSONField | OrderedJSONField):
                return False
            if isinstance(field, models.DateField) and time_lookup_refused(lookup, value):
                return False
            if not field.is_relation or field.related_model is None:
                break
            model = field.related_model
        return super().lookup_allowed(lookup, value, request)  # type: ignore[misc]
