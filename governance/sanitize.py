"""Text shown to a model: strip what could hide instructions, and find what looks like an injection (T6).

ORM-free. ``clean_for_model`` is for anything Scout returns to a model (descriptions, titles, errors);
``clean_tool_output`` is the output policy for what an upstream tool returns (T9);
``suspicious_markers`` decides whether a tool's upstream text is held for review at first sight.
"""

import re
import unicodedata

# ANSI escape sequences: CSI (ESC [ ... final), OSC (ESC ] ... BEL/ST), and two-character escapes.
_ANSI_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")
# Invisible or direction-changing characters: zero-width, joiners, bidi embeddings/overrides/isolates,
# word joiner and invisible operators, BOM, Mongolian vowel separator, soft hyphen, tag characters.
_HIDDEN_CHARS = (
    "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069\ufeff"
)
_HIDDEN_RE = re.compile(f"[{_HIDDEN_CHARS}\U000e0000-\U000e007f]")
# C0 and C1 controls except tab and newline (carriage returns become newlines).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

_INJECTION_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "ignore-previous",
        re.compile(
            r"\b(ignore|disregard|forget|override)\b[^.\n]{0,40}\b(previous|prior|above|earlier|all|other|system)\b"
            r"[^.\n]{0,30}\b(instructions?|prompts?|rules|directions|messages?|context)\b",
            re.I,
        ),
    ),
    (
        "instruction-tag",
        re.compile(r"</?\s*(important|system|instructions?|admin|assistant|secret|hidden|critical)\b[^>]*>", re.I),
    ),
    ("system-prompt", re.compile(r"\b(system prompt|developer message|new instructions)\b", re.I)),
    (
        "conceal-from-user",
        re.compile(r"\b(do not|don't|never)\s+(tell|inform|mention|reveal|show)\b[^.\n]{0,30}\buser\b", re.I),
    ),
    (
        "cross-tool-directive",
        re.compile(r"\b(before|after|instead of)\s+(using|calling|running)\s+(this|any|the)\b[^.\n]{0,20}\btool", re.I),
    ),
    ("secret-path", re.compile(r"(~/\.ssh|id_rsa\b|\.aws/credentials|/etc/passwd)", re.I)),
]


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
# (<IMPORTANT>, <system>, </assistant>) and chat-template markers (<|im_start|>, <|system|>).
_ROLE_TAG_RE = re.compile(
    r"<(\|[A-Za-z_]{1,24}\|)>|<(\s*/?\s*(?:important|system|instructions?|assistant|user|human)\b[^<>]{0,200})>",
    re.I,
)


def clean_tool_output(text: str) -> str:
    """The output policy for text an upstream tool returns (README, "Tool output is data"): hidden and
    control characters stripped as ``strip_hidden`` does, and instruction or role tags defanged by turning
    their angle brackets into ‹ › (the words stay readable; they no longer look like markup). Not
    NFC-normalized: the tool's data stays byte-faithful apart from what the policy removes."""
    text = strip_hidden(text)
    return _ROLE_TAG_RE.sub(lambda m: f"‹{m.group(1) or m.group(2)}›", text) if "<" in text else text


def clean_json_strings(value: object) -> object:
    """``value`` (parsed JSON) with ``clean_tool_output`` applied to every string, object keys included."""
    if isinstance(value, str):
        return clean_tool_output(value)
    if isinstance(value, dict):
        return {clean_tool_output(k) if isinstance(k, str) else k: clean_json_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_json_strings(item) for item in value]
    return value


def suspicious_markers(text: str) -> list[str]:
    """Names of the injection markers found in ``text`` (empty when it looks clean), in a stable order."""
    if not text:
        return []
    found: list[str] = []
    if _ANSI_RE.search(text) or "\x1b" in text:
        found.append("ansi-escape")
    if _HIDDEN_RE.search(text):
        found.append("hidden-unicode")
    if _CONTROL_RE.search(text.replace("\r", "")):
        found.append("control-character")
    visible = clean_for_model(text)
    for name, pattern in _INJECTION_PATTERNS:
        if pattern.search(visible):
            found.append(name)
    return found


def definition_text(definition: dict) -> str:
    """Every string in a tool definition (titles, descriptions, schema texts, enum values), one per line."""
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

    walk(definition)
    return "\n".join(parts)
