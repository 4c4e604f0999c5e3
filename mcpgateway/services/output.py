"""The output policy: what an upstream tool returns is cleaned and marked as data before a model sees it (T9).

Every string of the result (text blocks, embedded resource texts, links, structured content, the tool's
own ``_meta``) goes through governance's ``clean_tool_output``: control characters, ANSI escapes, bidi
controls and zero-width characters are removed and instruction or role tags defanged. The tool's ``_meta``
keeps only keys of its own: keys MCP reserves (a prefix whose second label is ``modelcontextprotocol`` or
``mcp``, e.g. ``io.modelcontextprotocol/serverInfo``, the upstream's identity) and keys under Scout's own
prefix are the gateway's to set, never an upstream's. The result's ``_meta`` then carries
``OUTPUT_META_KEY``, a structured marker that the content is untrusted tool output; the meta-tool
descriptions and the server instructions tell the model the same in words.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from governance.sanitize import clean_json_strings

from ..constants import OUTPUT_META_KEY, SCOUT_META_PREFIX

RESERVED_PREFIX_LABELS = ("modelcontextprotocol", "mcp")


def reserved_meta_key(key: str) -> bool:
    """Whether an upstream's ``_meta`` key is the protocol's (``io.modelcontextprotocol/``, ``dev.mcp/``: the
    second label of the prefix) or Scout's, so never passed on."""
    prefix, slash, _ = key.partition("/")
    if not slash:
        return False
    labels = prefix.lower().split(".")
    return prefix.lower() == SCOUT_META_PREFIX or (len(labels) > 1 and labels[1] in RESERVED_PREFIX_LABELS)


def result_for_model(result: types.CallToolResult, *, tool_id: str) -> types.CallToolResult:
    """``result`` under the output policy: every string cleaned, reserved ``_meta`` keys dropped, and marked as
    untrusted output of ``tool_id``."""
    raw: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    cleaned = clean_json_strings(raw)
    assert isinstance(cleaned, dict)
    meta = cleaned.get("_meta") if isinstance(cleaned.get("_meta"), dict) else {}
    kept = {key: value for key, value in meta.items() if not reserved_meta_key(key)}
    cleaned["_meta"] = {**kept, OUTPUT_META_KEY: {"source": tool_id, "trust": "untrusted", "kind": "tool-output"}}
    return types.CallToolResult.model_validate(cleaned)
