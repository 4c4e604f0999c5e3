"""Text shown to a model: strip what could hide instructions, and screen upstream text for injections (T6).

ORM-free. ``clean_for_model`` is for anything Scout returns to a model (descriptions, titles, errors);
``clean_tool_output`` is the output policy for what an upstream tool returns (T9);
``suspicious_markers`` is the one injection screen: it decides whether a tool's upstream text is held for
review (governance.services.review). It includes ``stuffing_markers``: text built to be returned for every
search (search capture) is held the same way.

The screen does not match the raw text. It first folds it to a *skeleton*: ANSI escapes and invisible or
control characters removed, Unicode NFKC (full-width and mathematical letters become plain ones), case folded,
accents dropped, and look-alike letters (Cyrillic "о", Greek "ο", ...) mapped to the Latin letter they imitate
with Unicode's confusables table (from ``confusable-homoglyphs``). Signals are then matched on the skeleton:
instructions addressed to the model, attempts to override earlier instructions or to hide something from the
user, directives to call other tools or Scout's own meta-tools, exfiltration wording, chat-template markers,
role tags, and the same override/addressing phrases in German, French, Spanish, Italian, Portuguese, Russian
and Chinese. Each marker has a name, so a curator sees why a tool was held. The screen errs towards holding:
a false positive costs a curator one click, a false negative puts an attacker's words in front of the model.
"""

import bisect
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from catalog.confusables import confusables_table as _confusables_table
from catalog.confusables import foreign_lookalike as _is_foreign_lookalike
from catalog.confusables import strip_marks as _strip_marks

