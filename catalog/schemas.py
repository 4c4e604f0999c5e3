"""Checking arguments against an upstream tool's ``inputSchema`` without backtracking regular expressions.

jsonschema runs ``pattern``, ``patternProperties`` and ``additionalProperties`` (next to patternProperties)
through Python's backtracking ``re``: an upstream pattern such as ``^(a+)+$`` and a caller's string of a few
dozen characters block the process for seconds, doubling with each character (ReDoS). Here those keywords
run on RE2, whose matching time is linear in the input. RE2 has no backreferences or lookaround: a schema
needing them is refused at sync and import (``schema_regex_problem``), and answered with a clear error at
execution, never handed to ``re``. A schema whose check can take exponential time (subschemas shared through
``$ref`` under anyOf, 2**40 evaluations in a few lines) is refused at sync and import too
(``schema_evaluation_problem``); a stored one is bounded at execution by ``schema_check_deadline``. jsonschema's
``uniqueItems`` compares every pair of items it cannot sort (objects, or a string among numbers): here it is one
pass over the items; ``anyOf`` and ``oneOf`` read each branch up to its first error; and every keyword is timed (an
``enum`` checked for each of a caller's items).

ORM-free, shared by catalog (sync-time refusal) and the gateway (argument validation).
"""

import math
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

import jsonschema
import re2
from jsonschema._utils import equal
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


def _enum(validator, enums, instance, schema):
    # jsonschema's own message quotes the whole enum in each error (Scout names the rule itself): a caller's 100,000
    # items failing a 400-name enum held 1.2 GB of messages.
    if all(not equal(each, instance) for each in enums):
        yield ValidationError("is not one of the allowed values")


def _unique_items(validator, unique, instance, schema):
    # jsonschema's own check compared each pair of items it could not sort: a caller's 40,000 numbers behind a string
    # (230 kB) held an ORM thread for minutes, past any deadline (no subschema is evaluated on the way).
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Hashable] = set()
    for item in instance:
        key = _equality_key(item)
        if key in seen:
            yield ValidationError("has non-unique elements")
            return
        seen.add(key)


