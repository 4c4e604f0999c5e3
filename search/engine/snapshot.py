"""An immutable in-memory index: documents, sparse matrix, vector tables. Built whole, then swapped in.

Searches take a reference to one snapshot and use only it, so a rebuild running next to them is never
half-visible: they see the old snapshot or the new one.
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..documents import ToolDoc
from ..indexes import ToolSearchIndex
from ..text import tokenize
from .dense import DenseIndex
from .intent import tool_operation
from .ranking import Branches, Calibration, Ranking, RankingOptions, rank, score_branches
from .sparse import SparseIndex, learned_tokens, weighted_tokens


@dataclass(frozen=True)
class DocVectors:
    """A tool's vectors: one per dense text (kinds/texts align with rows), and its negative examples."""

    vectors: np.ndarray
    kinds: tuple[str, ...]
    texts: tuple[str, ...]
    negatives: np.ndarray | None = None


def _row_lookup(pks: np.ndarray) -> np.ndarray | None:
    """pk -> row (-1: not in the index) as an array, when pks are dense enough for one (database ids are)."""
    if not len(pks) or int(pks.min()) < 0 or int(pks.max()) > 4 * len(pks) + 1024:
        return None
    lookup = np.full(int(pks.max()) + 1, -1, dtype=np.int64)
    lookup[pks] = np.arange(len(pks))
    return lookup


def branches_visible(branches: Branches) -> np.ndarray:
    mask = np.zeros(len(branches.sparse.scores), dtype=bool)
    mask[branches.visible_rows] = True
    return mask


class IndexSnapshot:
    def __init__(
        self,
        docs: Sequence[ToolDoc],
        vectors: Mapping[int, DocVectors] | None,
        *,
        generation: str = "",
        model_key: str | None = None,
        half: bool = False,
        spill_dir: str | None = None,
    ) -> None:
        """``half``: scan float16 vectors and re-score exactly from a memory-mapped float32 file in
        ``spill_dir`` (engine/dense.py); the answers are the exact scan's, in about half the memory."""
        self.docs = tuple(docs)
        self.generation = generation
        self.model_key = model_key
        self.pks = np.asarray([d.pk for d in self.docs], dtype=np.int64)
        self._row_of_pk = _row_lookup(self.pks)
        # Tie-break key: position of the tool id in sorted order (relative order ignores hidden tools).
        order = sorted(range(len(self.docs)), key=lambda i: self.docs[i].tool_id)
        self.tie_keys = np.empty(len(self.docs), np.int64)
        self.tie_keys[order] = np.arange(len(self.docs))
        weights = ToolSearchIndex.weights()
        # A generator: one document's tokens at a time, never every document's token list at once.
        self.sparse = SparseIndex(
            weighted_tokens(d.field_texts(), weights) + learned_tokens(d.learned, ToolSearchIndex.learned_weight)
            for d in self.docs
        )
        self.tool_ops = [tool_operation(d.name, d.purpose or d.description) for d in self.docs]
        no_terms: frozenset[str] = frozenset()  # shared by every tool without negative examples
        self.negative_terms = [
            frozenset(t for n in d.negatives for t in tokenize(n)) if d.negatives else no_terms for d in self.docs
        ]
        self.dense: DenseIndex | None = None
        self.negatives: DenseIndex | None = None
        self.missing_vectors = 0
        if vectors is not None:
            per_doc = [vectors.get(d.pk) for d in self.docs]
            self.missing_vectors = sum(1 for v in per_doc if v is None)
            self.dense = DenseIndex(
                [v.vectors if v else None for v in per_doc],
                [v.kinds if v else () for v in per_doc],
                [v.texts if v else () for v in per_doc],
                half=half,
                spill_dir=spill_dir,
            )
            self.negatives = DenseIndex(
                [v.negatives if v is not None else None for v in per_doc],
                [
                    ("negative",) * len(v.negatives) if v is not None and v.negatives is not None else ()
                    for v in per_doc
                ],
                [() for _ in per_doc],  # negative texts: never quoted
            )

    def __len__(self) -> int:
        return len(self.docs)

    def row_of(self, pk: int) -> int | None:
        """The row of a tool pk (None: not in this snapshot)."""
        if self._row_of_pk is not None:
            row = int(self._row_of_pk[pk]) if 0 <= pk < len(self._row_of_pk) else -1
            return row if row >= 0 else None
        found = np.flatnonzero(self.pks == pk)
        return int(found[0]) if len(found) else None

    def visible_mask(self, visible: Collection[int] | None) -> np.ndarray:
        """Boolean mask over rows for the caller's visible tool pks (None: every tool, for evaluation)."""
        if visible is None:
            return np.ones(len(self.docs), dtype=bool)
        try:
            wanted = np.fromiter(visible, dtype=np.int64, count=len(visible))
        except (TypeError, ValueError):  # not plain ints (numpy scalars of other kinds, numeric strings)
            wanted = np.fromiter((int(pk) for pk in visible), dtype=np.int64, count=len(visible))
        if self._row_of_pk is None:
            return np.isin(self.pks, wanted)
        wanted = wanted[(wanted >= 0) & (wanted < len(self._row_of_pk))]
        rows = self._row_of_pk[wanted]
        mask = np.zeros(len(self.docs), dtype=bool)
        mask[rows[rows >= 0]] = True
        return mask

    def branches(self, query: str, query_vector: np.ndarray | None, visible: np.ndarray) -> Branches:
        return score_branches(self.sparse, self.dense, query, query_vector, visible)

    def rank(
        self,
        branches: Branches,
        *,
        query: str,
        query_vector: np.ndarray | None,
        top_k: int,
        options: RankingOptions,
        calibration: Calibration = Calibration(),  # noqa: B008 - frozen, shared default
        parts: Sequence[tuple[str, np.ndarray | None]] = (),
    ) -> Ranking:
        """Rank; ``parts`` are the request's steps with their vectors (multi-step requests)."""
        clauses = [self.branches(text, vector, branches_visible(branches)) for text, vector in parts]
        return rank(
            branches,
            query=query,
            top_k=top_k,
            options=options,
            tie_keys=self.tie_keys,
            tool_ops=self.tool_ops,
            negatives=self.negatives if query_vector is not None else None,
            negative_terms=self.negative_terms,
            query_vector=query_vector,
            calibration=calibration,
            clauses=clauses if options.decompose else (),
        )

    def explain(self, row: int, best_vector: int, query_terms: Sequence[str], dense: DenseIndex | None = None) -> dict:
        """Why a tool matched: the request's terms it contains (by field) and its closest vector.

        ``dense``: the vector table ``best_vector`` indexes (default: this snapshot's)."""
        dense = dense if dense is not None else self.dense
        doc = self.docs[row]
        wanted = set(query_terms)
        fields: dict[str, list[str]] = {}
        for name, text in doc.field_texts().items():
            hits = [t for t in dict.fromkeys(tokenize(text)) if t in wanted] if text else []
            if hits:
                fields.setdefault(ToolSearchIndex.label(name), [])
                fields[ToolSearchIndex.label(name)] += [h for h in hits if h not in fields[ToolSearchIndex.label(name)]]
        terms = [t for t in query_terms if any(t in hits for hits in fields.values())]
        why: dict = {"terms": terms, "fields": fields}
        if dense is not None and best_vector >= 0:
            kind = dense.kinds[best_vector]
            why["closest"] = kind
            if kind == "example":
                why["example_request"] = dense.text(best_vector)
            elif kind == "learned":
                why["closest"] = "learned"  # never the text: it is another user's words
        return why
