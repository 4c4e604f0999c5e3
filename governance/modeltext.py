"""Definition and result texts as a model is shown them (T9): links to anything but a public web host pointing to
"#", a claim to be the gateway's note said as the tool's, markup a Markdown client hides from its person shown as
text, and ``text_for_model`` (with ``clean_for_model``) for a
definition's texts and ``schema_texts_for_model`` for a schema's. Pure text functions: the gateway's output policy
and discovery, and the REST tool pages a token acting for an agent reads (redteam53), serve the same text.
"""

from __future__ import annotations

import html
import ipaddress
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import idna
import re2

from catalog.egress import address_public

from .media import data_url_image_matches
from .sanitize import ReadText, as_read, clean_for_model, read_folded, read_folded_word, strings_in

# Links written in a text (Markdown, HTML): a host renders them, and a model copies them into its answer. One with a
# scheme (or "//") whose URL is refused as a resource link's is (``link_refused``; an inline raster image passes), read
# as a browser reads it (character references decoded, tabs and line breaks dropped), loses it: a Markdown link, image
# or reference definition and an HTML attribute point to "#" instead, an autolink goes. A relative one stays (code such
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
class LinkCount:
    checked: int = 0
    defanged: set[str] = field(default_factory=set)  # as written: a result says its text twice (text, structured)
    unread: int = 0  # defanged past the budget

    @property
    def removed(self) -> int:
        return len(self.defanged) + self.unread


# A key of letters, digits and ``_.-`` only ("structuredContent", "order_id"): no link, voice or markup can be written
# in it, so mapping it is skipped (most keys of a large result).
_PLAIN_KEY_RE = re.compile(r"[A-Za-z0-9_.\-]*")


def strings_mapped(node: Any, function: Callable[[str], str]) -> Any:
    """``node`` (parsed JSON) with ``function`` applied to every string in it, the keys of its objects too: a model
    reads a key as it reads a value (redteam57: "Note from the gateway: …" as a key reached it as written)."""
    if isinstance(node, str):
        return function(node)
    if isinstance(node, dict):
        return {_key_mapped(key, function): strings_mapped(value, function) for key, value in node.items()}
    if isinstance(node, list):
        return [strings_mapped(item, function) for item in node]
    return node


def _key_mapped(key: Any, function: Callable[[str], str]) -> Any:
    return key if not isinstance(key, str) or _PLAIN_KEY_RE.fullmatch(key) else function(key)


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
class VoiceCount:
    spelt_out: int = 0
    bracketed: int = 0


def gateway_voice_marked(text: str, count: VoiceCount | None = None) -> str:
    """``text`` (a tool's, a definition's) with any claim to be a note of the gateway's said as the tool's: "Note from
    the gateway:" becomes "Note from the tool (not the gateway):", "The gateway removed" "the tool says the gateway
    removed", and another way of the gateway speaking ("Scout here:", ``GATEWAY_SPEAKS_RE``; in another language,
    ``GATEWAY_SPEAKS_ANY_RE``) is followed by ``VOICE_OF_THE_TOOL`` (past ``VOICE_NOTES_SPELT_OUT`` of them in
    ``count``, put in ‹ ›). Matched as read in any script (``read_folded``); the text's own characters are kept.
    Scout's own notes are added after this, as written."""
    read = read_folded(text)
    if not _SPEAKERS_ANY_RE.search(read.text):
        return text
    count = count if count is not None else VoiceCount()
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


def text_links_defanged(text: str, count: LinkCount | None = None) -> str:
    """``text`` (a tool's description, a schema's, a string of a result) with every link written in it whose URL is
    refused pointing to "#" (the links checked and defanged counted in ``count``, one per result)."""
    count = count if count is not None else LinkCount()
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
        if link_refused(url, images=True):
            count.defanged.add(written)
            return True
        return False

    def pointed_home(match: re.Match[str], home: str = "#") -> str:
        return match.group(1) + home if refused(match.group(2)) else match.group(0)

    text = MARKDOWN_LINK_RE.sub(pointed_home, text)
    text = MARKDOWN_REFERENCE_RE.sub(pointed_home, text)
    text = HTML_URL_ATTRIBUTE_RE.sub(lambda match: pointed_home(match, '"#"'), text)
    return AUTOLINK_RE.sub(lambda match: "" if refused(match.group(1)) else match.group(0), text)


def link_refused(uri: Any, *, images: bool = False) -> bool:
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