def _equality_key(value: Any) -> Hashable:
    """A key two JSON values share exactly when JSON Schema calls them equal (jsonschema's ``equal``): numbers by
    value (1 and 1.0), a boolean never a number, objects whatever the order of their keys, arrays in order."""
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, dict):
        return ("object", frozenset((key, _equality_key(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return ("array", tuple(_equality_key(item) for item in value))
    return ("value", value)  # a string, a number or null: Python's equality is JSON Schema's (1 == 1.0, "1" != 1)


def _any_of(validator, branches, instance, schema):
    # jsonschema's own check kept every error of every failing branch (each quoting the failing value) to hang them on
    # the one error it yields, which Scout never reads: a caller's 50,000 nulls against four array branches took
    # 6 s of CPU and 556 MB (redteam41). A branch fails at its first error; the first branch that passes ends it.
    for index, branch in enumerate(branches):
        if next(validator.descend(instance, branch, schema_path=index), None) is None:
            return
    yield ValidationError("is not valid under any of the given schemas")


def _one_of(validator, branches, instance, schema):
    # As ``_any_of``: each branch is read up to its first error, and a second branch that passes ends the check.
    passed = 0
    for index, branch in enumerate(branches):
        if next(validator.descend(instance, branch, schema_path=index), None) is None:
            passed += 1
            if passed > 1:
                yield ValidationError("is valid under more than one of the given schemas")
                return
    if not passed:
        yield ValidationError("is not valid under any of the given schemas")


_SAFE_KEYWORDS = {
    "anyOf": _any_of,
    "oneOf": _one_of,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
    "enum": _enum,
}
_safe_classes: dict[type, type] = {}


def _safe_class(base: type) -> type:
    """``base`` (the draft the schema asks for) with the regex keywords on RE2, ``uniqueItems`` in one pass, ``enum``
    errors without the enum, and every keyword timed: not only a subschema's evaluation multiplies the work, the
    caller's data does too (an ``enum`` of 400 names checked for each of 100,000 items took 10 s, redteam39)."""
    if base not in _safe_classes:
        keywords = {**base.VALIDATORS, **_SAFE_KEYWORDS}
        timed = {name: _timed(check) for name, check in keywords.items()}
        _safe_classes[base] = jsonschema.validators.extend(base, timed)
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


# A schema evaluated this many times more than it has objects, for one level of the caller's data, is refused at sync:
# the largest of the 5,704 inputSchemas in the evaluation catalogs (and of the demo servers') counts 98 evaluations
# in all, while a few lines of shared references reach 2**40. A schema without shared references costs one
# evaluation per object at most, which its size limit bounds (SCOUT_MAX_TOOL_DEFINITION_BYTES): a large inlined
# OpenAPI body passes. The estimate stops counting just past the bound, so it stays cheap.
MAX_SCHEMA_EVALUATIONS = 10_000
MAX_RECURSIONS = 64  # references back to one schema node (real schemas: a few)
# Nesting levels a tool definition may have, as JSON and as subschemas on one path with references followed: the
# checks here and jsonschema's recurse per level, and a schema nested 500 deep (or a chain of 1,000 ``$ref``s) made
# them raise RecursionError, failing the server's whole sync. The deepest of the evaluation catalogs' 5,704
# inputSchemas nests 15 JSON levels, an OpenAPI chain of references cut at its 40th (MAX_DEPTH there) about 85; the
# MCP SDK refuses a message nested about 200 deep.
MAX_SCHEMA_DEPTH = 100

# Applicators whose subschemas apply to the instance itself, or to one of its members or elements. A step into the
# data is labelled (kind, key): a key of None stands for any member or element.
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_ONE = ("not", "if", "then", "else")
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
_ANY_ELEMENT = ("items", "additionalItems", "contains", "unevaluatedItems")
_ANY_MEMBER = ("additionalProperties", "propertyNames", "unevaluatedProperties")


def _children(node: dict) -> Iterator[tuple[str, Any, tuple | None]]:
    """Each subschema ``node`` can evaluate: (where, subschema, the step into the data it takes or None)."""
    for keyword in _IN_PLACE_LISTS:
        if isinstance(node.get(keyword), list):
            for index, child in enumerate(node[keyword]):
                yield f"{keyword}[{index}]", child, None
    for keyword in _IN_PLACE_ONE:
        if keyword in node:
            yield keyword, node[keyword], None
    for keyword in ("dependentSchemas", "dependencies"):
        if isinstance(node.get(keyword), dict):
            for name, child in node[keyword].items():
                yield f"{keyword}.{name}", child, None
    if isinstance(node.get("properties"), dict):
        for name, child in node["properties"].items():
            yield f"properties.{name}", child, ("member", name)
    if isinstance(node.get("patternProperties"), dict):
        for child in node["patternProperties"].values():
            yield "patternProperties", child, ("member", None)
    for keyword in _ANY_MEMBER:
        if keyword in node:
            yield keyword, node[keyword], ("member", None)
    for keyword in ("prefixItems", *_ANY_ELEMENT):
        value = node.get(keyword)
        if isinstance(value, list):  # prefixItems, or items as a tuple before 2020-12
            for index, child in enumerate(value):
                yield f"{keyword}[{index}]", child, ("element", index)
        elif keyword in node:
            yield keyword, value, ("element", None)


def _pointer(resource: Any, pointer: str) -> Any:
    """The node a JSON pointer (``/$defs/a``, or empty for ``resource`` itself) reaches, or None."""
    node = resource
    for part in pointer[1:].split("/") if pointer else []:
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _overlap(first: tuple, second: tuple) -> bool:
    """Whether two paths into the data can reach the same place (the shorter one a prefix of the longer)."""
    pairs = zip(first, second, strict=False)
    return all(a[0] == b[0] and (a[1] is None or b[1] is None or a[1] == b[1]) for a, b in pairs)


class _Evaluations:
    """How many subschema evaluations one level of the caller's data can cause: the paths through the applicators,
    with ``$ref`` followed, counted once per node (memoised) and saturating just past the bound. A ``$ref`` back to a
    node being counted (recursion) adds nothing per level of data unless it multiplies: two returns to that node that
    can reach the same place in the data (an anyOf of two recursive branches), or one that does not descend into the
    data at all (recursion without end), make the count unbounded."""

    def __init__(self, root: Any, bound: int):
        self.root = root
        self.memo: dict[int, tuple[int, dict]] = {}
        self.open: set[int] = set()
        self.where: str | None = None
        self.too_deep = False
        # A reference resolves in its own resource (the nearest subschema with an ``$id``), by pointer or anchor.
        self.resource: dict[int, Any] = {}
        self.anchors: dict[tuple[int, str], Any] = {}
        self.subschemas = 0
        pending = [(root, root)]
        while pending:
            node, resource = pending.pop()
            if not isinstance(node, dict):
                continue
            self.subschemas += 1
            identifier = node.get("$id", node.get("id"))
            identifier = identifier if isinstance(identifier, str) else ""
            if identifier and not identifier.startswith("#"):
                resource = node
            self.resource[id(node)] = resource
            plain_name = identifier[1:] if identifier.startswith("#") else None  # an anchor before 2019-09
            for name in (node.get("$anchor"), node.get("$dynamicAnchor"), plain_name):
                if isinstance(name, str) and name:
                    self.anchors.setdefault((id(resource), name), node)
            definitions = [node.get("$defs"), node.get("definitions")]
            children = [child for _, child, _ in _children(node)]
            children += [child for group in definitions if isinstance(group, dict) for child in group.values()]
            pending.extend((child, resource) for child in children)
        self.limit = bound + self.subschemas  # one evaluation per subschema, and ``bound`` more
        self.cap = self.limit + 1

    def resolve(self, node: dict, reference: Any) -> Any:
        """What a local reference in ``node`` points at, or None."""
        if not isinstance(reference, str) or not reference.startswith("#"):
            return None
        resource = self.resource.get(id(node), self.root)
        if reference[1:2] in ("", "/"):
            return _pointer(resource, reference[1:])
        return self.anchors.get((id(resource), reference[1:]))

    def count(self, node: Any, where: str, depth: int = 0) -> tuple[int, dict]:
        """(evaluations, returns): returns maps (open node, path into the data since it) to how many paths reach it.
        ``depth``: the subschemas above ``node`` on this path; past MAX_SCHEMA_DEPTH the count stops, refused."""
        if not isinstance(node, dict):
            return 1, {}
        if depth > MAX_SCHEMA_DEPTH:
            self.too_deep, self.where = True, self.where or where
            return self.cap, {}
        if id(node) in self.open:
            return 1, {(id(node), ()): 1}
        if id(node) in self.memo:
            return self.memo[id(node)]
        self.open.add(id(node))
        total, returns = 1, {}
        edges = [(f"{where}.{label}", child, step) for label, child, step in _children(node)]
        for keyword in _REFERENCES:
            target = self.resolve(node, node.get(keyword))
            if target is not None:
                edges.append((node[keyword], target, None))
        for child_where, child, step in edges:
            evaluations, child_returns = self.count(child, child_where, depth + 1)
            total = min(self.cap, total + evaluations)
            if total >= self.cap:  # refused: where its recursions lead no longer matters
                returns = {}
                break
            for (head, path), paths in child_returns.items():
                key = (head, (step, *path) if step else path)
                returns[key] = min(self.cap, returns.get(key, 0) + paths)
        self.open.discard(id(node))
        mine = [(path, paths) for (head, path), paths in returns.items() if head == id(node)]
        if total < self.cap and self._multiplies(mine):
            total = self.cap
        if total >= self.cap and self.where is None:
            self.where = where
        result = total, {key: paths for key, paths in returns.items() if key[0] != id(node)}
        self.memo[id(node)] = result
        return result

    @staticmethod
    def _multiplies(returns: list[tuple[tuple, int]]) -> bool:
        """Whether the recursions back to one node multiply its evaluations per level of data (more returns than a
        real schema has counts as multiplying, so that comparing them stays cheap)."""
        if len(returns) > MAX_RECURSIONS:
            return True
        if any(paths > 1 or not path for path, paths in returns):
            return True
        return any(_overlap(a, b) for i, (a, _) in enumerate(returns) for b, _ in returns[i + 1 :])


def schema_evaluation_problem(schema: Any, bound: int = MAX_SCHEMA_EVALUATIONS) -> str | None:
    """Why checking arguments against ``schema`` can take exponential time, or None when it cannot: subschemas
    shared through ``$ref`` under anyOf/oneOf/allOf (each evaluated once per path to it), or recursion that
    multiplies per level of the caller's data. ``bound`` evaluations are allowed beyond one per subschema.
    ``schema_check_deadline`` still bounds a stored schema at call time."""
    estimate = _Evaluations(schema, bound)
    evaluations, _ = estimate.count(schema, "$")
    if evaluations <= estimate.limit:
        return None
    if estimate.too_deep:
        return f"subschemas nest more than {MAX_SCHEMA_DEPTH} levels deep (references followed), at {estimate.where}"
    return (
        f"checking arguments can take over {estimate.limit} subschema evaluations, {bound} more than it has "
        f"subschemas (references shared or recursing under anyOf/oneOf/allOf), from {estimate.where}"
    )


def arguments_validator(schema: dict[str, Any]):
    """A jsonschema validator for ``schema`` (its declared draft, 2020-12 by default) whose regular
    expressions run on RE2 and whose checks keep to ``schema_check_deadline``. Raises UnsafeSchema when the
    schema cannot be checked safely."""
    problem = schema_regex_problem(schema)
    if problem is not None:
        raise UnsafeSchema(problem)
    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return _safe_class(base)(schema)
