"""BM25 over a term-frequency matrix, with corpus statistics taken from the caller's visible tools only.

Why not bm25s' precomputed index: bm25s bakes each term's IDF and the average document length of the
whole indexed corpus into its score matrix. A hidden tool would then change every visible tool's score
(and so order, normalized scores and abstention). Here the index keeps raw term frequencies in the same
CSC layout bm25s uses and applies the Lucene BM25 formula per query, with document frequency, document
count and average length computed over the visible rows. A hidden tool contributes nothing: not to a
score, not to a statistic. Cost per query: one column slice per query term plus one masked sum.
"""

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..text import quoted_only_terms, request_terms, tokenize

K1 = 1.5
B = 0.75
# A learned word counts fully once this many of the tool's learned requests contain it, else this share.
LEARNED_AGREEMENT = 2
LEARNED_SINGLE_SHARE = 0.5
# A word the request says only inside quotes (``text.quoted_only_terms``: a title, a file or folder name, an id it
# gives) adds this share of its BM25 score: it is a value for the tool, not what the request asks for ('a folder
# named "Q2 Reports" inside the "Finance" folder' led with FinanceMCP::create_note on "finance"). Its coverage
# counts in full (the calibrated score and withholding are unchanged). Measured as served (bench/NOTES-rank19.md):
# ETOM level-2 Hit@1 .831 -> .841, level 1 .965 -> .969, level-4 slot recall .769 -> .773; LiveMCPBench+MCPVerse
# Hit@1 .319 -> .340; no figure of any set down. Dropping such words (0) cost LiveMCPBench a Hit@5 request (a
# quoted path whose folder named the server).
QUOTED_SHARE = np.float32(0.25)
_KEPT_NORMS = 4  # average lengths whose per-row length norms an index keeps (``SparseIndex._length_norms``)


@dataclass(frozen=True)
class SparseScores:
    scores: np.ndarray  # (n_docs,) BM25 score, 0 for hidden or unmatched rows
    coverage: np.ndarray  # (n_docs,) share of the query's IDF mass the document matches, 0..1
    query_terms: tuple[str, ...]  # the distinct query terms, in query order
    idf: tuple[float, ...] = ()  # each query term's IDF over the visible rows (its share of the coverage's mass)
    # Each query term's visible rows that have it (None: none), aligned with ``query_terms``: which words a row's
    # coverage counts (``ranking.curated_evidence``). The arrays the scores were made from, not copies.
    term_rows: tuple[np.ndarray | None, ...] = ()


