"""Query-string lookups the admin refuses, for every ModelAdmin in the project."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest


class StrictLookupsMixin:
    """Refuses changelist lookups into JSON fields (``?payload__contains=``) with a 400, the way Django refuses
    any disallowed lookup. Which JSON lookups work differs per database (on SQLite ``contains`` fails only when
    the query runs, a 500), and no admin filter needs them."""

    model: type[models.Model]

    def lookup_allowed(self, lookup: str, value: Any, request: HttpRequest | None = None) -> bool:
        model: Any = self.model
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
