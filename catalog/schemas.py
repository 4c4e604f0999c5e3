"""Checking arguments against an upstream tool's ``inputSchema`` without backtracking regular expressions.

jsonschema runs ``pattern``, ``patternProperties`` and ``additionalProperties`` (next to patternProperties)
through Python's backtracking ``re``: an upstream pattern such as ``^(a+)+$`` and a caller's string of a few
dozen characters block the process for seconds, doubling with each character (ReDoS). Here those keywords
run on RE2, whose matching time is linear in the input. RE2 has no backreferences or lookaround: a schema
needing them is refused at sync and import (``schema_regex_problem``), and answered with a clear error at
execution, never handed to ``re``.

ORM-free, shared by catalog (sync-time refusal) and the gateway (argument validation).
"""

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import jsonschema
import re2
from jsonschema.exceptions import ValidationError

# Validators for schemas using these keywords would run Python ``re`` on caller data through code we do
# not replace (jsonschema's evaluated-properties walk): refused when patternProperties is used too.
UNEVALUATED_KEYWORD = "unevaluatedProperties"
MAX_PATTERNS_CACHED = 1024

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is reported to the operator, not logged by the C++ library


class UnsafeSchema(Exception):
    """A schema whose regular expressions cannot be checked without backtracking; the message says why."""


class SchemaCheckTooLong(Exception):
    """Checking arguments against a schema passed the time ``schema_check_deadline`` gave it."""


_deadline: ContextVar[float] = ContextVar("schema_check_deadline", default=math.inf)


@contextmanager
def schema_check_deadline(seconds: float) -> Iterator[None]:
    """Bound the checks run inside by ``arguments_validator``'s validators: past ``seconds`` the next keyword they
    evaluate raises SchemaCheckTooLong. A schema of a few lines can cost exponential time: subschemas that share
    references (``anyOf`` of two ``$ref``s to a definition that is itself such an ``anyOf``, 30 levels deep) are
    each evaluated once per path to them, 2^30 times for one failing string, as can a recursive schema per level
    of the caller's data. RE2 bounds one pattern; this bounds the walk."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


# The keywords through which a validator evaluates a subschema (every draft's names): the only way its work can
# multiply, so the only ones timed (a keyword such as ``type`` or ``minLength`` does the same work every time).
_APPLICATORS = frozenset(
    {
        "$ref", "$dynamicRef", "$recursiveRef", "allOf", "anyOf", "oneOf", "not", "if", "dependentSchemas",
        "dependencies", "prefixItems", "items", "additionalItems", "contains", "properties", "patternProperties",
        "additionalProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
    }
)  # fmt: skip


def _timed(keyword: Callable[..., Any]) -> Callable[..., Any]:
    def check(validator, value, instance, schema):
        if time.monotonic() > _deadline.get():
            raise SchemaCheckTooLong
        return keyword(validator, value, instance, schema)

    return check


@lru_cache(maxsize=MAX_PATTERNS_CACHED)
def _compiled(pattern: str):
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise UnsafeSchema(f"regular expression {pattern[:80]!r} is not supported ({detail[:120]})") from None


def _search(pattern: Any, text: str) -> bool:
    if not isinstance(pattern, str):
        raise UnsafeSchema("a regular expression in the schema is not a string")
    return _compiled(pattern).search(text) is not None


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"does not match {pattern!r}")


def _pattern_properties(validator, patterns, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator, additional, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [
        key for key in instance if key not in properties and not any(_search(pattern, key) for pattern in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield ValidationError("Additional properties are not allowed")


_SAFE_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}
_safe_classes: dict[type, type] = {}


def _safe_class(base: type) -> type:
    """``base`` (the draft the schema asks for) with the regex keywords on RE2 and its applicators timed."""
    if base not in _safe_classes:
        keywords = {**base.VALIDATORS, **_SAFE_KEYWORDS}
        timed = {name: _timed(check) for name, check in keywords.items() if name in _APPLICATORS}
        _safe_classes[base] = jsonschema.validators.extend(base, {**keywords, **timed})
    return _safe_classes[base]


def _walk(node: Any, path: str):
    """Every (path, kind, value) for the regex-bearing keywords in a schema document."""
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}"
            if key == "pattern" and isinstance(value, str):
                yield where, "pattern", value
            elif key == "patternProperties" and isinstance(value, dict):
                for pattern in value:
                    yield where, "pattern", pattern
            elif key == UNEVALUATED_KEYWORD:
                yield where, UNEVALUATED_KEYWORD, value
            yield from _walk(value, where)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}[{index}]")


def schema_regex_problem(schema: Any) -> str | None:
    """Why ``schema``'s regular expressions cannot be checked safely, or None when they can.

    Conservative: any ``pattern`` string or ``patternProperties`` key anywhere in the document must compile
    on RE2 (no backreferences, no lookaround), and ``unevaluatedProperties`` may not be combined with
    ``patternProperties`` (jsonschema would match those through ``re``)."""
    unevaluated, pattern_properties = None, False
    for where, kind, value in _walk(schema, "$"):
        if kind == UNEVALUATED_KEYWORD:
            unevaluated = unevaluated or where
            continue
        pattern_properties = pattern_properties or where.endswith(".patternProperties")
        try:
            _compiled(value)
        except UnsafeSchema as exc:
            return f"{exc} at {where}"
    if unevaluated and pattern_properties:
        return f"{UNEVALUATED_KEYWORD} (at {unevaluated}) together with patternProperties is not supported"
    return None


def arguments_validator(schema: dict[str, Any]):
    """A jsonschema validator for ``schema`` (its declared draft, 2020-12 by default) whose regular
    expressions run on RE2 and whose checks keep to ``schema_check_deadline``. Raises UnsafeSchema when the
    schema cannot be checked safely."""
    problem = schema_regex_problem(schema)
    if problem is not None:
        raise UnsafeSchema(problem)
    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return _safe_class(base)(schema)