class SparseIndex:
    """Immutable once built. Rows are documents, in the order given."""

    def __init__(
        self, weighted_tokens: Iterable[Iterable[tuple[str, int]]], vocab: dict[str, int] | None = None
    ) -> None:
        """``weighted_tokens``: one document's (token, weight) pairs at a time; a generator is fine.
        ``vocab``: token -> column to extend (new tokens are added to it) instead of a new one.

        Triplets go into typed buffers (4 bytes an entry) rather than Python lists (8 bytes a reference
        plus an object): at 100k tools that is the difference between a few and several hundred MB.
        """
        vocab = {} if vocab is None else vocab
        rows, cols, data, lengths = array("i"), array("i"), array("f"), array("f")
        for row, pairs in enumerate(weighted_tokens):
            counts: dict[int, float] = {}
            length = 0.0
            for token, weight in pairs:
                col = vocab.setdefault(token, len(vocab))
                counts[col] = counts.get(col, 0.0) + weight
                length += weight
            lengths.append(length)
            rows.extend(array("i", [row]) * len(counts))
            cols.extend(counts.keys())
            data.extend(counts.values())
        shape = (len(lengths), max(len(vocab), 1))
        self.vocab = vocab
        coords = (np.frombuffer(rows, np.int32), np.frombuffer(cols, np.int32))
        self.tf = sp.csc_matrix((np.frombuffer(data, np.float32), coords), shape=shape)
        self.lengths = np.frombuffer(lengths, np.float32).copy()
        self._norms: dict[float, np.ndarray] = {}  # ``_length_norms`` by average length

    def __len__(self) -> int:
        return self.tf.shape[0]

    def unused_words(self) -> int:
        """Words no row has any more (left by removed or changed rows of updates)."""
        return int((np.diff(self.tf.indptr) == 0).sum())

    def updated(
        self, kept: np.ndarray, kept_to: np.ndarray, n_docs: int, added: dict[int, Iterable[tuple[str, float]]]
    ) -> "SparseIndex":
        """This index for another set of rows: old row ``kept[i]`` becomes row ``kept_to[i]``; ``added`` gives
        new rows their (token, weight) pairs. Scores equal a fresh build's: each row's term frequencies and
        length are the same numbers; only column numbers differ, and words left only by removed rows keep an
        empty column, which scores as an unknown word does."""
        row_map = np.full(len(self), -1, np.int32)
        row_map[np.asarray(kept, np.int64)] = kept_to
        old_counts = np.diff(self.tf.indptr)
        columns = np.repeat(np.arange(len(old_counts), dtype=np.int32), old_counts)
        rows = row_map[self.tf.indices]
        alive = rows >= 0
        columns, rows, data = columns[alive], rows[alive], self.tf.data[alive]
        index = SparseIndex.__new__(SparseIndex)
        index.vocab = dict(self.vocab)
        extra = SparseIndex(added.values(), vocab=index.vocab)  # adds the new words to the shared vocabulary
        new_rows = np.asarray(list(added), np.int32)  # the rows of ``added.values()``, in order
        extra_tf = extra.tf.tocsc()  # column-grouped, as the kept entries are
        extra_columns = np.repeat(np.arange(extra_tf.shape[1], dtype=np.int32), np.diff(extra_tf.indptr))
        n_columns = max(len(index.vocab), 1)
        kept_per_column = np.bincount(columns, minlength=n_columns)
        per_column = kept_per_column + np.bincount(extra_columns, minlength=n_columns)
        indptr = np.zeros(n_columns + 1, np.int32)  # int32 indices, as scipy keeps them below 2**31 entries
        np.cumsum(per_column, out=indptr[1:])
        # Each column: its kept entries (in their order), then the new rows' entries. The row order within a
        # column changes no score (every per-row operation is elementwise).
        kept_starts = np.zeros(n_columns + 1, np.int64)
        np.cumsum(kept_per_column, out=kept_starts[1:])
        at = np.arange(len(columns)) - kept_starts[columns] + indptr[columns]
        extra_at = (
            np.arange(len(extra_columns))
            - extra_tf.indptr[extra_columns]
            + indptr[extra_columns]
            + kept_per_column[extra_columns]
        )
        indices = np.empty(int(indptr[-1]), np.int32)
        values = np.empty(int(indptr[-1]), np.float32)
        indices[at], values[at] = rows, data
        indices[extra_at], values[extra_at] = new_rows[extra_tf.indices], extra_tf.data
        index.tf = sp.csc_matrix((values, indices, indptr), shape=(n_docs, n_columns))
        index.lengths = np.zeros(n_docs, np.float32)
        index.lengths[kept_to] = self.lengths[kept]
        index.lengths[new_rows] = extra.lengths
        index._norms = {}
        return index

    def score(self, query: str, visible: np.ndarray) -> SparseScores:
        """BM25 of ``query`` against every visible row. ``visible`` is a boolean mask over rows."""
        return self.score_many([query], visible)[0]

    def score_many(self, queries: Sequence[str], visible: np.ndarray) -> list[SparseScores]:
        """``[self.score(query, visible) for query in queries]``, each term's weights computed once: a multi-step
        request's parts repeat its words. The same numbers, added in the same order."""
        n_docs = len(self)
        n_visible = int(visible.sum())
        everyone = n_visible == n_docs  # no mask to apply (the same values, without copying each term's rows)
        avg_len = 1.0
        if n_visible:
            avg_len = float((self.lengths if everyone else self.lengths[visible]).sum()) / n_visible or 1.0
        norms = self._length_norms(avg_len)
        weighed: dict[str, tuple[float, np.ndarray | None, np.ndarray | None]] = {}

        def weigh(term: str) -> tuple[float, np.ndarray | None, np.ndarray | None]:
            """The term's IDF, the visible rows that have it and what it adds to their scores."""
            col = self.vocab.get(term)
            if col is None:
                return _idf(0, n_visible), None, None  # an unknown word is as rare as can be: it lowers coverage
            start, end = self.tf.indptr[col], self.tf.indptr[col + 1]
            doc_rows, tf = self.tf.indices[start:end], self.tf.data[start:end]
            if not everyone:
                keep = visible[doc_rows]
                doc_rows, tf = doc_rows[keep], tf[keep]
            idf = _idf(len(doc_rows), n_visible)
            if len(doc_rows) == 0:
                return idf, None, None
            return idf, doc_rows, idf * tf * (K1 + 1) / (tf + norms[doc_rows])

        results = []
        for query in queries:
            terms = tuple(dict.fromkeys(request_terms(query)))
            scores = np.zeros(n_docs, dtype=np.float32)
            matched_mass = np.zeros(n_docs, dtype=np.float32)
            if not terms or n_visible == 0:
                results.append(SparseScores(scores, matched_mass, terms))
                continue
            total_mass = 0.0
            quoted = quoted_only_terms(query)
            for term in terms:
                if term not in weighed:
                    weighed[term] = weigh(term)
                idf, doc_rows, added = weighed[term]
                total_mass += idf
                if doc_rows is None:
                    continue
                # ufunc.at: the same one float32 addition per row (a term's rows are distinct) as
                # ``scores[doc_rows] += added``, without gathering and scattering the rows (half the time). The
                # IDF as float32, as ``+=`` rounds it (ufunc.at would add the float64 value, then round).
                np.add.at(scores, doc_rows, added * QUOTED_SHARE if term in quoted else added)
                np.add.at(matched_mass, doc_rows, np.float32(idf))
            if total_mass > 0:
                matched_mass /= total_mass  # now the coverage
            idf = tuple(weighed[term][0] for term in terms)
            results.append(SparseScores(scores, matched_mass, terms, idf, tuple(weighed[term][1] for term in terms)))
        return results

    def _length_norms(self, avg_len: float) -> np.ndarray:
        """Each row's ``K1 * (1 - B + B * length / avg_len)`` (float32, the same bits as computed for a term's
        rows), kept for the last few average lengths: a caller's visible set, and so its average length, stays
        the same from request to request, and each term of a request then only reads its rows' values."""
        norms = self._norms.get(avg_len)
        if norms is None:
            norms = K1 * (1 - B + B * self.lengths / avg_len)
            norms.setflags(write=False)
            if len(self._norms) >= _KEPT_NORMS:
                self._norms = {}  # a new dict, not emptied in place: another thread may be reading the old one
            self._norms[avg_len] = norms
        return norms


