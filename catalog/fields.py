"""Model fields of the catalog."""

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models


def json_text(value: Any) -> str:
    """``value`` as ``OrderedJSONField`` stores it: two values of the same text have their keys in the same order."""
    return json.dumps(value)


class OrderedJSONField(models.TextField):
    """A JSON value kept as the JSON text it was written as, so an object's keys read back in the order they were
    given, on every database. Postgres' jsonb (a JSONField there) keeps an object's keys in its own order, shorter
    keys first, so a tool schema's properties were listed in another order than its upstream chose (the order a
    model reads them in) and its search document read differently than on SQLite (perf14, schema12; the idempotency
    result's TextField of redteam44 for the same reason). The one place the catalog's stored JSON is parsed.

    Written with ``json.dumps``' defaults, as Django's JSONField writes it on SQLite, so a column converted from a
    JSONField there keeps its text byte for byte. No JSON lookups (``__has_key``): the column is text.
    """

    empty_strings_allowed = False
    description = "A JSON object, kept as its text"

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(value)

    def to_python(self, value: Any) -> Any:
        return value  # already the value (TextField's would make it its str)

    def validate(self, value: Any, model_instance: models.Model | None) -> None:
        super().validate(value, model_instance)
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"Not JSON: {exc}", code="invalid") from None

    def get_prep_value(self, value: Any) -> str | None:
        return None if value is None else json_text(value)

    def value_to_string(self, obj: models.Model) -> Any:
        return self.value_from_object(obj)  # the value itself, as JSONField gives it to dumpdata

    def formfield(self, **kwargs: Any) -> forms.Field:
        return models.Field.formfield(self, **{"form_class": forms.JSONField, **kwargs})
