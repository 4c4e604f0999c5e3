"""Tool definitions as upstream servers give them: validation, normalization, canonical JSON and hash.

ORM-free, shared by live sync and file import so both hash and reject exactly alike.
"""

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mcp.shared.inbound import find_invalid_x_mcp_header

from .confusables import confusables_table, foreign_lookalike
from .constants import TOOL_ID_SEPARATOR
from .schemas import MAX_SCHEMA_DEPTH, schema_evaluation_problem, schema_regex_problem

MAX_NAME_LENGTH = 255
MAX_TITLE_LENGTH = 500  # Tool.upstream_title: Postgres refuses a longer value, and with it the server's whole listing


class DefinitionError(ValueError):
    """A tool definition Scout refuses; the message says why, for the SyncRun and the admin."""


@dataclass(frozen=True)
class ToolDefinition:
    """A validated, normalized upstream tool definition."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any] | None
    # The upstream says the tool is deprecated (an OpenAPI operation's ``deprecated: true``): a fact about the tool,
    # kept beside its definition, not in it, so it neither changes the hash (no review) nor the upstream's text.
    deprecated: bool = False

    def canonical(self) -> dict[str, Any]:
        """The definition as hashed and stored in a revision (MCP field names)."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": self.annotations,
        }

    @property
    def hash(self) -> str:
        return definition_hash(self.canonical())


# An upstream's own note that a tool is deprecated, in the words upstreams use: "(Deprecated)" or "[deprecated]",
# "DEPRECATED" in capitals, a sentence that opens with it ("Deprecated: use X", "Deprecated. Use X"), "this tool
# has been deprecated", "deprecated in favour of X". Not the word in a description of what a tool does ("check
# whether a package is deprecated", "list deprecated endpoints"), which is about other things.
_DEPRECATED = re.compile(
    r"[(\[]\s*(?i:deprecated)\s*[)\]]"
    r"|\bDEPRECATED\b"
    r"|(?i:(?:^|[.!;]\s+)deprecated\s*[:.,;!\u2013\u2014-])"
    r"|(?i:\bthis\s+(?:tool|endpoint|operation|method|function|api)\s+(?:is|has\s+been)\s+deprecated\b)"
    r"|(?i:\bdeprecated\s+in\s+favou?r\s+of\b)"
)


def marked_deprecated(*texts: str) -> bool:
    """Whether any of ``texts`` (a tool's name, title, description) says the tool is deprecated."""
    return any(_DEPRECATED.search(text) for text in texts if text)


def tool_deprecated(*, flagged: bool, name: str, title: str, description: str) -> bool:
    """Whether a tool's upstream marks it deprecated: by flag (``ToolDefinition.deprecated``, an OpenAPI operation's
    ``deprecated: true``) or in its own words (an MCP server's "DEPRECATED: use X"). The one reading search, the
    gateway's answers and the admin share."""
    return flagged or marked_deprecated(name, title, description)


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no insignificant whitespace, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def definition_hash(canonical: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(canonical).encode("utf-8")).hexdigest()


def _first_path(node: Any, found_here: Callable[[Any], bool], path: str = "$") -> str | None:
    """The path of the first node of ``node`` (itself, then its values, depth first) ``found_here`` holds for."""
    if found_here(node):
        return path
    if isinstance(node, dict):
        children = ((f"{path}.{key}", value) for key, value in node.items())
    elif isinstance(node, list):
        children = ((f"{path}[{index}]", value) for index, value in enumerate(node))
    else:
        return None
    for child_path, value in children:
        found = _first_path(value, found_here, child_path)
        if found:
            return found
    return None


