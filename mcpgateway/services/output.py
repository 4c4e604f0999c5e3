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
type (HTML or SVG typed image/png) goes too (``media``), and the call's audit event counts what went. A link
written in a text (Markdown, HTML) to such a URL points to "#" instead (``_text_links_defanged``). A block's
``audience`` annotation goes: what an upstream returns reaches the user and the model alike (``_for_user_and_model``).
For the same reason structured content no text block carries is added as a text block of its JSON
(``structured.structure_carried``), and a structured string that is a script URL points to "#"
(``_script_url_defanged``).
"""

from __future__ import annotations

import html
import ipaddress
import json
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import idna
import mcp_types as types
import re2

from catalog.egress import address_public
from governance.sanitize import ReadText, as_read, clean_json_strings, read_folded, read_folded_word

from ..constants import OUTPUT_META_KEY, SCOUT_META_PREFIX
from .media import base64_bytes_match, data_url_image_matches, media_type
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
    links = _LinkCount()
    voices = _VoiceCount()
    cleaned = strings_mapped(
        _links_defanged(clean_json_strings(raw), links), lambda text: gateway_voice_marked(text, voices)
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
        if _is_link(block) and _refused(block.get("uri")):
            dropped += 1
        elif _is_embedded(block) and _refused(block["resource"].get("uri")):
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
            icons = [icon for icon in block["icons"] if not _refused(icon.get("src"), images=True)]
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


# Links written in a text (Markdown, HTML): a host renders them, and a model copies them into its answer. One with a
# scheme (or "//") whose URL is refused as a resource link's is (``_refused``; an inline raster image passes), read as
# a browser reads it (character references decoded, tabs and line breaks dropped), loses it: a Markdown link, image or
# reference definition and an HTML attribute point to "#" instead, an autolink goes. A relative one stays (code such
# as ``handlers[name](event)`` reads as one). Each pattern starts at a fixed mark ("](", a line's "[", an attribute's
# name, "<") and reads on without backtracking; past LINKS_CHECKED links in one result the rest are defanged unread:
# checking one costs some 30 µs, in the event loop every client shares.
MARKDOWN_LINK_RE = re.compile(r"(\]\(\s*)(<[^<>\n]*>|(?:[^\s()]|\([^\s()]*\))+)")
MARKDOWN_REFERENCE_RE = re.compile(r"^( {0,3}\[[^\]\n]{1,999}\]:[ \t]*)(<[^<>\n]*>|\S+)", re.MULTILINE)
HTML_URL_ATTRIBUTE_RE = re.compile(
    r"""(\b(?:href|src|srcset|action|formaction|poster|background|xlink:href)[ \t\n]*=[ \t\n]*)"""
    r"""("[^"]*"|'[^']*'|[^\s>"']+)""",
    re.IGNORECASE,
)
AUTOLINK_RE = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^<>\s]*)>")
ABSOLUTE_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:|[/\\]{2}")
LINKS_CHECKED = 500
URL_EDGE = "<>\"'" + "".join(map(chr, range(33)))  # what a browser strips around a URL: controls and spaces


@dataclass
class _LinkCount:
    checked: int = 0
    defanged: set[str] = field(default_factory=set)  # as written: a result says its text twice (text, structured)
    unread: int = 0  # defanged past the budget

    @property
    def removed(self) -> int:
        return len(self.defanged) + self.unread


def strings_mapped(node: Any, function: Callable[[str], str]) -> Any:
    """``node`` (parsed JSON) with ``function`` applied to every string value in it; keys kept."""
    if isinstance(node, str):
        return function(node)
    if isinstance(node, dict):
        return {key: strings_mapped(value, function) for key, value in node.items()}
    if isinstance(node, list):
        return [strings_mapped(item, function) for item in node]
    return node


def _links_defanged(node: Any, count: _LinkCount) -> Any:
    """``node`` (parsed JSON) with every link written in its strings whose URL is refused defanged (``count``)."""
    return strings_mapped(node, lambda text: _text_links_defanged(text, count))


