"""Multi-vector dense scoring: every tool has several unit vectors; a tool scores by its best one."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DenseScores:
    scores: np.ndarray  # (n_docs,) best cosine per tool; -1 where a tool has no vector
    best: np.ndarray  # (n_docs,) index into the vector table of the best vector, -1 if none


class DenseIndex:
    """Vectors of all tools stacked; ``owner[i]`` is the document row of vector ``i``.

    Vectors are grouped by owner in row order, so a per-tool max is one ``np.maximum.reduceat``.
    A tool's score never depends on another tool, so hidden tools cannot leak through this branch;
    callers normalize over the visible rows only.
    """

    def __init__(self, per_doc: Sequence[np.ndarray], kinds: Sequence[Sequence[str]], texts: Sequence[Sequence[str]]):
        dims = {v.shape[1] for v in per_doc if v is not None and len(v)}
        self.dim = dims.pop() if dims else 0
        owners, blocks, all_kinds, all_texts = [], [], [], []
        for row, vectors in enumerate(per_doc):
            if vectors is None or not len(vectors):
                continue
            blocks.append(np.asarray(vectors, dtype=np.float32))
            owners.extend([row] * len(vectors))
            all_kinds.extend(kinds[row])
            all_texts.extend(texts[row])
        self.n_docs = len(per_doc)
        self.matrix = np.vstack(blocks) if blocks else np.zeros((0, max(self.dim, 1)), np.float32)
        self.owner = np.asarray(owners, dtype=np.int64)
        self.kinds = tuple(all_kinds)
        self.texts = tuple(all_texts)
        # Start offset of each owner's block, for reduceat; tools without vectors are filled afterwards.
        self._owners_with_vectors, self._starts = np.unique(self.owner, return_index=True)

    def __len__(self) -> int:
        return len(self.owner)

    def score(self, query_vector: np.ndarray) -> DenseScores:
        scores = np.full(self.n_docs, -1.0, dtype=np.float32)
        best = np.full(self.n_docs, -1, dtype=np.int64)
        if not len(self.owner):
            return DenseScores(scores, best)
        sims = self.matrix @ query_vector.astype(np.float32)
        block_max = np.maximum.reduceat(sims, self._starts)
        scores[self._owners_with_vectors] = block_max
        # Index of the best vector per tool: the first position in its block equal to the block max.
        is_best = sims == block_max[np.searchsorted(self._owners_with_vectors, self.owner)]
        positions = np.flatnonzero(is_best)
        rows = self.owner[positions]
        first = np.unique(rows, return_index=True)[1]
        best[rows[first]] = positions[first]
        return DenseScores(scores, best)

    def max_similarity(self, query_vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Best cosine of the query against each given row's vectors (-1 where none)."""
        result = np.full(len(rows), -1.0, dtype=np.float32)
        if not len(self.owner):
            return result
        for i, row in enumerate(rows):
            lo, hi = np.searchsorted(self.owner, [row, row + 1])
            if hi > lo:
                result[i] = float((self.matrix[lo:hi] @ query_vector).max())
        return result
