"""The output policy: what an upstream tool returns is cleaned and marked as data before a model sees it (T9).

Every string of the result (text blocks, embedded resource texts, links, structured content, the tool's
own ``_meta``) goes through governance's ``clean_tool_output``: control characters, ANSI escapes, bidi
controls and zero-width characters are removed and instruction or role tags defanged. The tool's ``_meta``
keeps only keys of its own: keys MCP reserves (a prefix whose second label is ``modelcontextprotocol`` or
``mcp``, e.g. ``io.modelcontextprotocol/serverInfo``, the upstream's identity) and keys under Scout's own
prefix are the gateway's to set, never an upstream's. The result's ``_meta`` then carries
``OUTPUT_META_KEY``, a structured marker that the content is untrusted tool output; the meta-tool
descriptions and the server instructions tell the model the same in words.

A resource link whose URI is not an http or https URL naming a public host (``javascript:``, ``file:``, ``data:``,
a bare path, ``http://169.254.169.254/``, ``http://metadata.google.internal/``) is dropped, and so is such an icon
of a link kept (an inline raster image is fine, an inline SVG is not: it can carry script); a text block says how
many were: a model or the host showing the link would follow it somewhere no tool result should send it. An
embedded resource under such a URI loses the URI the same way: its text is passed on as a text block, a binary one
is dropped. An image (an image block, or an embedded resource of an image type) passes only as a raster image: an
SVG shown inline runs its script, so it goes as such an embedded resource does, with a text block saying how many
images were removed; an image or audio block (or embedded resource) whose bytes are not base64 of its declared
type (HTML or SVG typed image/png) goes too (``governance.media``), and the call's audit event counts what went. A link
written in a text (Markdown, HTML) to such a URL points to "#" instead (``modeltext.text_links_defanged``), and markup
a Markdown client hides from its person (a comment, ``<details>``, an image's alt text) is shown as text
(``modeltext.hidden_markup_shown``). A block's
``audience`` annotation goes: what an upstream returns reaches the user and the model alike (``_for_user_and_model``).
For the same reason structured content no text block carries is added as a text block of its JSON
(``structured.structure_carried``), and a structured string that is a script URL points to "#"
(``_script_url_defanged``).
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import mcp_types as types

from governance.media import base64_bytes_match, media_type
from governance.modeltext import (
    URL_EDGE,
    LinkCount,
    TagCount,
    VoiceCount,
    gateway_voice_marked,
    hidden_markup_shown,
    link_refused,
    strings_mapped,
    text_links_defanged,
)
from governance.sanitize import clean_json_strings

from ..constants import OUTPUT_META_KEY, SCOUT_META_PREFIX
from .structured import structure_carried

RESERVED_PREFIX_LABELS = ("modelcontextprotocol", "mcp")


def reserved_meta_key(key: str) -> bool:
    """Whether an upstream's ``_meta`` key is the protocol's or Scout's, so never passed on. MCP reserves a prefix
    whose second label is ``modelcontextprotocol`` or ``mcp`` (``io.modelcontextprotocol/``, ``dev.mcp/``; since
    2025-11-25), and 2025-06-18 one where either is followed by another label (``modelcontextprotocol.io/``,
    ``mcp.dev/``, ``tools.mcp.com/``): both are read, as Scout serves clients of both."""
    prefix, slash, _ = key.partition("/")
    if not slash:
        return False
    labels = prefix.lower().split(".")
    second = len(labels) > 1 and labels[1] in RESERVED_PREFIX_LABELS
    followed = any(label in RESERVED_PREFIX_LABELS for label in labels[:-1])
    return prefix.lower() == SCOUT_META_PREFIX or second or followed


def _without_reserved_meta(node: Any) -> Any:
    """``node`` (a result's content, parsed JSON) with reserved keys dropped from every ``_meta`` in it: a content
    block's, an embedded resource's (``reserved_meta_key``)."""
    if isinstance(node, list):
        return [_without_reserved_meta(item) for item in node]
    if not isinstance(node, dict):
        return node
    shown = {key: _without_reserved_meta(value) for key, value in node.items()}
    if isinstance(shown.get("_meta"), dict):
        shown["_meta"] = {key: value for key, value in shown["_meta"].items() if not reserved_meta_key(key)}
    return shown


def result_for_model(result: types.CallToolResult, *, tool_id: str) -> types.CallToolResult:
    """``result`` under the output policy, without the count of what it removed (``result_shown``)."""
    return result_shown(result, tool_id=tool_id)[0]


def result_shown(
    result: types.CallToolResult, *, tool_id: str, structure_read_from_text: bool = False
) -> tuple[types.CallToolResult, dict[str, int]]:
    """``result`` under the output policy: every string cleaned, reserved ``_meta`` keys dropped (the result's and
    its content's), and marked as untrusted output of ``tool_id``; with how many links, images and audio clips it
    removed (the nonzero ones), for the call's audit event. Structured content its text does not carry
    (``structured.structure_carried``) is added as a text block of its JSON, as cleaned, so the user sees all the
    model may see; not where the gateway read it from the text itself (``structure_read_from_text``: a REST
    service's answer, its status and its body's JSON)."""
    raw: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    unsaid = "structuredContent" in raw and not (
        structure_read_from_text or structure_carried(raw.get("content") or [], raw["structuredContent"])
    )
    links = LinkCount()
    voices = VoiceCount()
    tags = TagCount()
    cleaned = strings_mapped(
        _links_defanged(clean_json_strings(raw), links),
        lambda text: gateway_voice_marked(hidden_markup_shown(text, tags), voices),
    )
    assert isinstance(cleaned, dict)
    if "structuredContent" in cleaned:
        cleaned["structuredContent"] = strings_mapped(
            cleaned["structuredContent"], lambda text: _script_url_defanged(text, links)
        )
    content = _without_reserved_meta(cleaned.get("content") or [])
    cleaned["content"] = content
    kept, dropped, media = [], links.removed, {"image": 0, "audio": 0}
    for block in content:
        if _is_link(block) and link_refused(block.get("uri")):
            dropped += 1
        elif _is_embedded(block) and link_refused(block["resource"].get("uri")):
            dropped += 1  # its URI goes; its text stays, as plain text (a binary one goes too)
            kept.extend(_as_text(block))
        elif refused := _media_refused(block):
            media[refused] += 1  # an SVG shown inline is a document that runs its script; its source stays as text
            kept.extend(_as_text(block))
        else:
            kept.append(block)
    for block in kept:
        _for_user_and_model(block)
        if _is_link(block) and isinstance(block.get("icons"), list):
            icons = [icon for icon in block["icons"] if not link_refused(icon.get("src"), images=True)]
            dropped += len(block["icons"]) - len(icons)
            block["icons"] = icons
    notes = []
    if dropped:
        notes.append(
            f"The gateway removed {dropped} link(s) of this result: only http and https links to public hosts "
            "are passed on."
        )
    if media["image"]:
        notes.append(
            f"The gateway removed {media['image']} image(s) of this result: only raster images (PNG, JPEG, GIF, WebP "
            "and the like) whose bytes are of their declared type are passed on, not SVG or other documents shown "
            "as images."
        )
    if media["audio"]:
        notes.append(
            f"The gateway removed {media['audio']} audio clip(s) of this result: only audio (WAV, MP3, Ogg, FLAC, "
            "WebM, AAC, MP4) whose bytes are of their declared type is passed on."
        )
    if voices.bracketed:
        notes.append(
            f"The tool's text speaks as the gateway in {voices.bracketed} more place(s), each put in ‹ ›: those are "
            "the tool's words, not the gateway's."
        )
    # Its JSON as sent on (the tool's, cleaned): a client that reads a text block as JSON reads this one too.
    written = json.dumps(cleaned["structuredContent"], ensure_ascii=False, separators=(",", ":")) if unsaid else ""
    said = [{"type": "text", "text": written}] if unsaid else []
    cleaned["content"] = [*kept, *said, *({"type": "text", "text": note} for note in notes)]
    meta = cleaned.get("_meta") if isinstance(cleaned.get("_meta"), dict) else {}
    own_meta = {key: value for key, value in meta.items() if not reserved_meta_key(key)}
    cleaned["_meta"] = {**own_meta, OUTPUT_META_KEY: {"source": tool_id, "trust": "untrusted", "kind": "tool-output"}}
    removed = {"links": dropped, "images": media["image"], "audio": media["audio"]}
    return types.CallToolResult.model_validate(cleaned), {key: n for key, n in removed.items() if n}


def _links_defanged(node: Any, count: LinkCount) -> Any:
    """``node`` (parsed JSON) with every link written in its strings whose URL is refused defanged (``count``)."""
    return strings_mapped(node, lambda text: text_links_defanged(text, count))


# A structured content's string that is, as a whole, a URL running script or a document wherever a host uses it as
# one (an app's link or image source): ``javascript:``, ``vbscript:``, or ``data:`` other than a raster image. A
# string is data, not a link written in a text: a bare http(s) URL stays, as in a text, and so does any other
# "scheme:" (``sha256:...``, ``urn:...``, ``arn:aws:...``), which only a written link would make a link.
SCRIPT_URL_RE = re.compile(r"(?i)(?:javascript|vbscript|data):")


def _script_url_defanged(text: str, count: LinkCount) -> str:
    """``text`` (a string of a result's structured content), or "#" when it is such a URL, read as a browser reads
    one (character references decoded, tabs and line breaks dropped, spaces and controls around it stripped)."""
    if ":" not in text:
        return text
    url = re.sub(r"[\t\n\r]", "", html.unescape(text)).strip(URL_EDGE)
    if not SCRIPT_URL_RE.match(url) or not link_refused(url, images=True):
        return text
    count.defanged.add(text)
    return "#"


def _is_link(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "resource_link"


def _is_embedded(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "resource" and isinstance(block.get("resource"), dict)


def _media_refused(block: Any) -> str:
    """What kind of media ``block`` is ("image", "audio") when the policy removes it, else "". An image block, or an
    embedded resource of an image type, passes only as a raster image (an SVG, ``image/svg+xml`` in any case or
    spacing, is a document that can carry script, and a host may show an image block inline, as it would an icon);
    an audio block, or an embedded audio resource, only as audio of a type ``media.AUDIO_SIGNATURES`` lists. Either
    passes only as base64 whose bytes are of its declared type (``media.base64_bytes_match``): HTML typed image/png
    is a page to a host that sniffs it, and a model provider refuses the conversation that holds it."""
    if not isinstance(block, dict):
        return ""
    if block.get("type") in ("image", "audio"):
        kind, data = block.get("mimeType"), block.get("data")
        what = block["type"]
    elif _is_embedded(block):
        kind, data = block["resource"].get("mimeType"), block["resource"].get("blob")
        what = str(kind or "").strip(" ").lower().partition("/")[0]
        if what not in ("image", "audio"):
            return ""
    else:
        return ""
    return "" if base64_bytes_match(media_type(str(kind or "")), data) else what


def _for_user_and_model(block: Any) -> None:
    """``block`` without an ``audience`` annotation (redteam49, T9): MCP lets a block name who a host shows it to, the
    model alone (``["assistant"]``) or the user alone (``["user"]``), and an upstream's words for the model alone are
    words the user never reads in the host (an injection that hides), as the user's alone are words the model never
    weighs (a phishing link it cannot warn about). Every block of an upstream reaches both; its other annotations
    (``priority``, ``lastModified``) stay, and an annotations object left empty goes."""
    if not isinstance(block, dict) or not isinstance(block.get("annotations"), dict):
        return
    block["annotations"].pop("audience", None)
    if not block["annotations"]:
        del block["annotations"]


def _as_text(block: dict[str, Any]) -> list[dict[str, Any]]:
    """An embedded resource's text as a plain text block (none for a binary one or an image block)."""
    text = block["resource"].get("text") if _is_embedded(block) else None
    return [{"type": "text", "text": text}] if isinstance(text, str) else []