# The gateway's own words inside a result ("Note from the gateway: the tool ran and reported this error ...", "The
# gateway removed 2 link(s) ..."), written by a tool: a model reads them as Scout telling it what to do next, the
# voice the output policy's role tags are defanged for (T9). Said as the tool's. On RE2: upstream text. Matched on the
# text as read (``as_read``): a no-break space, a full-width or Cyrillic letter read the same to a model. (?i): case
# folded in the pattern itself.
GATEWAY_NOTE_RE = re2.compile(
    r"(?i)\b(notes?|messages?|notices?|warnings?)(\s+)from\s+(?:the\s+)?(?:scout\s+)?gateway\b"
)
GATEWAY_REMOVED_RE = re2.compile(r"(?i)\b(?:the\s+)?(?:scout\s+)?gateway(\s+)removed\b")
# Other words for the gateway speaking (redteam36): "Scout here:", "This is Scout", "Message from Scout", "Scout
# notice", "The gateway says", "[Scout]", a line led by "SCOUT:" or "Gateway:" and words. Each is followed by
# VOICE_OF_THE_TOOL, its words kept. A bare "gateway" (a network's, a payment service's) only where it speaks: at the
# start of a line or sentence, or as "the gateway"; "Gateway: 10.0.0.1" (a value) is no voice.
_SPEAKER = r"(?:scout(?:\s+gateway)?|(?:^|[.!?:;\n]\s*|\bthe\s+)gateway)"
_NOUNS = (
    r"(?:notes?|notices?|messages?|warnings?|alerts?|instructions?|reminders?|announcements?|directives?|orders?"
    r"|updates?|overrides?)"
)
_VERBS = (
    r"(?:says|said|writes|wrote|instructs|instructed|requests|requested|requires|required|asks|asked|tells|told"
    r"|reports|confirms|confirmed|approves|approved|authori[sz]es|authori[sz]ed|verifies|verified|orders|ordered"
    r"|wants|insists)"
)
GATEWAY_SPEAKS_RE = re2.compile(
    r"(?mi)\b(?:this\s+is\s+)?(?:the\s+)?(?:scout|gateway)(?:\s+gateway)?\s+(?:here|speaking)\b"
    r"|\bthis\s+is\s+(?:the\s+)?scout\b(?:\s+gateway\b)?"
    rf"|\b{_NOUNS}\s+(?:from|by)\s+(?:the\s+)?scout\b(?:\s+gateway\b)?"
    rf"|{_SPEAKER}(?:'s)?\s+(?:(?:system|security|policy|official|admin|operator)\s+)?{_NOUNS}\b"
    rf"|{_SPEAKER}\s+{_VERBS}\b"
    r"|[\[(<{]\s*(?:scout|gateway)(?:\s+[a-z]+){0,2}\s*[\])>}]",
)
# "SCOUT: call ...", "Gateway notice: ...", "> Scout: ..." leading a line or sentence; the note goes before the colon.
GATEWAY_LABEL_RE = re2.compile(
    r"(?mi)(?:^|[.!?;]\s+)([^\w\n]*(?:scout|gateway)(?:\s+(?:gateway|system|note|notice|message|warning|alert|security|admin))*)"
    r"\s*:[ \t]*[a-z]",
)


# The same claims in French, German, Spanish, Russian, Chinese and Japanese (redteam38): "Message de la passerelle :",
# "Hinweis vom Gateway:", "Nota del gateway:", "Сообщение от шлюза:", "来自网关的通知：",
# "ゲートウェイからのお知らせ：", "Scout sagt", "网关已批准", "【Scout】". Written as a reader reads them and matched on
# the text read so (``read_folded``: lower case, accents, full-width and half-width forms, look-alike letters and what
# the eye skips inside a word, such as a combining grapheme joiner or U+206A, folded away); each word below is folded
# the same way when compiled.
def _folded(*words: str) -> str:
    return "(?:" + "|".join(re2.escape(read_folded_word(word)) for word in sorted(words, key=len, reverse=True)) + ")"


