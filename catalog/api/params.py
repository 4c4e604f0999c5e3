"""Query-string parameters shared by the REST endpoints. A bad value is a 400 naming the parameter, never a
silently empty list (a mistyped ``?status=failure`` must not read as "no failed runs")."""

from rest_framework.exceptions import ValidationError


def param_choice(params, name: str, choices) -> str | None:
    value = params.get(name)
    if not value:
        return None
    if value not in choices:
        raise ValidationError({name: [f"must be one of: {', '.join(choices)}"]})
    return value
