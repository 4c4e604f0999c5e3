"""Letters that read as others: Unicode's confusables (the ``confusable-homoglyphs`` copy of confusables.txt) as one
table, read by the output policy and the injection screen (``governance.sanitize``) and by sync's check of a tool's
name (``catalog.definitions.name_spelling_problem``)."""

from __future__ import annotations

import unicodedata
from functools import lru_cache


def strip_marks(text: str) -> str:
    """Decomposed, without combining marks (é -> e, й -> и): accents cannot split a matched word."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))


@lru_cache(maxsize=1)
def confusables_table() -> dict[int, str]:
    """Each non-ASCII character that Unicode lists as confusable with an ASCII letter (or, failing a letter,
    ASCII punctuation), mapped to it; chains such as к -> ĸ -> k are followed. Built once from the
    ``confusable-homoglyphs`` copy of Unicode's confusables.txt."""
    from confusable_homoglyphs.confusables import confusables_data

    def ascii_of(glyph: str) -> str | None:
        glyph = strip_marks(glyph.strip("\u200e\u200f")).casefold()
        return glyph if len(glyph) == 1 and glyph.isascii() and glyph.isprintable() and glyph != " " else None

    direct: dict[str, list[str]] = {}
    for char, homoglyphs in confusables_data.items():
        if len(char) != 1 or char.isascii():
            continue  # ASCII stays as written: mapping "1" to "l" would change ordinary numbers
        direct[char] = [glyph["c"].strip("\u200e\u200f") for glyph in homoglyphs]

    def resolve(char: str, depth: int = 0) -> str | None:
        candidates = [ascii_of(glyph) for glyph in direct.get(char, [])]
        letters = [c for c in candidates if c and c.isalpha()]
        if letters:
            return letters[0]
        if depth < 2:
            for glyph in direct.get(char, []):
                if len(glyph) == 1 and not glyph.isascii():
                    found = resolve(glyph, depth + 1)
                    if found and found.isalpha():
                        return found
        others = [c for c in candidates if c]
        return others[0] if others else None

    table: dict[int, str] = {}
    for char in direct:
        mapped = resolve(char)
        if mapped is not None:
            table[ord(char)] = mapped
    return table


def foreign_lookalike(ch: str) -> bool:
    """Whether ``ch`` is a letter of another script than Latin that reads as an ASCII letter (Cyrillic "а", Greek
    "ο"): an accented or extra Latin letter (Turkish "ı", "ſ") is ordinary spelling, not a disguise."""
    table = confusables_table()
    return (
        not ch.isascii()
        and ord(ch) in table
        and table[ord(ch)].isalpha()
        and not unicodedata.name(ch, "").startswith("LATIN")
    )
