"""What Scout keeps in Weaviate, and under which names: shared by the connector (``weaviate``) and the index
lifecycle (``weaviate_lifecycle``). The errors and event kinds, the alias and the generation collections'
names, one object per tool (deterministic id, properties, named multi-vectors, the fingerprint reconcile
compares), the collection's schema and the visibility filter. Pure functions: the weaviate client is imported
where a function needs it."""

import hashlib
import json
import re
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
from django.core.exceptions import ImproperlyConfigured

from ..documents import ToolDoc
from ..engine.intent import tool_operation
from ..indexes import ToolSearchIndex
from ..text import first_sentence
from .base import IndexedTool

# Recorded with search.events (the kind is a plain string; it is not one of the stored choices yet).
EVENT_BACKEND_UNAVAILABLE = "backend_unavailable"
EVENT_BACKEND_INCOMPATIBLE = "backend_incompatible"
EVENT_INDEX_DRIFT = "index_drift"
TOOL_VECTOR = "tool"
NEGATIVES_VECTOR = "negatives"
UUID_NAMESPACE = "scout-tool"
MIN_SERVER_VERSION = (1, 32, 6)  # aliases since 1.32; a delete through an alias fails before 1.32.6
# ToolSearchIndex field -> Weaviate property. "server" is the filterable slug; its label is "server_label".
FIELD_PROPERTY = {f.name: ("server_label" if f.name == "server" else f.name) for f in ToolSearchIndex.fields}
HIT_PROPERTIES = ["tool_pk", "vector_kinds", "vector_texts", "model_key"]
_COLLECTION_NAME = re.compile(r"^[A-Z][_0-9A-Za-z]*$")


class WeaviateUnavailable(RuntimeError):
    """The server could not be reached, answered with an error, or not within the deadline."""


class WeaviateIncompatible(WeaviateUnavailable):
    """The server or its index cannot serve this Scout: too old, or vectors of another model or size."""


# -- naming, mapping and filters (pure functions) --------------------------------------------------------


def alias_name(prefix: str) -> str:
    """The alias searches go through. Weaviate class names start with an upper-case letter."""
    if not _COLLECTION_NAME.match(prefix):
        raise ImproperlyConfigured(f"SCOUT_WEAVIATE_PREFIX={prefix!r}: letters, digits, _; starting upper-case")
    return prefix


def collection_name(prefix: str, generation: str) -> str:
    """``<prefix>_<generation without dashes>``: one collection per full index generation."""
    cleaned = re.sub(r"[^0-9A-Za-z]", "", generation)
    if not cleaned:
        raise ValueError(f"generation {generation!r} has no usable characters")
    return f"{alias_name(prefix)}_{cleaned}"


def is_generation_collection(prefix: str, name: str) -> bool:
    return name.startswith(f"{prefix}_") and len(name) > len(prefix) + 1


def tool_uuid(pk: int) -> str:
    """Deterministic object id, so an incremental publish replaces a tool's object in place."""
    from weaviate.util import generate_uuid5

    return str(generate_uuid5(f"{UUID_NAMESPACE}:{int(pk)}"))


def tool_properties(doc: ToolDoc, kinds: Sequence[str] = (), texts: Sequence[str] = ()) -> dict[str, Any]:
    """The object stored for one tool: identity, the weighted text fields, and what explanations read."""
    properties: dict[str, Any] = {"tool_pk": int(doc.pk), "tool_id": doc.tool_id, "server": doc.server}
    for field_name, text in doc.field_texts().items():
        properties[FIELD_PROPERTY[field_name]] = text
    properties.update(
        {
            "tool_name": doc.name,
            "display_title": doc.title or doc.name,
            "summary": first_sentence(doc.purpose) or first_sentence(doc.description),
            "operation": sorted(tool_operation(doc.name, doc.purpose or doc.description, doc.read_only)),
            "vector_kinds": list(kinds),
            "vector_texts": list(texts),
            "negatives": list(doc.negatives),
        }
    )
    return properties


def tool_fingerprint(tool: IndexedTool, model: str) -> str:
    """What reconcile compares: a hash of the stored object (properties, vectors, model)."""
    digest = hashlib.sha256(model.encode())
    kinds = tool.vectors.kinds if tool.vectors is not None else ()
    texts = tool.vectors.texts if tool.vectors is not None else ()
    digest.update(json.dumps(tool_properties(tool.doc, kinds, texts), sort_keys=True, default=str).encode())
    if tool.vectors is not None:
        digest.update(np.ascontiguousarray(tool.vectors.vectors, dtype=np.float32).tobytes())
        if tool.vectors.negatives is not None:
            digest.update(np.ascontiguousarray(tool.vectors.negatives, dtype=np.float32).tobytes())
    return digest.hexdigest()


def tool_vectors(tool: IndexedTool) -> dict[str, list[list[float]]] | None:
    """Named multi-vectors for one tool (None when it has no vectors: BM25 still finds it)."""
    if tool.vectors is None or not len(tool.vectors.vectors):
        return None
    named = {TOOL_VECTOR: np.asarray(tool.vectors.vectors, dtype=np.float32).tolist()}
    if tool.vectors.negatives is not None and len(tool.vectors.negatives):
        named[NEGATIVES_VECTOR] = np.asarray(tool.vectors.negatives, dtype=np.float32).tolist()
    return named


def collection_properties() -> list:
    from weaviate.classes.config import DataType, Property, Tokenization

    def stored(name: str, data_type) -> "Property":
        return Property(name=name, data_type=data_type, index_searchable=False, index_filterable=False)

    return [
        Property(name="tool_pk", data_type=DataType.INT, index_filterable=True, index_range_filters=False),
        Property(name="tool_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD, index_searchable=False),
        Property(name="server", data_type=DataType.TEXT, tokenization=Tokenization.FIELD, index_searchable=False),
        # Stored for inspection only: BM25 is computed by Scout over the caller's visible tools.
        *[stored(FIELD_PROPERTY[f.name], DataType.TEXT) for f in ToolSearchIndex.fields],
        stored("tool_name", DataType.TEXT),
        stored("display_title", DataType.TEXT),
        stored("summary", DataType.TEXT),
        stored("operation", DataType.TEXT_ARRAY),
        stored("vector_kinds", DataType.TEXT_ARRAY),
        stored("vector_texts", DataType.TEXT_ARRAY),
        stored("negatives", DataType.TEXT_ARRAY),
        stored("model_key", DataType.TEXT),
        stored("fingerprint", DataType.TEXT),
    ]


def visibility_filter(pks: Collection[int]):
    """A set of tool pks as a filter applied inside the query (never a post-filter)."""
    from weaviate.classes.query import Filter

    wanted = sorted({int(pk) for pk in pks})
    if not wanted:
        raise ValueError("an empty visible set matches nothing; do not query")
    return Filter.by_property("tool_pk").contains_any(wanted)
