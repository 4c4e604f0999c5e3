"""Query-string filters for the governance endpoints. Bad values are 400s naming the parameter."""

from datetime import UTC, datetime

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import ValidationError

from catalog.api.params import param_choice
from catalog.models import Tool, ToolAlias
from governance.models import AuditEvent

from .serializers import AUDIT_EVENT_TYPES, AUDIT_OUTCOMES

TRUE_VALUES = {"true", "1", "yes"}
FALSE_VALUES = {"false", "0", "no"}
MAX_Q_CHARS = 200


def param_bool(params, name: str) -> bool | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if value.lower() in TRUE_VALUES:
        return True
    if value.lower() in FALSE_VALUES:
        return False
    raise ValidationError({name: ["must be true or false"]})


def param_datetime(params, name: str) -> datetime | None:
    value = params.get(name)
    if not value:
        return None
    try:
        parsed = parse_datetime(value)
        # In UTC: Postgres refuses an offset past 15:59 and SQLite's adapter a time past year 9999 in UTC (a 500).
        in_utc = parsed.astimezone(UTC) if parsed is not None and parsed.tzinfo is not None else None
    except (ValueError, OverflowError):
        in_utc = None
    if in_utc is None:
        raise ValidationError({name: ["must be an ISO 8601 time with a time zone, e.g. 2026-01-31T12:00:00Z"]})
    return in_utc


def tools_filter(qs: QuerySet[Tool], params) -> QuerySet[Tool]:
    """server (slug), q (words in id, name, titles, description, purpose, aliases), held, enabled."""
    if params.get("server"):
        qs = qs.filter(server__slug=params["server"])
    text = (params.get("q") or "").strip()
    if len(text) > MAX_Q_CHARS:
        raise ValidationError({"q": [f"at most {MAX_Q_CHARS} characters"]})
    for word in text.split():
        # The aliases as a subquery: a join per word multiplied a tool's rows by its aliases once per word (100
        # one-letter words: aliases ** 100 rows, a Postgres backend busy until its statement timeout, for ever on
        # SQLite).
        qs = qs.filter(
            Q(tool_id__icontains=word)
            | Q(title__icontains=word)
            | Q(upstream_title__icontains=word)
            | Q(description__icontains=word)
            | Q(purpose__icontains=word)
            | Q(pk__in=ToolAlias.objects.filter(text__icontains=word).values("tool_id"))
        )
    held = param_bool(params, "held")
    if held is True:
        qs = qs.filter(policy__held=True)
    elif held is False:
        qs = qs.exclude(policy__held=True)
    enabled = param_bool(params, "enabled")
    if enabled is not None:
        qs = qs.filter(enabled=enabled)
    return qs.distinct()


def audit_filter(qs: QuerySet[AuditEvent], params) -> QuerySet[AuditEvent]:
    """since/until (ISO times), user (username), event_type, outcome, tool (server::name)."""
    since, until = param_datetime(params, "since"), param_datetime(params, "until")
    if since:
        qs = qs.filter(created_at__gte=since)
    if until:
        qs = qs.filter(created_at__lt=until)
    if params.get("user"):
        qs = qs.filter(subject_shown=params["user"])  # another tenant's person is not found by name (Z12)
    event_type = param_choice(params, "event_type", AUDIT_EVENT_TYPES)
    if event_type:
        qs = qs.filter(event_type=event_type)
    outcome = param_choice(params, "outcome", AUDIT_OUTCOMES)
    if outcome:
        qs = qs.filter(outcome=outcome)
    if params.get("tool"):
        qs = qs.filter(tool_ref=params["tool"])
    return qs