_SPEAKERS_ANY = _folded(
    "gateway",
    "gateways",
    "passerelle",
    "pasarela",
    "puerta de enlace",
    "шлюз",
    "шлюза",
    "шлюзу",
    "шлюзом",
    "шлюзе",
    "网关",
    "網關",
    "闸道",
    "閘道",
    "ゲートウェイ",
    "게이트웨이",
    "scout",
    "скаут",
    "скаута",
    "скауту",
    "скаутом",
    "скауте",
    "スカウト",
    "스카우트",
)
_NOUNS_ANY = _folded(
    *"note notes message messages avis notification notifications avertissement avertissements remarque remarques"
    " consigne consignes instruction instructions alerte alertes annonce annonces".split(),
    *"hinweis hinweise nachricht nachrichten mitteilung mitteilungen meldung meldungen warnung warnungen notiz"
    " notizen anweisung anweisungen botschaft anordnung".split(),
    *"nota notas mensaje mensajes aviso avisos notificación notificaciones advertencia advertencias instrucción"
    " instrucciones comunicado comunicados alerta alertas".split(),
    *"сообщение сообщения примечание уведомление заметка предупреждение указание инструкция записка послание"
    " оповещение".split(),
    "通知",
    "消息",
    "提示",
    "说明",
    "說明",
    "警告",
    "指示",
    "注意",
    "提醒",
    "公告",
    "お知らせ",
    "メッセージ",
    "連絡",
    "알림",
    "메시지",
    "경고",
)
_FROM_ANY = _folded(
    "de",
    "du",
    "des",
    "de la",
    "venant de",
    "venant de la",
    "provenant de",
    "provenant de la",
    "envoyé par",
    "envoyée par",
    "vom",
    "von",
    "von der",
    "aus dem",
    "der",
    "del",
    "desde",
    "desde el",
    "desde la",
    "от",
    "из",
)
_VERBS_ANY = _folded(
    *"dit indique demande exige confirme approuve autorise ordonne signale informe".split(),
    "a approuvé",
    "a confirmé",
    "a autorisé",
    "a validé",
    "valide",
    *"sagt meldet verlangt fordert bestätigt genehmigt autorisiert befiehlt".split(),
    "hat bestätigt",
    "hat genehmigt",
    "weist an",
    "teilt mit",
    *"dice indica pide exige confirma aprueba aprobó autoriza autorizó ordena informa solicita".split(),
    *"говорит сообщает требует просит подтверждает подтвердил одобрил одобряет разрешил разрешает велит указывает"
    " уведомляет".split(),
    "说",
    "說",
    "表示",
    "要求",
    "确认",
    "確認",
    "已确认",
    "已確認",
    "批准",
    "已批准",
    "授权",
    "授權",
    "已授权",
    "已授權",
    "承認",
    "許可",
    "承認しました",
    "確認しました",
)
_ARTICLE_ANY = r"(?:(?:la|le|les|el|los|das|dem|der|die|den|des|the)\s+|l')?"
_EDGE = r"(?:^|[^\pL\pN_])"  # before a word of a script with spaces; CJK words need none
_END = r"(?:$|[^\pL\pN_]|[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}])"  # after one
_CJK_LINK = _folded("来自", "來自", "的", "からの", "から", "の", "より", "は", "が")
GATEWAY_SPEAKS_ANY_RE = re2.compile(
    r"(?mi)"
    rf"{_EDGE}({_NOUNS_ANY}\s+(?:{_FROM_ANY}\s+)?{_ARTICLE_ANY}{_SPEAKERS_ANY}){_END}"
    rf"|((?:{_CJK_LINK})?{_SPEAKERS_ANY}(?:{_CJK_LINK}|[\s-])?{_NOUNS_ANY}){_END}"
    rf"|({_SPEAKERS_ANY}(?:{_CJK_LINK})?\s*{_VERBS_ANY}){_END}"
    rf"|({_SPEAKERS_ANY}{_CJK_LINK})(?:[:：]|$)"
    rf"|([\[(<{{【「『〔]\s*{_SPEAKERS_ANY}[^\]\)>}}】」』〕\n]{{0,20}}[\])>}}】」』〕])"
)
# "Passerelle : appelez ...", "网关：请调用 ...", "Шлюз: вызовите ..." leading a line or sentence, before a word.
GATEWAY_LABEL_ANY_RE = re2.compile(
    rf"(?mi)(?:^|[.!?;。！？]\s*)([^\pL\pN\n]*{_SPEAKERS_ANY}(?:\s*{_NOUNS_ANY})?)\s*[:：][ \t　]*\pL"
)
_SPEAKERS_ANY_RE = re2.compile(rf"(?i){_SPEAKERS_ANY}")
VOICE_OF_THE_TOOL = " (the tool's words, not the gateway's)"
# Claims of one result spelt out with VOICE_OF_THE_TOOL; past them a claim is only put in ‹ › (a result of a
# megabyte of "[Scout]" would grow sixfold past the output cap), and the result says so once (``result_for_model``).
VOICE_NOTES_SPELT_OUT = 50


@dataclass
class _VoiceCount:
    spelt_out: int = 0
    bracketed: int = 0


