"""Text helpers shared by the sparse index, documents and explanations. ORM-free."""

import difflib
import re
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import re2
from bm25s.stopwords import (
    STOPWORDS_DUTCH,
    STOPWORDS_EN,
    STOPWORDS_EN_PLUS,
    STOPWORDS_FRENCH,
    STOPWORDS_GERMAN,
    STOPWORDS_ITALIAN,
    STOPWORDS_PORTUGUESE,
    STOPWORDS_SPANISH,
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CHUNK = re.compile(r"[\w\-]+", re.UNICODE)
_SENTENCE_END = re.compile(r"(?<=[.!?。])\s+|\n")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
STOPWORDS = frozenset(STOPWORDS_EN) | {"please", "can", "could", "would", "want", "need", "i", "me", "my"}


def split_identifier(name: str) -> str:
    """``createPullRequest`` / ``create_pull-request`` -> ``create pull request``."""
    spaced = _CAMEL.sub(" ", name)
    return " ".join(_WORD.findall(spaced)).lower()


def name_words(name: str) -> frozenset[str]:
    """A tool name's words as a request would say them (``read_file`` -> ``read file``; stopwords and single
    letters dropped, as ``tokenize`` drops them from requests): what ranking's name bonus compares."""
    words = split_identifier(name).split()
    return frozenset(w for w in words if w not in STOPWORDS and (len(w) > 1 or not w.isascii()))


def strip_control(text: str) -> str:
    return _CONTROL.sub(" ", text)


def tokenize(text: str) -> list[str]:
    """Lowercased words, identifiers split on ``_ - .`` and camelCase, English stopwords dropped.

    No stemming: with the name weighted, PyStemmer measured worse inside the hybrid (RETRIEVAL-NOTES).
    Compound words are kept whole as well as split (``GitHub`` -> ``github git hub``, ``list_files`` ->
    ``list_files list files``), so an exact tool name and its parts both match.
    """
    tokens: list[str] = []
    for whole, parts in _chunks(text):
        if whole:
            tokens.append(whole)
        for raw in parts:
            word = raw.lower()
            if word in STOPWORDS or (len(word) == 1 and word.isascii()):
                continue
            tokens.append(word)
    return tokens


def compound_parts(text: str) -> dict[str, frozenset[str]]:
    """The words ``tokenize`` splits out of a compound, each with the compounds it comes from (``GitHub`` ->
    ``{"git": {"github"}, "hub": {"github"}}``): a part names something only as its whole does."""
    parts: dict[str, frozenset[str]] = {}
    for whole, pieces in _chunks(text):
        for word in (piece.lower() for piece in pieces) if whole else ():
            if word != whole:
                parts[word] = parts.get(word, frozenset()) | {whole}
    return parts


def _chunks(text: str) -> Iterator[tuple[str, list[str]]]:
    """Each chunk of ``text`` (a word or identifier) as its compound whole (lower case, ``-`` as ``_``; "" for a
    chunk of one word) and its parts as written (split on ``_ - .`` and camelCase): what ``tokenize`` and
    ``compound_parts`` read."""
    for chunk in _CHUNK.findall(unicodedata.normalize("NFKC", text)):
        parts = _WORD.findall(_CAMEL.sub(" ", chunk))
        yield (chunk.strip("-_").lower().replace("-", "_") if len(parts) > 1 else ""), parts


# The texts one request tokenized, and their terms (``request_terms_kept``); None outside a request.
_request_terms: ContextVar[dict[str, tuple[str, ...]] | None] = ContextVar("scout_request_terms", default=None)


def request_terms(text: str) -> tuple[str, ...]:
    """``tokenize(text)`` for a request's own texts (the request, its parts), each tokenized once per request
    (within ``request_terms_kept``): one search validates, decomposes, scores, reads the intent of and demotes on
    the same few texts (issue 9: tokenizing them again and again was ~4% of a search's CPU outside the model). A
    tuple: shared by callers."""
    kept = _request_terms.get()
    if kept is None:
        return tuple(tokenize(text))
    terms = kept.get(text)
    if terms is None:
        terms = kept[text] = tuple(tokenize(text))
    return terms


@contextmanager
def request_terms_kept() -> Iterator[None]:
    """Within it, ``request_terms`` remembers what it tokenized; at its end the texts are forgotten. One request's
    span (nested: the outermost): no request's words outlive it here (SCOUT_QUERY_LOG=off keeps none anywhere)."""
    if _request_terms.get() is not None:
        yield
        return
    token = _request_terms.set({})
    try:
        yield
    finally:
        _request_terms.reset(token)


def mostly_non_latin(text: str) -> bool:
    """Whether most of the text's letters are outside the Latin script (Chinese, Cyrillic, Arabic, ...): a
    request the English-only embedding model cannot read. Accented Latin letters count as Latin."""
    if text.isascii():  # most requests: every letter is Latin, and no letter needs its Unicode name looked up
        return False
    letters = [ch for ch in text if ch.isalpha()]
    latin = sum(1 for ch in letters if ch.isascii() or "LATIN" in unicodedata.name(ch, ""))
    return latin * 2 < len(letters)


# Function words of Latin-script languages other than English (bm25s' lists), less English ones and words
# English requests and tool texts use ("want", "also", "ai", "com", "per", "non", "come", ... measured on the
# public English requests and catalogs: none of their 28k requests then reads as another language). English
# function words that are also theirs ("as", "do", "in", "me") count for neither.
_OTHER_LATIN = frozenset().union(
    STOPWORDS_FRENCH, STOPWORDS_SPANISH, STOPWORDS_PORTUGUESE, STOPWORDS_ITALIAN, STOPWORDS_GERMAN, STOPWORDS_DUTCH
)
_ENGLISH_WORDS = (frozenset(STOPWORDS_EN_PLUS) | STOPWORDS) - _OTHER_LATIN
_FOREIGN_WORDS = (
    _OTHER_LATIN
    - frozenset(STOPWORDS_EN_PLUS)
    - STOPWORDS
    - frozenset(
        "want also ai ad com per non come men man war op era sea son met van die door dir bin ben ed os ho ti par hat "
        "sin dan mit te na io yo todo todos los".split()  # "los": Los Angeles
    )
)


# Words an explanation never names as matched: function words of English (bm25s' longer list) and of the other
# Latin-script languages above. The ranking drops only the short English list; "de", "las" and "all" can match
# but say nothing to a reader.
_FUNCTION_WORDS = frozenset(STOPWORDS_EN_PLUS) | STOPWORDS | _FOREIGN_WORDS


def function_word(word: str) -> bool:
    """Whether ``word`` (lowercased) is a function word of English or another Latin-script language."""
    return word in _FUNCTION_WORDS


def mostly_foreign_latin(text: str) -> bool:
    """Whether the text reads as French, Spanish, Portuguese, Italian, German or Dutch: at least two of those
    languages' function words ("les", "pour", "una", "und", ...) and more of them than English ones. Cheap and
    rough; what it tells is whether the English-only embedding model can read the request."""
    words = [word.lower() for word in _WORD.findall(text) if len(word) > 1 or not word.isascii()]  # "à", not "a"
    foreign = sum(word in _FOREIGN_WORDS for word in words)
    return foreign >= 2 and foreign > sum(word in _ENGLISH_WORDS for word in words)


def unreadable_for_english_model(text: str) -> bool:
    """A request the English-only embedding model cannot read: mostly outside the Latin script, or in another
    Latin-script language (``mostly_foreign_latin``)."""
    return mostly_non_latin(text) or mostly_foreign_latin(text)


def first_sentence(text: str, limit: int = 300) -> str:
    text = text.strip()
    if not text:
        return ""
    return _SENTENCE_END.split(text, maxsplit=1)[0].strip()[:limit]


def _id_key(tool_id: str) -> str:
    """A tool id as people and models misremember it alike: any case, "-" for "_", a direct listing's
    "server__tool" for "server::tool"."""
    key = tool_id.strip().casefold().replace("-", "_")
    return key if "::" in key else key.replace("__", "::", 1)


def close_tool_ids(typed: str, tool_ids: Iterable[str], limit: int = 3) -> list[str]:
    """The ids among ``tool_ids`` a mistyped ``typed`` most likely meant, best first: the same id in another case
    or separator, a tool's name typed without its server, else the clear winners by similarity of the names (of
    the whole ids across servers); [] when none is close."""
    typed_key = _id_key(typed)
    if not typed_key:
        return []
    keys = {tool_id: _id_key(tool_id) for tool_id in tool_ids}
    typed_server, _, typed_name = typed_key.rpartition("::")
    close = [tool_id for tool_id, key in keys.items() if key == typed_key]
    if not close and not typed_server:
        close = [tool_id for tool_id, key in keys.items() if key.partition("::")[2] == typed_key]
    if not close:
        # One matcher per typed text, each candidate set as its first sequence: the typed side's index is built once.
        whole, named = difflib.SequenceMatcher(b=typed_key), difflib.SequenceMatcher(b=typed_name)
        # A close name shares a run of three letters with the typed one: one regular expression (in C) skips the
        # rest before difflib's Python loops (10,000 random visible ids: 240-350 ms without it, 15-30 ms with).
        grams = {typed_name[i : i + 3] for i in range(len(typed_name) - 2)} or {typed_name}
        shares_a_gram = re.compile("|".join(map(re.escape, sorted(grams)))).search
        scored = []
        for tool_id, key in keys.items():
            if not shares_a_gram(key):
                continue
            server, _, name = key.partition("::")
            # One server's ids share their prefix, which alone makes them look alike ("faulty::ping" and
            # "faulty::hang"): within the typed server only the names are compared.
            if server == typed_server:
                score = _similarity(named, name)
            else:
                score = max(_similarity(whole, key), _similarity(whole, name))
            if score >= 0.75:
                scored.append((score, tool_id))
        best = max((score for score, _ in scored), default=0)
        close = [tool_id for score, tool_id in sorted(scored, reverse=True) if score >= best - 0.1]
    return close[:limit]


def _similarity(matcher: difflib.SequenceMatcher[str], candidate: str) -> float:
    matcher.set_seq1(candidate)
    if matcher.real_quick_ratio() < 0.75 or matcher.quick_ratio() < 0.75:  # cheap upper bounds first
        return 0.0
    return matcher.ratio()


# A request's quoted spans: "...", `...`, “...”, and '...' opened outside a word (not the "'s" of "Apple's").
# On RE2: the request is untrusted text.
_QUOTED = re2.compile(
    r'"([^"\n]{1,200})"|`([^`\n]{1,200})`|\x{201c}([^\x{201d}\n]{1,200})\x{201d}|(?:^|[^\pL\pN_])\'([^\'\n]{1,200})\''
)
_QUOTES = "\"`'\u201c"


def quoted_only_terms(text: str) -> frozenset[str]:
    """The words (``tokenize``) the request says only inside quotes: the values it gives a tool (a title, a file
    name, a folder, an id: 'Create a folder named "Q2 Reports" inside the "Finance" folder'), not what it asks for.
    A word it also says outside quotes is not among them. A request that opens with a quote is read from its first
    word (its opening quote is not a value's)."""
    text = text.strip().lstrip(_QUOTES)
    if not any(quote in text for quote in _QUOTES):
        return frozenset()
    inside: set[str] = set()
    for match in _QUOTED.finditer(text):
        inside.update(tokenize(next((group for group in match.groups() if group), "")))
    if not inside:
        return frozenset()
    return frozenset(inside.difference(tokenize(_QUOTED.sub(" ", text))))