def _idf(df: int, n: int) -> float:
    """Lucene's BM25 IDF: always positive."""
    return float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))


def weighted_tokens(fields: dict[str, str], weights: dict[str, int]) -> list[tuple[str, int]]:
    """Tokens of each field with the field's weight (repeat-weighting, without materializing repeats)."""
    pairs: list[tuple[str, int]] = []
    for name, text in fields.items():
        weight = weights.get(name, 1)
        if text and weight > 0:
            pairs.extend((token, weight) for token in tokenize(text))
    return pairs


def learned_tokens(
    learned: Iterable[tuple[str, float]], field_weight: float, teachers: Sequence[Sequence[str]] | None = None
) -> list[tuple[str, float]]:
    """A tool's learned requests as BM25 tokens: each distinct term once, weighted by the largest weight of
    a learned request containing it times ``field_weight``, and by half that while fewer than
    ``LEARNED_AGREEMENT`` distinct teachers' requests contain it (``teachers``: each request's teachers, aligned
    with ``learned``; None: every request its own teacher). Many learned requests (from one principal or many)
    never add up past one weighted occurrence per term, one teacher's many wordings never make a word agreed,
    and the weight (under 1, capped) keeps a learned word below a curated one. The half: a word in one
    request alone is often that request's own wording (a platform name, the request's object), shared with
    requests for the tool's siblings; learned at full weight, such words pulled other tools' requests to the
    learning tool (ETOM, learning from half of levels 1-2 and tested on the other half: Hit@1 .898 without
    learning, .855 with, .878 with the half; MetaTool unchanged)."""
    best: dict[str, float] = {}
    agreeing: dict[str, set] = {}
    for i, (text, weight) in enumerate(learned):
        who = set(teachers[i]) if teachers is not None else {i}
        for token in set(tokenize(text)):
            best[token] = max(best.get(token, 0.0), weight * field_weight)
            agreeing.setdefault(token, set()).update(who)
    return [
        (token, weight if len(agreeing[token]) >= LEARNED_AGREEMENT else weight * LEARNED_SINGLE_SHARE)
        for token, weight in best.items()
        if weight > 0
    ]