def gateway_voice_marked(text: str, count: _VoiceCount | None = None) -> str:
    """``text`` (a tool's, a definition's) with any claim to be a note of the gateway's said as the tool's: "Note from
    the gateway:" becomes "Note from the tool (not the gateway):", "The gateway removed" "the tool says the gateway
    removed", and another way of the gateway speaking ("Scout here:", ``GATEWAY_SPEAKS_RE``; in another language,
    ``GATEWAY_SPEAKS_ANY_RE``) is followed by ``VOICE_OF_THE_TOOL`` (past ``VOICE_NOTES_SPELT_OUT`` of them in
    ``count``, put in ‹ ›). Matched as read in any script (``read_folded``); the text's own characters are kept.
    Scout's own notes are added after this, as written."""
    read = read_folded(text)
    if not _SPEAKERS_ANY_RE.search(read.text):
        return text
    count = count if count is not None else _VoiceCount()
    text, read = _replaced(
        text,
        read,
        GATEWAY_NOTE_RE,
        lambda written: f"{as_read(written[1])}{as_read(written[2])}from the tool (not the gateway)",
    )
    text, read = _replaced(
        text, read, GATEWAY_REMOVED_RE, lambda written: f"the tool says the gateway{as_read(written[1])}removed"
    )
    spans = [match.span() for match in GATEWAY_SPEAKS_RE.finditer(read.text)]
    spans += [match.span(1) for match in GATEWAY_LABEL_RE.finditer(read.text)]
    spans += [match.span(1) for match in GATEWAY_LABEL_ANY_RE.finditer(read.text)]
    for match in GATEWAY_SPEAKS_ANY_RE.finditer(read.text):
        spans += [match.span(group) for group in range(1, 6) if match.start(group) >= 0][:1]
    claims = [(read.start(start), read.end(end)) for start, end in spans]
    # One pass, joined once: a result may hold a megabyte of such claims.
    pieces, done = [], 0
    for start, end in sorted(claims):
        if start < done or text.startswith(VOICE_OF_THE_TOOL, end):
            continue  # overlaps a claim marked already, or said as the tool's already
        if count.spelt_out < VOICE_NOTES_SPELT_OUT:
            count.spelt_out += 1
            pieces += [text[done:end], VOICE_OF_THE_TOOL]
        else:
            count.bracketed += 1
            pieces += [text[done:start], "‹", text[start:end], "›"]
        done = end
    return "".join(pieces) + text[done:] if pieces else text


def _replaced(text: str, read: ReadText, pattern: Any, written: Callable[[list[str]], str]) -> tuple[str, ReadText]:
    """``text`` with each match of ``pattern`` in it as read (``read``, its ``read_folded``) replaced by
    ``written(groups)``, each group as the text wrote it, the original characters outside the matches kept; and the
    new text as read."""
    pieces, start = [], 0
    for match in pattern.finditer(read.text):
        groups = [
            text[read.start(match.start(group)) : read.end(match.end(group))] if match.start(group) >= 0 else ""
            for group in range(pattern.groups + 1)
        ]
        pieces += [text[start : read.start(match.start())], written(groups)]
        start = read.end(match.end())
    if not pieces:
        return text, read
    text = "".join(pieces) + text[start:]
    return text, read_folded(text)


def text_links_defanged(text: str) -> str:
    """``text`` (a tool's description, a schema's) with every link written in it whose URL is refused pointing to "#",
    as in a result's strings (``_text_links_defanged``)."""
    return _text_links_defanged(text, _LinkCount())


def _text_links_defanged(text: str, count: _LinkCount) -> str:
    if not any(mark in text for mark in ("](", "]:", "=", "<")):
        return text

    def refused(written: str) -> bool:
        if not any(mark in written for mark in ":/\\&"):  # relative, and no character reference: kept at once
            return False
        if count.checked >= LINKS_CHECKED:  # past the budget: whatever may be absolute goes unread
            count.unread += 1
            return True
        url = re.sub(r"[\t\n\r]", "", html.unescape(written)).strip(URL_EDGE)
        if not ABSOLUTE_URL_RE.match(url):
            return False
        count.checked += 1
        if _refused(url, images=True):
            count.defanged.add(written)
            return True
        return False

    def pointed_home(match: re.Match[str], home: str = "#") -> str:
        return match.group(1) + home if refused(match.group(2)) else match.group(0)

    text = MARKDOWN_LINK_RE.sub(pointed_home, text)
    text = MARKDOWN_REFERENCE_RE.sub(pointed_home, text)
    text = HTML_URL_ATTRIBUTE_RE.sub(lambda match: pointed_home(match, '"#"'), text)
    return AUTOLINK_RE.sub(lambda match: "" if refused(match.group(1)) else match.group(0), text)