# Markup a Markdown-rendering client hides from its person while a model reads every word of it (redteam59, T9/T6):
# an HTML comment, declaration or processing instruction ("<!", "<?"); an HTML tag that hides text or carries it in an
# attribute (``<details>``'s body, ``<img alt>``, ``<span style="display:none">``, ``<template>``, ``<script>``, a tag
# a client drops as unknown, such as ``List<String>``'s); a Markdown image (its alt text) and a reference definition
# (its whole line). Tags are CommonMark's raw HTML open tags, on RE2 (upstream text). Its Python binding costs some
# 10 µs a tag, in the event loop every client shares: past HTML_TAGS_READ "<" in one result (``TagCount``), every "<"
# is shown as "‹" unread.
HTML_OPEN_TAG_RE = re2.compile(
    r"<([A-Za-z][A-Za-z0-9-]*)((?:\s+[A-Za-z_:][A-Za-z0-9_.:-]*(?:\s*=\s*(?:[^\s\"'=<>`]+|'[^']*'|\"[^\"]*\"))?)*)"
    r"(\s*/?)>"
)
HTML_ATTRIBUTE_NAME_RE = re2.compile(r"\s+([A-Za-z_:][A-Za-z0-9_.:-]*)(?:\s*=\s*(?:[^\s\"'=<>`]+|'[^']*'|\"[^\"]*\"))?")
HTML_TAGS_READ = 1000
# Tags whose text a client shows where it stands, with the attributes that hide nothing (a link's text is shown, its
# address is checked by ``text_links_defanged``). Any other tag, or one of these with another attribute (``style``,
# ``hidden``, ``class``, ``title``), is shown as text.
SHOWN_TAGS = {
    **dict.fromkeys(
        "b i em strong u s strike del ins code kbd samp var tt pre br wbr hr span blockquote ul li dl dt dd table "
        "thead tbody tfoot tr caption sub sup mark small big q cite summary center".split(),
        frozenset(),
    ),
    **dict.fromkeys("p div h1 h2 h3 h4 h5 h6".split(), frozenset({"align"})),
    "a": frozenset({"href", "target", "rel"}),
    "ol": frozenset({"start"}),
    "td": frozenset({"align", "colspan", "rowspan"}),
    "th": frozenset({"align", "colspan", "rowspan"}),
}


@dataclass
class TagCount:
    read: int = 0


def _tag_shown(match: Any) -> str:
    name, attributes, end = match.groups()
    allowed = SHOWN_TAGS.get(name.lower())
    if allowed is not None and (not attributes or _attribute_names(attributes) <= allowed):
        return match.group(0)
    return f"‹{name}{attributes}{end}›"


def _attribute_names(attributes: str) -> set[str]:
    return {name.lower() for name in HTML_ATTRIBUTE_NAME_RE.findall(attributes)}


def _definition_shown(line: str) -> str:
    """A Markdown reference definition's line (``[label]: url "title"``, up to three spaces in; not a footnote's
    ``[^1]:``, which is shown) with its "[" escaped, else ``line``."""
    label = line.lstrip(" ")
    if label.startswith("[") and not label.startswith("[^") and "]:" in label and len(line) - len(label) <= 3:
        return line[: len(line) - len(label)] + "\\" + label
    return line


def hidden_markup_shown(text: str, count: TagCount | None = None) -> str:
    """``text`` (a definition's, a result's) with the markup a Markdown-rendering client hides from its person written
    so the client shows it as text, every word kept: a Markdown image's "[" and a reference definition's escaped with
    a backslash; an HTML comment's, declaration's or processing instruction's "<" as "‹"; a hiding tag's brackets (any
    tag but ``SHOWN_TAGS`` with their attributes) as ‹ ›, as role tags are (``clean_tool_output``). The person then
    sees what the model reads (redteam59); an instruction in it holds the tool at sync, as the screen reads it too.
    The "<" read are counted in ``count``, one per result."""
    if "![" in text:
        text = text.replace("![", "!\\[")
    if "]:" in text:
        text = "\n".join(_definition_shown(line) for line in text.split("\n"))
    if "<" not in text:
        return text
    text = text.replace("<!", "‹!").replace("<?", "‹?")
    count = count if count is not None else TagCount()
    count.read += text.count("<")
    if count.read > HTML_TAGS_READ:
        return text.replace("<", "‹")
    return HTML_OPEN_TAG_RE.sub(_tag_shown, text)


def text_for_model(text: str) -> str:
    """A definition's text (an upstream's, or a curator's) as a model is shown it: ``clean_for_model``, and a link
    written in it to anything but a public web host pointing to "#", as in a tool's result (T9): a host renders an
    answer's text as Markdown, and a model copies a link it read into its own answer. A claim to be a note of the
    gateway's is said as the tool's (``gateway_voice_marked``), and markup a client would hide from its person is
    shown as text (``hidden_markup_shown``)."""
    return gateway_voice_marked(hidden_markup_shown(text_links_defanged(clean_for_model(text)))) if text else ""


def texts_for_model(value: Any) -> Any:
    """``value`` (parsed JSON) with ``text_for_model`` applied to every string in it (an annotation of a list of texts
    too); keys kept."""
    return strings_mapped(value, text_for_model)


