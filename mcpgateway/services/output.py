"""The output policy: what an upstream tool returns is cleaned and marked as data before a model sees it (T9).

Every string of the result (text blocks, embedded resource texts, links, structured content, the tool's
own ``_meta``) goes through governance's ``clean_tool_output``: control characters, ANSI escapes, bidi
controls and zero-width characters are removed and instruction or role tags defanged. The result's
``_meta`` then carries ``OUTPUT_META_KEY``, a structured marker that the content is untrusted tool output;
the meta-tool descriptions and the server instructions tell the model the same in words.

A resource link whose URI is not an http or https URL (``javascript:``, ``file:``, ``data:``, a bare path) is
dropped, and a text block says how many were: a model or the host showing the link would follow it somewhere no
tool result should send it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import mcp_types as types

from governance.sanitize import clean_json_strings

from ..constants import OUTPUT_META_KEY


def result_for_model(result: types.CallToolResult, *, tool_id: str) -> types.CallToolResult:
    """``result`` under the output policy: every string cleaned, and marked as untrusted output of ``tool_id``."""
    raw: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    cleaned = clean_json_strings(raw)
    assert isinstance(cleaned, dict)
    content = cleaned.get("content") or []
    kept = [block for block in content if not _leads_off_the_web(block)]
    if len(kept) < len(content):
        dropped = len(content) - len(kept)
        note = (
            f"The gateway removed {dropped} resource link(s) of this result: only http and https links are passed on."
        )
        cleaned["content"] = [*kept, {"type": "text", "text": note}]
    meta = cleaned.get("_meta") if isinstance(cleaned.get("_meta"), dict) else {}
    cleaned["_meta"] = {**meta, OUTPUT_META_KEY: {"source": tool_id, "trust": "untrusted", "kind": "tool-output"}}
    return types.CallToolResult.model_validate(cleaned)


def _leads_off_the_web(block: Any) -> bool:
    """Whether ``block`` is a resource link whose URI is anything but an http(s) URL naming a host."""
    if not (isinstance(block, dict) and block.get("type") == "resource_link"):
        return False
    try:
        parts = urlsplit(str(block.get("uri", "")))
        return parts.scheme.lower() not in ("http", "https") or not parts.hostname
    except ValueError:
        return True