# ANSI escape sequences: CSI (ESC [ ... final), OSC (ESC ] ... BEL/ST), and two-character escapes.
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")
# Invisible or direction-changing characters: zero-width, joiners, bidi embeddings/overrides/isolates and the Arabic
# letter mark (a right-to-left mark by another name), word joiner and invisible operators, the deprecated format
# characters U+206A..U+206F, interlinear annotation marks (text between them is hidden by renderers that support
# them), BOM, Mongolian vowel separator, soft hyphen, tag characters.
_HIDDEN_CHARS = (
    "\u00ad\u061c\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\u206a-\u206f\ufeff\ufff9-\ufffb"
)
_HIDDEN_RE = re.compile(f"[{_HIDDEN_CHARS}\U000e0000-\U000e007f]")
# C0 and C1 controls except tab and newline (carriage returns become newlines).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# For the screen only, more that renders as nothing: variation selectors, combining grapheme joiner,
# Hangul fillers and the braille blank; format characters (category Cf) are removed separately.
_SCREEN_INVISIBLE_RE = re.compile("[\u034f\u115f\u1160\u2800\u3164\uffa0\ufe00-\ufe0f\U000e0100-\U000e01ef]")
# Invisible characters worth a marker of their own (variation selectors are not: emoji use them, "⚠️").
_BLANK_LETTER_RE = re.compile("[\u034f\u115f\u1160\u2800\u3164\uffa0]")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u2032": "'", "\u00b4": "'", "`": "'"})
_SPACES_RE = re.compile(r"[ \t\f\v]+")


def strip_hidden(text: str) -> str:
    """``text`` without ANSI escapes, control characters (except tab and newline; carriage returns become
    newlines) and invisible or direction-changing Unicode. Nothing else changes."""
    if not text:
        return ""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _ANSI_RE.sub("", text)
    text = _HIDDEN_RE.sub("", text)
    return _CONTROL_RE.sub("", text)


def clean_for_model(text: str) -> str:
    """``strip_hidden(text)``, NFC-normalized so look-alike composed forms compare equal."""
    return unicodedata.normalize("NFC", strip_hidden(text)) if text else ""


# Markup models read as a privileged voice when it turns up in tool output: instruction and role tags
# (<IMPORTANT>, <system>, </assistant>, also in full-width brackets), chat-template markers of every family the
# description screen knows (ChatML's <|im_start|>, DeepSeek's <｜User｜> and <｜end▁of▁sentence｜>, Gemma's
# <start_of_turn>, Llama 2's <<SYS>> and [INST]).
_ROLE_TAG_RE = re.compile(
    r"[<＜]([|｜][\w▁]{1,40}[|｜])[>＞]"
    r"|[<＜](\s*/?\s*(?:important|system|instructions?|assistant|user|human|sys|(?:start|end)_of_turn)\b"
    r"[^<>＜＞]{0,200})[>＞]"
    r"|\[(/?inst)\]",
    re.I,
)
_ROLE_TAG_OPENERS = ("<", "＜", "[")


def clean_tool_output(text: str) -> str:
    """The output policy for text an upstream tool returns (README, "Tool output is data"): hidden and
    control characters stripped as ``strip_hidden`` does, and instruction or role tags defanged by turning
    their brackets (angle, full-width, or [INST]'s square ones) into ‹ › (the words stay readable; they no longer
    look like markup). Not NFC-normalized: the tool's data stays byte-faithful apart from what the policy removes."""
    text = strip_hidden(text)
    if not any(opener in text for opener in _ROLE_TAG_OPENERS):
        return text
    return _ROLE_TAG_RE.sub(lambda m: f"‹{m.group(1) or m.group(2) or m.group(3)}›", text)


def clean_json_strings(value: object) -> object:
    """``value`` (parsed JSON) with ``clean_tool_output`` applied to every string, object keys included."""
    if isinstance(value, str):
        return clean_tool_output(value)
    if isinstance(value, dict):
        return {clean_tool_output(k) if isinstance(k, str) else k: clean_json_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json_strings(item) for item in value]
    return value


# --- normalisation --------------------------------------------------------------------------------------


def _fold(text: str) -> str:
    """Everything but the look-alike mapping: no escapes or invisibles, NFKC, case folded, no accents,
    typographic quotes as ``'``, runs of blanks as one space (newlines kept for line-start markers)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _ANSI_RE.sub("", text)
    text = unicodedata.normalize("NFKC", text)
    # Invisible characters are removed (not replaced by a space) so "ig\u200bnore" still reads "ignore".
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    text = _HIDDEN_RE.sub("", _SCREEN_INVISIBLE_RE.sub("", text))
    text = _CONTROL_RE.sub(" ", text)
    text = _strip_marks(text.casefold()).translate(_QUOTES)
    return _SPACES_RE.sub(" ", text)


def screen_skeleton(text: str) -> str:
    """The form the injection screen matches: ``_fold`` plus look-alike letters mapped to Latin ones."""
    return _fold(text).translate(_confusables_table())


_READ_AS_APOSTROPHE = "\u2018\u2019\u02bc\u2032"


def _as_read_char(code: int, confusable: Callable[[int], str | None]) -> str | None:
    """The ASCII character a reader takes the character ``code`` for (``_as_read_table``'s entry), or None.
    ``confusable`` is ``_confusables_table().get``."""
    if chr(code) in _READ_AS_APOSTROPHE:
        return "'"
    if 0x80 <= code < 0x20000:
        char = chr(code)
        if unicodedata.category(char) == "Zs":
            return " "
        folded = _strip_marks(unicodedata.normalize("NFKC", char))
        if len(folded) == 1 and folded.isascii() and folded.isalnum():
            return folded
    mapped = confusable(code)
    return mapped if mapped is not None and mapped.isalnum() else None


@lru_cache(maxsize=1)
def _as_read_table() -> dict[int, str]:
    """Each non-ASCII character a reader takes for one ASCII character, mapped to it: a space of any width, a
    full-width or mathematical letter or digit (its NFKC form), an accented letter, a look-alike letter of another
    script (``_confusables_table``), a typographic apostrophe. Built once (some 0.1 s)."""
    confusable = _confusables_table().get
    codes = {*range(0x80, 0x20000), *_confusables_table(), *map(ord, _READ_AS_APOSTROPHE)}
    return {code: mapped for code in codes if (mapped := _as_read_char(code, confusable)) is not None}


def as_read(text: str) -> str:
    """``text`` as a reader (or a model) takes it, one ASCII character for each character that looks like one
    (``_as_read_table``): "Ｎote from the gаteway" (full-width N, Cyrillic а, a no-break space) reads
    "Note from the gateway". The same length as ``text``, character for character, so a match in it is a match at
    the same place in ``text``."""
    return text if text.isascii() else text.translate(_as_read_table())


# What a reader's eye skips inside a word: format characters (category Cf: U+206A..U+206F and others strip_hidden
# keeps), combining marks (a combining acute in "gate\u0301way", the combining grapheme joiner, variation selectors)
# and the blank letters the screen drops (Hangul fillers, the braille blank).
_BLANK_LETTERS = "\u115f\u1160\u2800\u3164\uffa0"


def _read_folded_char(code: int, as_read_of: Callable[[int], str | None]) -> str | None:
    """What ``read_folded`` makes of the non-ASCII character ``code`` (``_read_folded_table``'s entry): None when
    a reader skips it, else the character it is read as (itself when unchanged). ``as_read_of`` gives
    ``_as_read_table``'s entry of a character."""
    char = chr(code)
    if unicodedata.category(char) in ("Cf", "Mn", "Me") or char in _BLANK_LETTERS:
        return None
    lower = char.lower() if len(char.lower()) == 1 else char
    folded = as_read_of(ord(lower))
    if folded is None:
        compatible = _strip_marks(unicodedata.normalize("NFKC", lower)).lower()
        if not compatible:  # a half-width voicing mark: a combining one once folded
            return None
        folded = compatible if len(compatible) == 1 else lower
        folded = as_read_of(ord(folded)) or folded
    return folded


@lru_cache(maxsize=1)
def _read_folded_table() -> dict[int, str | None]:
    """``as_read``'s table for text in any script, lower case: each non-ASCII character a reader skips inside a word
    (``_BLANK_LETTERS``, categories Cf, Mn, Me) dropped; any other lower-cased, then read as ``as_read`` reads it,
    else folded to its compatibility form without accents when that is one character (half-width katakana as
    katakana, a voiced kana as its plain one). Built once."""
    as_read_of = _as_read_table().get
    table: dict[int, str | None] = {}
    for code in [*range(0x80, 0x20000), *range(0xE0000, 0xE01F0)]:
        folded = _read_folded_char(code, as_read_of)
        if folded != chr(code):
            table[code] = folded
    return table


def read_folded_word(word: str) -> str:
    """``read_folded(word).text``, folded a character at a time without building the whole tables: for the few
    words of a pattern compiled at import. Building them there cost every process that imports the output policy
    (each ``manage.py`` command, uvicorn and Celery worker) some 0.5 s of CPU, whether it served or not."""
    confusable = _confusables_table().get

    def as_read_of(code: int) -> str | None:
        return _as_read_char(code, confusable) if code >= 0x80 else None

    return "".join(ch if ch.isascii() else (_read_folded_char(ord(ch), as_read_of) or "") for ch in word)


@lru_cache(maxsize=1)
def _read_dropped_marks() -> dict[int, str]:
    """Each character ``_read_folded_table`` drops as NUL, a NUL as something else: where the NULs of a text so
    translated are is where its dropped characters are (a character class this large, matched with ``re`` or RE2 on a
    megabyte of marks, took 0.25 to 0.9 s; this, some 0.05 s)."""
    marks: dict[int, str] = {code: "\0" for code, char in _read_folded_table().items() if char is None}
    marks[0] = "\1"
    return marks


@dataclass(frozen=True)
class ReadText:
    """A text as a reader takes it in any script (``read_folded``), and where each of its characters came from."""

    text: str
    _shifts: tuple[int, ...] = ()  # for each dropped character, the index in ``text`` it would have had

    def start(self, index: int) -> int:
        """Where the character at ``index`` of the read text is in the original."""
        return index + bisect.bisect_right(self._shifts, index)

    def end(self, index: int) -> int:
        """Where a match ending at ``index`` (exclusive) of the read text ends in the original."""
        return index + bisect.bisect_left(self._shifts, index)


def read_folded(text: str) -> ReadText:
    """``text`` as read (``as_read``) in any script, lower case, with what a reader skips inside a word dropped: "Nоte
    from the gate\u0301way" (Cyrillic о, a combining accent) and "Ｎｏｔｅ from the gate\u034fway" both read "note
    from the gateway", "ｹﾞｰﾄｳｪｲ" (half-width) reads as "ゲートウェイ" does. Words matched in it are folded the same way
    (``read_folded(word).text``); ``ReadText.start``/``end`` give a match's place in ``text``. ASCII letters keep their
    case (match them case-insensitively)."""
    if text.isascii():
        return ReadText(text)
    read = text.translate(_read_folded_table())
    if len(read) == len(text):
        return ReadText(read)
    dropped = [match.start() for match in re.finditer("\0", text.translate(_read_dropped_marks()))]
    return ReadText(read, tuple(at - rank for rank, at in enumerate(dropped)))


def as_read_warm_up() -> None:
    """Build ``as_read``'s and ``read_folded``'s tables now (some 0.1 s of CPU each, more at a high load), before a
    process serves: else the first request with a non-ASCII text in its answer or result pays for them (issue 9,
    perf11)."""
    _as_read_table()
    _read_folded_table()
    _read_dropped_marks()


# --- signals ---------------------------------------------------------------------------------------------

_MODEL = (
    r"(?:ai|a\.i\.|llm|large language model|language model|model|assistant|agent|chatbot|bot|claude|chatgpt|gpt"
    r"|copilot|gemini)"
)
_CONCEAL_VERB = r"(?:tell|inform|mention|reveal|show|notify|alert|disclose|let|explain|warn|say)(?:s|ing)?"
_CALL_VERB = r"(?:call|invoke|run|execute|trigger|use)"
_INVOKE = r"(?:call|invoke|run|execute|trigger)"
_SECRET = (
    r"(?:~/|\.ssh\b|id_rsa|\.env\b|api[ _-]?keys?|credentials?|passwords?|passphrases?|secrets?|private[ _-]?keys?"
    r"|ssh[ _-]?keys?|access[ _-]?tokens?|auth(?:entication)?[ _-]?tokens?|tokens?|mcp\.json|cookies?"
    r"|conversation|chat history|system prompt|environment variables?)"
)
_SEND_VERB = r"(?:send|include|upload|post|forward|leak|exfiltrate|transmit|share|attach|embed|paste|append|email|copy)"

# (marker, pattern) matched on the skeleton; written lower case and without accents (the skeleton has none).
_SKELETON_PATTERNS: list[tuple[str, str]] = [
    # English: overriding what the model was told before.
    (
        "ignore-previous",
        r"\b(?:ignore|disregard|forget|bypass|abandon|discard)\b[^.]{0,40}?\b(?:previous|prior|above|earlier|preceding"
        r"|former|all|any|other|system|safety|original|your)\b[^.]{0,30}?\b(?:instructions?|prompts?|rules|directions"
        r"|directives|messages?|context|guidelines|guardrails|constraints|polic(?:y|ies)|commands)\b",
    ),
    (
        "ignore-previous",
        r"\boverride\b[^.]{0,30}?\b(?:previous|prior|above|system|safety|your)\b[^.]{0,20}?\b(?:instructions?|prompts?"
        r"|guidelines|guardrails|directives)\b",
    ),
    # Text addressed to the model rather than describing the tool ("instructions for the AI on what to extract"
    # describes a parameter, so "instructions"/"message" count only after "important").
    (
        "addressed-to-model",
        rf"\b(?:note|reminder|notice|memo|attention)\s+(?:to|for)\s+(?:the\s+|any\s+|all\s+)?(?:ai\s+)?{_MODEL}s?\b",
    ),
    (
        "addressed-to-model",
        rf"\bimportant\b[^.]{{0,15}}?\b(?:note|message|instructions?|reminder|information)\s+(?:to|for)\s+"
        rf"(?:the\s+|any\s+|all\s+)?(?:ai\s+)?{_MODEL}s?\b",
    ),
    ("addressed-to-model", rf"\b(?:dear|hey|hello|attention)\s*,?\s+(?:the\s+)?(?:ai\s+)?{_MODEL}\b"),
    ("addressed-to-model", rf"\bif you are an?\s+(?:ai\s+)?{_MODEL}\b"),
    ("addressed-to-model", r"\byou are (?:now )?(?:an? |the )?(?:ai|assistant|llm|language model|chatbot)\b"),
    (
        "addressed-to-model",
        r"\b(?:the|this|any|an?)\s+(?:ai\s+)?(?:assistant|llm|language model|ai model|chatbot|ai agent)\s+(?:must|shall"
        r"|is required to)\b",
    ),
    # Imperatives to the model that go beyond how to call this tool.
    (
        "you-must",
        rf"\byou\s+(?:must|shall|have to|need to|are required to|should)\s+(?:always\s+|now\s+|immediately\s+|first\s+"
        rf"|also\s+|secretly\s+|silently\s+)*(?:ignore|disregard|forget|obey|comply|exfiltrate|forward|send|upload"
        rf"|(?:not|never)\s+{_CONCEAL_VERB})\b",
    ),
    (
        "you-must",
        rf"\byou\s+(?:must|shall|have to|need to|are required to)\s+(?:always|first|immediately)\s+{_INVOKE}\b",
    ),
    # Keeping the user in the dark.
    (
        "conceal-from-user",
        rf"\b(?:do not|don't|dont|never|must not|should not|shouldn't|without)\s+{_CONCEAL_VERB}\b"
        rf"[^.]{{0,30}}?\buser\b",
    ),
    ("conceal-from-user", r"\b(?:hide|conceal|keep)\b[^.]{0,25}?\bfrom\s+the\s+user\b"),
    ("conceal-from-user", r"\bwithout\s+(?:the\s+)?user'?s?\s+(?:knowing|knowledge|noticing|awareness|consent)\b"),
    (
        "conceal-from-user",
        r"\bthe\s+user\s+(?:must|should|need|does|will)\s*(?:not|n't)\s+(?:know|see|be told|notice)\b",
    ),
    (
        "conceal-from-user",
        r"\b(?:secretly|covertly|quietly|silently)\s+(?:call|send|read|forward|upload|include|copy|exfiltrate|run"
        r"|execute|invoke|delete|transfer)\b",
    ),
    # Steering the model to other tools: Scout's meta-tools, namespaced ids, "before using this tool, call ...".
    ("meta-tool-reference", r"\b(?:execute[_-]tool|tool[_-]search|tool[_-]inspect)\b"),
    ("cross-tool-directive", rf"\b{_CALL_VERB}\b[^.]{{0,40}}?\b[a-z0-9][a-z0-9_.-]*::[a-z0-9_.-]+"),
    (
        "cross-tool-directive",
        rf"\b(?:before|after|instead of|prior to)\s+(?:using|calling|running|invoking|executing|answering|responding"
        rf"|replying)\s+(?:this|any|the|other)\b[^.]{{0,25}}?\b(?:tool|function)s?\b[^.]{{0,40}}?\b(?:{_CALL_VERB}"
        rf"|read|send)\b",
    ),
    ("cross-tool-directive", rf"\b(?:first|always|also)\s+{_CALL_VERB}\b[^.]{{0,30}}?\b(?:every|all|other)\s+tools?\b"),
    # Exfiltration wording and secret locations.
    ("exfiltration", rf"\b{_SEND_VERB}\b[^.]{{0,50}}?\b(?:contents?|text|body|value)\s+of\b[^.]{{0,30}}?{_SECRET}"),
    (
        "exfiltration",
        rf"\b{_SEND_VERB}\b[^.]{{0,40}}?\b(?:the user'?s?|all|every|any)\s+(?:[a-z]+\s+)?(?:api[ _-]?keys?|credentials"
        rf"|passwords?|secrets?|private[ _-]?keys?|ssh[ _-]?keys?|access[ _-]?tokens?|conversation|chat history"
        rf"|system prompt|environment variables)\b",
    ),
    ("exfiltration", r"\bexfiltrat(?:e|es|ed|ing|ion)\b"),
    (
        "secret-path",
        r"(?:~/\.ssh|\bid_rsa\b|\bid_ed25519\b|\.aws/credentials|/etc/passwd|/etc/shadow|\.cursor/mcp\.json"
        r"|claude_desktop_config\.json|\.git-credentials\b|~/\.netrc\b)",
    ),
    # Chat-template and role markers: text pretending to be a turn boundary or a system message.
    ("chat-template", r"<\|\s*[a-z_▁]{2,30}\s*\|>"),  # ▁: DeepSeek's <｜end▁of▁sentence｜>
    ("chat-template", r"\[/?inst\]|<</?sys>>|<(?:start|end)_of_turn>|\[/?(?:system|assistant)(?:_prompt)?\]"),
    ("chat-template", r"(?:^|\n)\s*#{2,}\s*(?:system|instruction|instructions|assistant|response)\s*:"),
    ("chat-template", r"(?:^|\n)\s*(?:human|assistant|system)\s*:\s"),
    (
        "instruction-tag",
        r"</?\s*(?:important|system|system[_-]?prompt|instructions?|admin|assistant|secret|hidden|critical|sys|prompt"
        r"|tool_call|function_call|override|priority|urgent)\b[^>]*>",
    ),
    (
        "system-prompt",
        r"\b(?:developer message|new instructions|updated instructions|developer mode|dan mode|god mode)\b",
    ),
    (
        "system-prompt",
        r"\b(?:reveal|print|output|repeat|show|leak|dump|disclose)\b[^.]{0,20}?\b(?:your|the)\s+(?:system prompt"
        r"|instructions|initial prompt)\b",
    ),
    # German.
    (
        "ignore-previous",
        r"\b(?:ignorier(?:e|en|t)?|vergiss|vergessen sie|missachte(?:n)?|uberspring(?:e|en)?)\b[^.]{0,40}?"
        r"\b(?:vorherigen?|vorigen?|bisherigen?|obigen?|fruheren?|alle[nm]?|sonstigen?|vorangegangenen?)\b[^.]{0,30}?"
        r"\b(?:anweisungen|anweisung|instruktionen|befehle|regeln|vorgaben|hinweise|nachrichten)\b",
    ),
    (
        "addressed-to-model",
        r"\b(?:hinweis|nachricht|anweisung|notiz|mitteilung)\s+(?:an|fur)\s+(?:den\s+|die\s+|das\s+)?(?:assistenten"
        r"|assistentin|assistent|ki|modell|sprachmodell|agenten|bot|llm)\b",
    ),
    (
        "conceal-from-user",
        r"\b(?:sag(?:e|en sie)?|erzahl(?:e|en sie)?|verrat(?:e|en sie)?)\s+(?:dem|der|den)\s+(?:benutzer|nutzer"
        r"|anwender|user)(?:in|innen)?\s+(?:nichts|nicht)\b",
    ),
    ("cross-tool-directive", r"\b(?:rufe|rufen sie)\s+(?:zuerst|zunachst|vorher|immer)\b"),
    # French.
    (
        "ignore-previous",
        r"\b(?:ignore[zr]?|oublie[zr]?|ne tenez pas compte)\b[^.]{0,40}?\b(?:instructions?|consignes?|regles"
        r"|directives)\s+(?:precedentes?|anterieures?|ci-dessus|prealables|du systeme)\b",
    ),
    (
        "addressed-to-model",
        r"\b(?:note|message|remarque|instructions?|avis)\s+(?:a|pour)\s+(?:l'\s*|le\s+|la\s+)?(?:assistant|ia"
        r"|intelligence artificielle|modele|agent)\b",
    ),
    (
        "conceal-from-user",
        r"\bne\s+(?:dites|dis|mentionnez|mentionne|revelez|revele|informez|previens|prevenez)\s+(?:rien|pas)\b"
        r"[^.]{0,30}?\butilisat(?:eur|rice)\b",
    ),
    ("cross-tool-directive", r"\b(?:appelez|appelle|invoquez|invoque|executez)\s+d'\s*abord\b"),
    # Spanish, Italian, Portuguese.
    (
        "ignore-previous",
        r"\b(?:ignora|ignore|ignorar|ignorate|olvida|olvide|olvidar|omite|esqueca|dimentica)\b[^.]{0,40}?"
        r"\b(?:instrucciones|indicaciones|reglas|ordenes|directrices|istruzioni|instrucoes|regras)\s+(?:anteriores"
        r"|previas|precedentes|de arriba|del sistema|precedenti|sopra)\b",
    ),
    (
        "addressed-to-model",
        r"\b(?:nota|mensaje|aviso|instrucciones?|messaggio|mensagem)\s+(?:para|al|a|per)\s+(?:el\s+|la\s+|o\s+|l'\s*)?"
        r"(?:asistente|assistente|ia|modelo|modello|agente)\b",
    ),
    (
        "conceal-from-user",
        r"\bno\s+(?:le\s+)?(?:digas|diga|informes|informe|menciones|mencione|reveles|revele)\b[^.]{0,30}?\busuario\b",
    ),
    ("cross-tool-directive", r"\b(?:primero|antes)\s+(?:llama|llame|invoca|invoque|ejecuta|ejecute)\b"),
]
# Matched on the fold (no look-alike mapping, which would turn Cyrillic words into Latin noise).
_FOLD_PATTERNS: list[tuple[str, str]] = [
    (
        "ignore-previous",
        r"(?:игнорируй|игнорируйте|проигнорируй|забудь|забудьте)[^.]{0,40}?(?:предыдущие|прежние|все|вышеуказанные"
        r"|системные)[^.]{0,30}?(?:инструкции|указания|правила|команды)",
    ),
    ("addressed-to-model", r"(?:примечание|заметка|сообщение|указание)\s+(?:для|к)\s+(?:ассистента|модели|ии|агента)"),
    ("conceal-from-user", r"не\s+(?:говори|говорите|сообщай|сообщайте)\s+пользовател"),
    ("ignore-previous", r"忽略(?:之前|以上|先前|上面|前面|所有)(?:的)?(?:所有|全部)?(?:的)?(?:指令|指示|说明|提示)"),
]


def _compile(patterns: list[tuple[str, str]]) -> list[tuple[str, re.Pattern[str]]]:
    # Patterns are written as they read; accents are stripped so they match the accent-free fold.
    return [(name, re.compile(_strip_marks(pattern))) for name, pattern in patterns]


_SKELETON_RES = _compile(_SKELETON_PATTERNS)
_FOLD_RES = _compile(_FOLD_PATTERNS)
# A word mixing ASCII letters with letters that only look like them (Cyrillic "о" in "ignоre").
_WORD_RE = re.compile(r"[^\W\d_]+")


def _has_lookalike_word(folded: str) -> bool:
    for word in _WORD_RE.findall(folded):
        if word.isascii() or not any(ch.isascii() for ch in word):
            continue
        # Accented or extra Latin letters (Turkish "ı", "ſ") are ordinary spelling, not a disguise.
        if any(_is_foreign_lookalike(ch) for ch in word):
            return True
    return False


# Search capture (T6/T8): text built to be returned for every request instead of to describe one tool. Bounds
# measured on the 5,704 public tools (bench/NOTES-capture.md): 4 reach them (long enumerations of styles or
# currency codes, a text styler's alphabets), the attacks of bench/capture.py are far above.
STUFFING_REPEATS = 10  # one five-word phrase this many times in a line
STUFFING_LIST_ITEMS = 80  # comma-, bar- or slash-separated items of one or two words in one sentence
STUFFING_BARE_WORDS = 200  # words in runs of 8+ with hardly any function word (a bag of keywords)
STUFFING_SCRIPTS = 3  # writing systems besides Latin
_FUNCTION_WORDS = frozenset(
    "a an the of to in on for with and or is are be by from as at it its this that which your you can will into "
    "if".split()
)
_SENTENCE_RE = re.compile(r"[.!?;:()\[\]{}\n]+")
_ITEM_SEP_RE = re.compile(r"[,|/]")


def stuffing_markers(text: str) -> list[str]:
    """Names of the search-capture signals in ``text``: ``repeated-phrase``, ``word-list`` (a long list of
    bare words, or runs of keywords without sentences), ``many-scripts`` (words in many writing systems).
    Each is cheap to write and ranks a tool for requests it has nothing to do with."""
    found: list[str] = []
    for line in text.lower().split("\n"):
        words = _WORD_RE.findall(line)
        phrases = Counter(tuple(words[i : i + 5]) for i in range(len(words) - 4))
        if phrases and max(phrases.values()) >= STUFFING_REPEATS:
            found.append("repeated-phrase")
            break
    bare = 0
    for sentence in _SENTENCE_RE.split(text):
        items = [item for item in _ITEM_SEP_RE.split(sentence) if item.strip()]
        if len(items) >= STUFFING_LIST_ITEMS and sum(len(i.split()) <= 2 for i in items) >= 0.9 * len(items):
            bare = STUFFING_BARE_WORDS
            break
        words = _WORD_RE.findall(sentence.lower())
        if len(words) >= 8 and sum(w in _FUNCTION_WORDS for w in words) < 0.05 * len(words):
            bare += len(words)
    if bare >= STUFFING_BARE_WORDS:
        found.append("word-list")
    scripts = {unicodedata.name(ch, "?").split(" ")[0] for ch in text if ch.isalpha() and not ch.isascii()}
    if len(scripts - {"LATIN", "?"}) >= STUFFING_SCRIPTS:
        found.append("many-scripts")
    return found


def suspicious_markers(text: str) -> list[str]:
    """Names of the injection signals found in ``text`` (empty when it looks clean), each once, in a stable
    order. The single screen for upstream tool text: see the module docstring for what it normalises."""
    if not text:
        return []
    found: list[str] = []
    if _ANSI_RE.search(text) or "\x1b" in text:
        found.append("ansi-escape")
    if _HIDDEN_RE.search(text) or _BLANK_LETTER_RE.search(text) or any(unicodedata.category(ch) == "Cf" for ch in text):
        found.append("hidden-unicode")
    if _CONTROL_RE.search(text.replace("\r", "")):
        found.append("control-character")
    folded = _fold(text)
    if _has_lookalike_word(folded):
        found.append("lookalike-letters")
    skeleton = folded.translate(_confusables_table())
    # An instruction tag's opening counts with any ">" after it (``[^>]*>``): searched only up to the last one, the
    # first opening before it answers at once. Searched whole, each opening with no ">" after it read on to the end,
    # so 256 kB of "<important " (a definition's most) took 20 s of the sync that screens it, per tool (T13).
    tags_end = skeleton.rfind(">") + 1
    for name, pattern in _SKELETON_RES:
        end = tags_end if name == "instruction-tag" else len(skeleton)
        if name not in found and pattern.search(skeleton, 0, end):
            found.append(name)
    for name, pattern in _FOLD_RES:
        if name not in found and pattern.search(folded):
            found.append(name)
    return found + stuffing_markers(text)


def definition_text(definition: dict) -> str:
    """Every string in a tool definition (titles, descriptions, schema texts, enum values), one per line."""
    return "\n".join(strings_in(definition))


def strings_in(node: object) -> list[str]:
    """Every string in ``node`` (parsed JSON), the keys of its objects too, in document order."""
    parts: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, str):
            parts.append(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                if isinstance(key, str):
                    parts.append(key)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(node)
    return parts


# --- text a person reviews -------------------------------------------------------------------------------

# Besides format (Cf) and control characters: what renders blank or is read as a plain space or line break.
_REVEALED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})
_BLANK_CHARS = frozenset("\u034f\u115f\u1160\u2800\u3164\uffa0") | {chr(c) for c in range(0xFE00, 0xFE10)}


def _escaped(ch: str) -> str:
    return json.dumps(ch)[1:-1]  # "\\u202e"; a character past U+FFFF as its two UTF-16 halves, as JSON writes it


def _hides(ch: str) -> bool:
    if ch in "\n\t":  # line breaks and indents stay (JSON text escapes those inside its strings itself)
        return False
    category = unicodedata.category(ch)
    return category in _REVEALED_CATEGORIES or (category == "Zs" and ch != " ") or ch in _BLANK_CHARS


def reveal_deceptive(text: str) -> str:
    """``text`` as a person deciding on it reads it (an approver, the arguments of a call): every letter of every
    language as written ("Böen", "Привет"), but each character that hides or disguises something as a JSON-style
    ``\\uXXXX`` escape: invisible, direction-changing, control and unusual space characters, and a letter that only
    looks like a Latin one inside a word of Latin letters (Cyrillic "а" in "pаypal"). Escaping every non-ASCII
    character, as the decide page did, made an umlaut unreadable. Linear in the text."""
    out: list[str] = []
    word: list[str] = []

    def flush() -> None:
        mixed = any(ch.isascii() for ch in word) and not all(ch.isascii() for ch in word)
        out.extend(_escaped(ch) if mixed and _is_foreign_lookalike(ch) else ch for ch in word)
        word.clear()

    for ch in text:
        if ch.isalpha():
            word.append(ch)
            continue
        flush()
        out.append(_escaped(ch) if _hides(ch) else ch)
    flush()
    return "".join(out)
