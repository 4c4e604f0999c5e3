"""Similar requests grouped the way a curator reads them (issue 8): "send an email to bob", "send email to Bob
please" and "send an e-mail to bob" are one piece of work, not three.

Plain functions over texts, no ORM: the workbench feeds them the requests a curator may read, so a group never
holds (or is seeded by) another tenant's words. Cheap by design: the workbench groups up to 2,000 log rows per page
view, so each request is folded once and compared only with the groups sharing a word (an inverted index).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import Stemmer

from .text import tokenize

# Two requests are one group when their folded words overlap this much (Jaccard: shared / all) and share at least
# two words: "weather tokyo" joins "weather tokyo today" (2/3), while "delete file" and "read file" (1/3), or "send
# email alice" and "send email bob" (2/4), stay apart. A one-word request only joins the same word.
SIMILAR = 2 / 3
MIN_SHARED = 2
# A hyphen inside a word is spelling, not a boundary: "e-mail" is "email", "to-do" is "todo".
_INNER_HYPHEN = re.compile(r"(?<=[^\W_])[-‐‑](?=[^\W_])")
_STEMMER = Stemmer.Stemmer("english")


def request_words(text: str) -> frozenset[str]:
    """The words of a request that say what it asks, folded: case, punctuation and stopwords ("an", "to",
    "please") out, a hyphen inside a word dropped, plurals and inflections folded ("emails", "sending" ->
    "email", "send"). An identifier counts by its parts ("list_files" as "list files"). Empty for a request of
    stopwords or symbols only."""
    text = _INNER_HYPHEN.sub("", unicodedata.normalize("NFKC", text))
    words = [word for word in tokenize(text) if "_" not in word]  # tokenize keeps a compound whole and its parts
    return frozenset(_STEMMER.stemWords(words))


def similar(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two requests' folded words (``request_words``) are one group's."""
    if a == b:
        return True
    shared = len(a & b)
    return shared >= MIN_SHARED and shared >= SIMILAR * (len(a) + len(b) - shared)


def group_words(text: str) -> frozenset[str]:
    """``request_words``, or for a request of stopwords or symbols only ("?!", "do it") its characters, so that it
    groups with the same characters only."""
    return request_words(text) or frozenset({" ".join(unicodedata.normalize("NFKC", text).casefold().split())})


@dataclass(eq=False)
class Cluster:
    """One group: its first words (what later requests are compared with), and what it stands for when a curator
    decided it already (``Grouper.mark``; None: a group waiting)."""

    words: frozenset[str]
    mark: object = None


class Grouper:
    """Groups texts in the order given (newest first on the workbench): a text joins the first group whose first
    words it is ``similar`` to, else starts one. Compared with a group's first words, not with every member's, so a
    chain of small changes ("a b c", "b c d", "c d e") never walks one group across unrelated requests.

    Candidates come from prefix filtering (PPJoin, Xiao et al. 2008): with every word set ordered rarest first
    among ``texts``, two sets this similar share a word among the first few of each, at positions that leave room
    for enough shared words; only groups passing that are compared. Without it, 2,000 distinct requests sharing
    common words ("please list the thing 17") were compared pairwise, 26 times the cost of exact grouping."""

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self.clusters: list[Cluster] = []
        self._words: dict[str, frozenset[str]] = {}  # a text asked again is folded once
        self._by_words: dict[frozenset[str], int] = {}  # words met before: no comparison at all
        # word -> (its position in a group's ordered words, that group's size) -> the groups
        self._index: dict[str, dict[tuple[int, int], list[int]]] = {}
        self._rarity = Counter(word for words in {self.words(text) for text in texts} for word in words)

    def words(self, text: str) -> frozenset[str]:
        words = self._words.get(text)
        if words is None:
            words = self._words[text] = group_words(text)
        return words

    def mark(self, text: str, mark: object) -> Cluster:
        """Mark the group ``text`` belongs in (started if none is similar), e.g. as dismissed: texts added before or
        after that join it are marked with it."""
        cluster = self.add(text)
        cluster.mark = cluster.mark or mark
        return cluster

    def add(self, text: str) -> Cluster:
        """The group ``text`` joins."""
        words = self.words(text)
        number = self._by_words.get(words)
        if number is None:
            number = self._find(words)
            if number is None:
                number = self._start(words)
            self._by_words[words] = number
        return self.clusters[number]

    def _ordered(self, words: frozenset[str]) -> list[str]:
        # Rarest first; a word ``texts`` did not hold counts as rarest. Fixed once made, as the index needs.
        return sorted(words, key=lambda word: (self._rarity.get(word, 0), word))

    def _find(self, words: frozenset[str]) -> int | None:
        ordered, size = self._ordered(words), len(words)
        candidates: set[int] = set()
        for position, word in enumerate(ordered[: _prefix(size)]):
            for (at, other), numbers in self._index.get(word, {}).items():
                # Jaccard >= SIMILAR needs sizes within that ratio and this many shared words, all from here on.
                if SIMILAR * other > size or SIMILAR * size > other:
                    continue
                if min(size - position, other - at) < _needed(size, other):
                    continue
                candidates.update(numbers)
        return next((n for n in sorted(candidates) if similar(words, self.clusters[n].words)), None)

    def _start(self, words: frozenset[str]) -> int:
        number = len(self.clusters)
        self.clusters.append(Cluster(words=words))
        ordered, size = self._ordered(words), len(words)
        for position, word in enumerate(ordered[: _prefix(size)]):
            self._index.setdefault(word, {}).setdefault((position, size), []).append(number)
        return number


def _prefix(size: int) -> int:
    """How many of a word set's rarest words two sets this similar must share one of."""
    return size - math.ceil(SIMILAR * size - 1e-9) + 1


def _needed(size: int, other: int) -> int:
    """The fewest shared words for Jaccard >= SIMILAR between sets of these sizes (shared >= t/(1+t) * (a+b))."""
    return math.ceil(SIMILAR / (1 + SIMILAR) * (size + other) - 1e-9)


def wording(text: str) -> str:
    """The form two wordings of a group are told apart by: the same text in other case or spacing is one wording."""
    return " ".join(text.casefold().split())


def wordings(texts: Iterable[str]) -> list[tuple[str, int]]:
    """The distinct wordings among ``texts``, most asked first (then first given), each as first given, with how
    often."""
    counts: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for text in texts:
        key = wording(text)
        counts[key] += 1
        shown.setdefault(key, " ".join(text.split()))
    order = {key: n for n, key in enumerate(shown)}
    return [(shown[key], counts[key]) for key in sorted(shown, key=lambda key: (-counts[key], order[key]))]