# JSON Schema keywords whose value is a schema, a list of schemas, or a map of names to schemas.
SUBSCHEMA = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
SUBSCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Keywords whose strings a validator, or a client mirroring an argument into a header, reads exactly: the values
# allowed, the names required, types, formats, patterns, references. Kept as written, with the names of
# ``SUBSCHEMA_MAPS`` (a property's name is what a call sends).
_SCHEMA_EXACT = frozenset(
    {
        "enum", "const", "required", "type", "format", "pattern", "dependentRequired", "contentMediaType",
        "contentEncoding", "$ref", "$id", "$schema", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef",
        "$recursiveAnchor", "$vocabulary", "x-mcp-header",
    }
)  # fmt: skip
# Keywords whose value is a schema (or a list of them) beside ``SUBSCHEMA``: older drafts' and 2019-09's.
_SUBSCHEMA_MORE = ("additionalItems", "unevaluatedItems", "unevaluatedProperties", "contentSchema")
_SCHEMA_VALUED = frozenset((*SUBSCHEMA, *_SUBSCHEMA_MORE, *SUBSCHEMA_LISTS))


def schema_texts_for_model(node: Any) -> Any:
    """The schema with every text no validator reads cleaned (``text_for_model``): description and title, and also
    ``$comment``, ``examples``, ``default`` and any keyword JSON Schema does not know (``markdownDescription``,
    ``x-…``), which a model reads as it reads a description (redteam52: a refused link or the gateway's voice in an
    example went out as written). Kept exact: what the schema allows (``_SCHEMA_EXACT``), property names, numbers
    (an outputSchema a client checks results against is listed so)."""
    if isinstance(node, list):  # a list of schemas (``items`` of an older draft), or not a schema at all
        return [schema_texts_for_model(value) for value in node]
    if not isinstance(node, dict):
        return node
    shown: dict[str, Any] = {}
    for key, value in node.items():
        if key in _SCHEMA_EXACT:
            shown[key] = value
        elif key in SUBSCHEMA_MAPS and isinstance(value, dict):
            shown[key] = {name: schema_texts_for_model(spec) for name, spec in value.items()}
        elif key == "dependencies" and isinstance(value, dict):  # draft-07: a schema, or a list of names (exact)
            shown[key] = {name: spec if isinstance(spec, list) else schema_texts_for_model(spec)
                          for name, spec in value.items()}  # fmt: skip
        elif key in _SCHEMA_VALUED:
            shown[key] = schema_texts_for_model(value)
        else:  # a text no validator reads (a keyword of the upstream's own: its name too)
            shown[text_for_model(key)] = texts_for_model(value)
    return shown


def schema_exact_texts(node: Any) -> list[str]:
    """The texts ``schema_texts_for_model`` keeps as written though a model reads them: the strings of what the schema
    allows (``_SCHEMA_EXACT``) and the names of ``SUBSCHEMA_MAPS``, at any depth."""
    if isinstance(node, list):
        return [text for value in node for text in schema_exact_texts(value)]
    if not isinstance(node, dict):
        return []
    texts: list[str] = []
    for key, value in node.items():
        if key in _SCHEMA_EXACT:
            texts += strings_in(value)
        elif key in SUBSCHEMA_MAPS and isinstance(value, dict):
            for name, spec in value.items():
                texts += [name, *schema_exact_texts(spec)]
        elif key == "dependencies" and isinstance(value, dict):
            for name, spec in value.items():
                texts += [name, *(strings_in(spec) if isinstance(spec, list) else schema_exact_texts(spec))]
        elif key in _SCHEMA_VALUED:
            texts += schema_exact_texts(value)
    return texts


def definition_exact_texts_read_otherwise(definition: Any) -> bool:
    """Whether a text of the definition kept as written (its name, and ``schema_exact_texts`` of its schemas: an enum
    or const value, a property's name) would be shown a model otherwise were it a description: the gateway's voice or
    a refused link (``text_for_model`` past ``clean_for_model``, whose hidden characters and tags the screen holds
    already, and whose line endings and Unicode forms are no one's voice). It cannot be cleaned without changing what
    a call must send, so the tool is held (redteam57)."""
    if not isinstance(definition, dict):
        return False
    texts = [definition.get("name"), *schema_exact_texts(definition.get("inputSchema"))]
    for text in [*texts, *schema_exact_texts(definition.get("outputSchema"))]:
        cleaned = clean_for_model(text) if isinstance(text, str) else ""
        if text_for_model(cleaned) != cleaned:  # clean_for_model gives the same text again
            return True
    return False


def definition_for_model(definition: Any) -> Any:
    """A stored upstream definition (a tool's, a revision's: name, title, description, schemas, annotations) as a
    model is shown its parts: the schemas' texts by ``schema_texts_for_model``, every other text by
    ``text_for_model``; the name, which a call sends, as written."""
    if not isinstance(definition, dict):
        return texts_for_model(definition)
    return {
        key: value
        if key == "name"
        else schema_texts_for_model(value)
        if key in ("inputSchema", "outputSchema")
        else texts_for_model(value)
        for key, value in definition.items()
    }
