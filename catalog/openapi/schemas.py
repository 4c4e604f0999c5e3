"""OpenAPI schema objects to self-contained JSON Schema: ``$ref``s inlined, cycles cut, 3.0 dialect mapped.

References are looked up with ``referencing`` (the resolver jsonschema uses: JSON pointers, escaping) over
the whole document; only local ``#/...`` references exist by then (document.py refuses remote ones before
anything is resolved, so nothing is ever fetched). ORM-free.
"""

from __future__ import annotations

from typing import Any

from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from catalog.schemas import MAX_SCHEMA_DEPTH

CYCLE_MARKER = "x-scout-cycle"
MAX_DEPTH = 40
# OpenAPI 3.0 keywords that are not JSON Schema and mean nothing to a validator or a model.
DROPPED_KEYWORDS = frozenset({"discriminator", "xml", "externalDocs", "nullable"})


class SchemaResolveError(ValueError):
    """A reference that points nowhere in the document."""


class SchemaResolver:
    """Inline the local references of one document, remembering expansions that cut no cycle."""

    def __init__(self, document: dict[str, Any], *, openapi_30: bool) -> None:
        resource = Resource.from_contents(document, default_specification=DRAFT202012)
        self._resolver = Registry().with_resource("", resource).resolver()
        self._openapi_30 = openapi_30
        self._memo: dict[str, Any] = {}

    def lookup(self, ref: str) -> Any:
        try:
            return self._resolver.lookup(ref).contents
        except Unresolvable as exc:
            raise SchemaResolveError(f"$ref {ref!r} points nowhere in the document") from exc

    def deref(self, node: Any) -> Any:
        """A non-schema node (a parameter, a request body) with its own top-level ``$ref`` followed."""
        seen: set[str] = set()
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen:
                raise SchemaResolveError(f"$ref {ref!r} refers to itself")
            seen.add(ref)
            node = self.lookup(ref)
        return node

    def schema(self, node: Any, *, request: bool = True) -> Any:
        """``node`` as plain JSON Schema. ``request``: drop ``readOnly`` properties (responses only)."""
        result, _cut = self._walk(node, (), request)
        return result

    def _walk(self, node: Any, stack: tuple[str, ...], request: bool, depth: int = 0) -> tuple[Any, bool]:
        """``node`` expanded, and whether a cycle was cut in it. ``depth``: its nesting once references are expanded;
        past MAX_SCHEMA_DEPTH the operation is refused (a chain of references to nested schemas recursed here until
        RecursionError, which failed the whole sync; sync would refuse the tool for it anyway)."""
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaResolveError(
                f"the schema nests more than {MAX_SCHEMA_DEPTH} levels deep once its $refs are expanded"
            )
        if isinstance(node, list):
            items = [self._walk(item, stack, request, depth + 1) for item in node]
            return [item for item, _ in items], any(cut for _, cut in items)
        if not isinstance(node, dict):
            return node, False
        if len(stack) > MAX_DEPTH:
            note = f"(more than {MAX_DEPTH} nested references: not expanded)"
            return {CYCLE_MARKER: "depth", "description": note}, True
        ref = node.get("$ref")
        if isinstance(ref, str):
            return self._walk_ref(node, ref, stack, request, depth)
        out: dict[str, Any] = {}
        cut = False
        for key, value in node.items():
            if key in DROPPED_KEYWORDS:
                continue
            if key in ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"):
                if isinstance(value, dict):
                    walked = {name: self._walk(sub, stack, request, depth + 2) for name, sub in value.items()}
                    out[key] = {name: schema for name, (schema, _) in walked.items()}
                    cut = cut or any(c for _, c in walked.values())
                    continue
            if key in ("example", "examples", "enum", "const", "default", "required"):
                out[key] = value  # data, not schemas: nothing to resolve inside
                continue
            out[key], sub_cut = self._walk(value, stack, request, depth + 1)
            cut = cut or sub_cut
        self._map_dialect(node, out)
        if request:
            _drop_read_only(out)
        return out, cut

    def _walk_ref(
        self, node: dict[str, Any], ref: str, stack: tuple[str, ...], request: bool, depth: int
    ) -> tuple[Any, bool]:
        if ref in stack:
            name = ref.rsplit("/", 1)[-1]
            return {CYCLE_MARKER: ref, "description": f"(recursive: {name} again, not expanded)"}, True
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        memo_key = f"{request}:{ref}"
        if memo_key in self._memo and not siblings:
            return self._memo[memo_key], False
        target, cut = self._walk(self.lookup(ref), (*stack, ref), request, depth)
        if not cut:
            self._memo[memo_key] = target
        if siblings and isinstance(target, dict):
            # OpenAPI 3.1 allows keywords beside $ref (a description, say); they refine the target.
            extra, extra_cut = self._walk(siblings, stack, request, depth)
            return {**target, **extra}, cut or extra_cut
        return target, cut

    def _map_dialect(self, node: dict[str, Any], out: dict[str, Any]) -> None:
        if not self._openapi_30:
            return
        if node.get("nullable") is True:
            kind = out.get("type")
            if isinstance(kind, str):
                out["type"] = [kind, "null"]
            elif "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
            if out.get(flag) is True and bound in out:
                out[flag] = out.pop(bound)
            elif out.get(flag) is False:
                out.pop(flag)


def _drop_read_only(schema: dict[str, Any]) -> None:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return
    read_only = [name for name, sub in properties.items() if isinstance(sub, dict) and sub.get("readOnly") is True]
    for name in read_only:
        del properties[name]
    if read_only and isinstance(schema.get("required"), list):
        schema["required"] = [name for name in schema["required"] if name not in read_only]


def merge_all_of(schema: Any) -> Any:
    """An ``allOf`` of object schemas as one object (properties and required combined); else unchanged."""
    if not isinstance(schema, dict) or not isinstance(schema.get("allOf"), list):
        return schema
    parts = [merge_all_of(part) for part in schema["allOf"]]
    if not all(isinstance(part, dict) and _is_object(part) and "allOf" not in part for part in parts):
        return schema
    merged: dict[str, Any] = {"type": "object", "properties": {}}
    required: list[str] = []
    for part in [*parts, {k: v for k, v in schema.items() if k != "allOf"}]:
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"].update(value)
            elif key == "required" and isinstance(value, list):
                required.extend(name for name in value if name not in required)
            elif key != "type":
                merged[key] = value
    if required:
        merged["required"] = required
    return merged


def _is_object(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (kind is None and "properties" in schema)
