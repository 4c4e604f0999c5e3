"""Whether a tool result's text carries its structured content (T9, redteam51).

A host may show the user a result's text and give the model its ``structuredContent`` (MCP 2025-06-18 and later),
so structured content the text does not say is an upstream speaking to the model behind the user's back, as an
``audience: ["assistant"]`` block was (redteam49). MCP asks a tool that returns structured content to return its
serialized JSON in a text block too (2025-11-25: "SHOULD also return the serialized JSON in a TextContent block";
2026-07-28: "functionally equivalent unstructured content"); where no text block does, the output policy adds one
(``output.result_shown``). Compared as parsed JSON, never as written: key order, spacing and escapes are the tool's.
"""

from __future__ import annotations

import json
from typing import Any


def structure_carried(content: list[Any], structured: Any) -> bool:
    """Whether the text blocks of ``content`` (a result's, parsed JSON) carry ``structured``: one of them is its
    JSON, or the JSON of the one value it names (``_one_named_value``), or, the Python SDK's result of a tool
    returning a plain value (``{"result": value}``), the text blocks are that value said as the SDK says it
    (``said_as_texts``)."""
    texts = [block["text"] for block in content if _is_text(block)]
    wanted = _canonical(structured)
    if wanted is None:
        return False
    if any(_canonical(_parsed(text)) == wanted for text in texts):
        return True
    named = _canonical(_one_named_value(structured))  # server-memory's {"entities": [...]} beside the list's JSON
    if named not in (None, "null") and any(_canonical(_parsed(text)) == named for text in texts):
        return True
    if isinstance(structured, dict) and list(structured) == ["result"]:
        said = said_as_texts(structured["result"])
        return len(said) == len(texts) and all(map(_says, texts, said))
    return False


def _one_named_value(structured: Any) -> Any:
    """The value of ``structured`` when it is an object of one key, a short identifier, and the value an array or an
    object: an output schema must describe an object, so a tool answering a list names it (server-memory's
    create_entities: ``{"entities": [...]}``, its text the list's JSON). Anything else: None. The key is the one
    word the text does not say; an identifier of at most 32 characters, it cannot carry a sentence."""
    if not (isinstance(structured, dict) and len(structured) == 1):
        return None
    [(key, value)] = structured.items()
    if isinstance(key, str) and key.isidentifier() and key.isascii() and len(key) <= 32:
        return value if isinstance(value, (list, dict)) else None
    return None


def said_as_texts(value: Any) -> list[Any]:
    """The values the Python SDK (``MCPServer``) writes one text block each for, for a tool returning ``value``: none
    for None, each item of a list in turn, else the value (a string as itself, anything else as its JSON)."""
    if value is None:
        return []
    if isinstance(value, list):
        return [said for item in value for said in said_as_texts(item)]
    return [value]


def _says(text: str, value: Any) -> bool:
    if isinstance(value, str):
        return text == value
    wanted = _canonical(value)
    return wanted is not None and _canonical(_parsed(text)) == wanted


def _is_text(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)


_NOT_JSON = object()


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _canonical(value: Any) -> str | None:
    """``value`` written one way for comparing (sorted keys, no spaces): ``1`` and ``true``, ``1`` and ``1.0`` stay
    apart, as Python's ``==`` would not keep them. None for what is not JSON."""
    if value is _NOT_JSON:
        return None
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None