def _find_too_deep(node: Any) -> str | None:
    """The path of the first node nested deeper than MAX_SCHEMA_DEPTH, if any. Iterative: the checks after this one
    recurse per level, and a definition nested 500 deep made them raise RecursionError, failing the whole listing."""
    stack: list[tuple[Any, str, int]] = [(node, "$", 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, dict):
            children = [(f"{path}.{key}", value) for key, value in item.items()]
        elif isinstance(item, list):
            children = [(f"{path}[{index}]", value) for index, value in enumerate(item)]
        else:
            continue
        if depth == MAX_SCHEMA_DEPTH:
            return path
        stack.extend((value, child_path, depth + 1) for child_path, value in children)
    return None


def _find_remote_ref(node: Any) -> str | None:
    """The path of the first ``$ref`` that does not point inside the document, if any."""
    return _first_path(
        node, lambda n: isinstance(n, dict) and isinstance(n.get("$ref"), str) and not n["$ref"].startswith("#")
    )


def _find_nul(node: Any) -> str | None:
    """The path of the first string holding a NUL character (or of the object with such a key), if any."""
    return _first_path(
        node, lambda n: (isinstance(n, str) and "\x00" in n) or (isinstance(n, dict) and any("\x00" in k for k in n))
    )


def _text(raw: dict[str, Any], key: str) -> str:
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DefinitionError(f"'{key}' must be a string, got {type(value).__name__}")
    return value


def _title(raw: dict[str, Any]) -> str:
    """The display title, cut with a marker past MAX_TITLE_LENGTH: a title is shown, never matched or called."""
    title = _text(raw, "title")
    return title if len(title) <= MAX_TITLE_LENGTH else title[: MAX_TITLE_LENGTH - 1] + "…"


def _optional_object(raw: dict[str, Any], *keys: str) -> dict[str, Any] | None:
    for key in keys:
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise DefinitionError(f"'{key}' must be a JSON object, got {type(value).__name__}")
        return value
    return None


# Scripts that may share one name (Unicode TR39's "highly restrictive" level): Japanese, Chinese and Korean writing
# mixes Han with its own scripts, and each with Latin. Any other mix of scripts in one name is refused.
_SCRIPTS_WRITTEN_TOGETHER = (
    frozenset(("LATIN", "HAN", "HIRAGANA", "KATAKANA")),
    frozenset(("LATIN", "HAN", "BOPOMOFO")),
    frozenset(("LATIN", "HAN", "HANGUL")),
)
# A letter's script, as the first word of its Unicode name says it ("CYRILLIC SMALL LETTER A"), but for these.
_SCRIPT_OF_NAME = {"CJK": "HAN", "HALFWIDTH": "KATAKANA"}


# Unicode's default-ignorable characters that are no format character (Cf, refused above): a mark or a letter that
# shows nothing (U+034F COMBINING GRAPHEME JOINER, variation selectors, Hangul fillers, Khmer's inherent vowels),
# so "read_fi\u034fle" was "read_file" to every reader (redteam45). From DerivedCoreProperties'
# Default_Ignorable_Code_Point, with U+2800 BRAILLE PATTERN BLANK (a symbol that shows as a space).
_INVISIBLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)


def _invisible(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _INVISIBLE_RANGES)


@lru_cache(maxsize=1)
def _ascii_read_as() -> dict[str, str]:
    """Each non-ASCII character Unicode's confusables read as an ASCII punctuation mark or symbol ("‐" -> "-")."""
    return {chr(code): read for code, read in confusables_table().items() if not read.isalnum()}


def _script(char: str) -> str:
    word = unicodedata.name(char, "UNKNOWN").split(" ", 1)[0]
    return _SCRIPT_OF_NAME.get(word, word)


def name_spelling_problem(name: str) -> str | None:
    """Why a tool name could pass for another name, or None (redteam41). A name is what a curator, an approver and a
    model read to tell tools apart, and an upstream names its tools as it likes: a Cyrillic "а" in "reаd_file"
    beside the real read_file, a line or paragraph separator (U+2028, U+2029, which a log or a page breaks on), an
    invisible or direction character, a space other than ASCII's, or a compatibility form (full-width, mathematical
    letters: NFKC changes them) made two names read alike. Letters of more than one script are refused unless the
    scripts are written together (``_SCRIPTS_WRITTEN_TOGETHER``); a name wholly in one other script is refused when
    every letter of it reads as a Latin letter (Unicode's confusables, ``catalog.confusables``), else it passes."""
    for char in name:
        category = unicodedata.category(char)
        if (
            category in ("Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn")
            or (category == "Zs" and char != " ")
            or _invisible(char)
        ):
            return f"contains the invisible or separator character U+{ord(char):04X}"
        if not char.isascii() and category[0] in "PS" and char in _ascii_read_as():
            # Punctuation or a symbol that reads as an ASCII one ("‐" U+2010 for "-"): "read‐file" beside "read-file".
            return (
                f"contains U+{ord(char):04X}, which reads as {_ascii_read_as()[char]!r}, so it can read as another name"
            )
    if unicodedata.normalize("NFC", name) != name:
        return "is not in Unicode's composed form (NFC), so it reads as another spelling of the same name"
    if unicodedata.normalize("NFKC", name) != name:
        return "contains compatibility characters (full-width or styled letters, ligatures) that read as others"
    letters = [char for char in name if unicodedata.category(char).startswith("L")]
    scripts = {_script(char) for char in letters}
    if len(scripts) > 1 and not any(scripts <= allowed for allowed in _SCRIPTS_WRITTEN_TOGETHER):
        return f"mixes letters of the scripts {', '.join(sorted(scripts))}, so it can read as another name"
    if letters and all(foreign_lookalike(char) for char in letters):
        # Wholly in one other script, every letter one that reads as a Latin letter (TR39's whole-script
        # confusable): Cyrillic "сору" is read as "copy" by everyone, the model included (redteam44).
        table = confusables_table()
        read_as = "".join(table.get(ord(char), char) for char in name)
        return (
            f"is written in {', '.join(sorted(scripts))} letters that each read as a Latin one ({ascii(read_as)}), "
            "so it can read as another name"
        )
    return None


