"""Which tool of a server makes an identifier another of its tools needs (ranking's ``_apply_producers``).

A tool that takes an identifier a person never says (a paper's id, a ticker, a latitude, a station code, an
object id) is called after a tool of its server that finds it from what the person does say (``search_papers``,
``load_all_tickers``, ``geocode_address``): a step the request never words. Read from the tools' own texts only
(a required input's name; a tool's name and description), with RE2: upstream text is untrusted.
"""

import re2

from ..text import STOPWORDS, split_identifier, tokenize

# A required input whose name has one of these words is an identifier (found by another tool, rarely said).
IDENTIFIER_WORDS = frozenset(
    {"id", "code", "latitude", "longitude", "lat", "lon", "lng", "ticker", "symbol", "telecode", "uuid", "slug"}
)
# Words of an identifier's name that say nothing of what it identifies.
_GENERIC = frozenset(
    "id ids name names query q type limit page text value data format mode options key path url content input file "
    "params param string number list".split()
)
# ``documents.render_parameters``' line of a required input: ``name (type, required)...``.
_REQUIRED = re2.compile(r"^(\S+) \([^,()]*, required\)")


def singular(word: str) -> str:
    """``tickers`` -> ``ticker``: enough to match an input's name against a tool's text (no stemmer: see
    ``text.tokenize``)."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def needed_identifiers(parameters: tuple[str, ...]) -> frozenset[str]:
    """The words of the identifiers a tool requires (``paper_id`` -> ``paper``; ``latitude`` -> ``latitude``),
    from its rendered parameter lines; empty when it requires none."""
    words: set[str] = set()
    for line in parameters:
        match = _REQUIRED.search(line)
        if not match:
            continue
        parts = [singular(w) for w in split_identifier(match.group(1)).split()]
        if IDENTIFIER_WORDS.isdisjoint(parts):
            continue
        words.update(w for w in parts if w not in _GENERIC and w not in STOPWORDS and len(w) > 1)
    return frozenset(words)


def produced_words(name: str, description: str) -> frozenset[str]:
    """A tool's name and description words (singular): what it may find for another tool."""
    return frozenset(singular(w) for w in tokenize(f"{split_identifier(name)} {description}"))