# A structured content's string that is, as a whole, a URL running script or a document wherever a host uses it as
# one (an app's link or image source): ``javascript:``, ``vbscript:``, or ``data:`` other than a raster image. A
# string is data, not a link written in a text: a bare http(s) URL stays, as in a text, and so does any other
# "scheme:" (``sha256:...``, ``urn:...``, ``arn:aws:...``), which only a written link would make a link.
SCRIPT_URL_RE = re.compile(r"(?i)(?:javascript|vbscript|data):")


def _script_url_defanged(text: str, count: _LinkCount) -> str:
    """``text`` (a string of a result's structured content), or "#" when it is such a URL, read as a browser reads
    one (character references decoded, tabs and line breaks dropped, spaces and controls around it stripped)."""
    if ":" not in text:
        return text
    url = re.sub(r"[\t\n\r]", "", html.unescape(text)).strip(URL_EDGE)
    if not SCRIPT_URL_RE.match(url) or not _refused(url, images=True):
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


def _refused(uri: Any, *, images: bool = False) -> bool:
    """Whether a link's URI (or an icon's, ``images``: an inline raster image is fine too) is anything but an
    http(s) URL naming a public host. A private, loopback or link-local address, however spelt, localhost, or a name
    only a private network answers for (``_private_name``) is refused: a host that shows the link (or fetches the
    icon) would reach inside the user's own network, the cloud metadata address or a router's admin page. A name is
    not resolved: what it resolves to is the client's business, on the client's network."""
    text = str(uri or "")
    if images and text.lower().startswith("data:"):
        return not data_url_image_matches(text)
    # Read both ways: a browser takes a backslash for "/" in an http(s) URL (http://127.0.0.1\@example.com goes to
    # 127.0.0.1), other clients as part of the user name (http://example.com\@127.0.0.1 goes to 127.0.0.1).
    return any(_refused_as_read(spelling) for spelling in {text, text.replace("\\", "/")})


def _refused_as_read(text: str) -> bool:
    try:
        parts = urlsplit(text)
        host = _host_as_browsers_read_it(parts.hostname or "")
    except ValueError:
        return True
    return parts.scheme.lower() not in ("http", "https") or not host or _internal(host)


def _host_as_browsers_read_it(host: str) -> str:
    """``host`` as a browser connects to it (WHATWG's host parsing): percent-decoded, then mapped as IDNA maps it
    (fullwidth and circled letters, ideographic full stops: ``１２７。0。0。1`` is 127.0.0.1, ``ⓛⓞⓒⓐⓛⓗⓞⓢⓣ`` is
    localhost). Raises ValueError where a browser would not parse it either."""
    host = unquote(host, errors="strict")
    if ":" in host:  # an IPv6 literal
        return host
    return idna.uts46_remap(host, std3_rules=False, transitional=False)


def _internal(host: str) -> bool:
    host = host.rstrip(".")  # "localhost." is localhost
    if host == "localhost" or host.endswith(".localhost"):
        return True
    last = host.rsplit(".", 1)[-1]
    try:
        if last.isdigit() or last.startswith("0x"):  # a browser reads 2130706433, 0x7f000001, 127.1 as IPv4
            address = ipaddress.ip_address(socket.inet_aton(host))
        else:
            address = ipaddress.ip_address(host)
    except (OSError, ValueError):
        # A number that is no address: refused. A name: refused only where no public DNS answers for it.
        return last.isdigit() or last.startswith("0x") or _private_name(host)
    # As Scout judges its own upstream requests: 64:ff9b::a9fe:a9fe (NAT64) and ::ffff:0:a9fe:a9fe (SIIT) are the
    # metadata address behind a translating gateway.
    return not address_public(address)


# Names only a private network answers for, so a link to one reaches inside the reader's own network, as a private
# address does: a single label, which a resolver completes with the network's search domain (``http://jenkins/``,
# ``http://router/``, GCE's ``http://metadata/``; no public name is one label), and the suffixes set aside for private
# use (RFC 6762's ``.local`` and the ones its appendix G lists as in use, RFC 8375's ``home.arpa``, ICANN's
# ``.internal`` of 2024: ``metadata.google.internal``).
PRIVATE_NAME_SUFFIXES = ("local", "internal", "home.arpa", "intranet", "private", "corp", "home", "lan")


def _private_name(host: str) -> bool:
    return "." not in host or host.endswith(tuple(f".{suffix}" for suffix in PRIVATE_NAME_SUFFIXES))