def normalize_definition(raw: Any, *, max_bytes: int) -> ToolDefinition:
    """Validate one tool from ``tools/list`` (or an import line) and return its normalized definition.

    Accepts MCP field names (``inputSchema``) and snake_case (``input_schema``). Raises DefinitionError.
    """
    if not isinstance(raw, dict):
        raise DefinitionError(f"a tool must be a JSON object, got {type(raw).__name__}")
    too_deep = _find_too_deep(raw)
    if too_deep:
        where = too_deep if len(too_deep) <= 120 else f"{too_deep[:60]}…{too_deep[-60:]}"
        raise DefinitionError(f"the definition nests more than {MAX_SCHEMA_DEPTH} levels deep, at {where}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise DefinitionError("tool has no name")
    if len(name) > MAX_NAME_LENGTH:
        raise DefinitionError(f"tool name is longer than {MAX_NAME_LENGTH} characters")
    if TOOL_ID_SEPARATOR in name or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise DefinitionError(f"tool name {name[:80]!r} contains '::' or control characters")
    problem = name_spelling_problem(name)
    if problem:
        raise DefinitionError(f"tool name {ascii(name[:80])} {problem}")

    schema = raw.get("inputSchema", raw.get("input_schema"))
    if schema is None:
        schema = {"type": "object", "properties": {}}
    if not isinstance(schema, dict):
        raise DefinitionError(f"inputSchema must be a JSON object, got {type(schema).__name__}")
    if schema.get("type", "object") != "object":
        raise DefinitionError(f"inputSchema must describe an object, got type {schema.get('type')!r}")
    schema = {"type": "object", **schema}
    output_schema = _optional_object(raw, "outputSchema", "output_schema")
    for label, node in (("inputSchema", schema), ("outputSchema", output_schema)):
        remote = _find_remote_ref(node)
        if remote:
            raise DefinitionError(f"{label} has a remote $ref at {remote}; only local '#/...' references are allowed")
    # Arguments are checked against the inputSchema with RE2 (no backtracking): refuse what it cannot run.
    # ... and refuse one whose check can take exponential time (shared or multiplying $refs, C1-19).
    schema_problem = schema_regex_problem(schema) or schema_evaluation_problem(schema)
    if schema_problem:
        raise DefinitionError(f"inputSchema: {schema_problem}")
    # 2026-07-28 clients must drop such a tool from a listing, so Scout would serve a tool they cannot see or call.
    header_problem = find_invalid_x_mcp_header(schema)
    if header_problem:
        raise DefinitionError(f"inputSchema: {header_problem} (MCP 2026-07-28 clients drop such a tool)")

    definition = ToolDefinition(
        name=name,
        title=_title(raw),
        description=_text(raw, "description"),
        input_schema=schema,
        output_schema=output_schema,
        annotations=_optional_object(raw, "annotations"),
        deprecated=raw.get("deprecated") is True,
    )
    try:
        size = len(canonical_json(definition.canonical()).encode("utf-8"))
    except ValueError as exc:  # NaN or Infinity inside a schema
        raise DefinitionError(f"definition is not valid JSON: {exc}") from exc
    if size > max_bytes:
        raise DefinitionError(f"definition is {size} bytes, over the {max_bytes}-byte limit")
    # Postgres refuses a NUL in text and JSON: one such tool failed the saving of its server's whole listing.
    nul_at = _find_nul(definition.canonical())
    if nul_at:
        raise DefinitionError(f"a text holds a NUL character at {nul_at}, which the catalog cannot store")
    return definition


def normalize_listing(
    raw_tools: list[Any], *, max_bytes: int
) -> tuple[list[ToolDefinition], list[dict[str, str]], set[str]]:
    """Normalize a whole listing.

    Returns the accepted definitions, the rejections (``{"name", "reason"}``) and every name the listing
    mentioned, so a tool that is still listed but now rejected is kept rather than tombstoned.
    """
    accepted: dict[str, ToolDefinition] = {}
    rejections: list[dict[str, str]] = []
    mentioned: set[str] = set()
    for index, raw in enumerate(raw_tools):
        raw_name = raw.get("name") if isinstance(raw, dict) else None
        label = raw_name[:120] if isinstance(raw_name, str) and raw_name.strip() else f"#{index}"
        if isinstance(raw_name, str) and raw_name.strip():
            mentioned.add(raw_name)
        try:
            definition = normalize_definition(raw, max_bytes=max_bytes)
        except DefinitionError as exc:
            rejections.append({"name": label, "reason": str(exc)})
            continue
        if definition.name in accepted:
            rejections.append({"name": label, "reason": "duplicate tool name in one listing; the first was kept"})
            continue
        accepted[definition.name] = definition
    return list(accepted.values()), rejections, mentioned
