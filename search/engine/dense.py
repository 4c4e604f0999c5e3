"""Multi-vector dense scoring: every tool has several unit vectors; a tool scores by its best one."""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DenseScores:
    """One query's dense branch. The best vector of a tool is looked up on demand (``best``): ranking reads it
    for its few candidates only, and an argmax over every tool's block costs more than the scan itself."""

    scores: np.ndarray  # (n_docs,) best cosine per tool; -1 where a tool has no vector
    sims: np.ndarray  # (n_vectors,) cosine of the query to every vector
    offsets: np.ndarray  # (n_docs + 1,) tool ``r``'s vectors are sims[offsets[r]:offsets[r + 1]]

    def best(self, row: int) -> int:
        """Index into the vector table of the tool's best vector (the first one on a tie), -1 if none."""
        lo, hi = int(self.offsets[row]), int(self.offsets[row + 1])
        return lo + int(np.argmax(self.sims[lo:hi])) if hi > lo else -1


class DenseIndex:
    """Vectors of all tools stacked; ``owner[i]`` is the document row of vector ``i``.

    Vectors are grouped by owner in row order, so a per-tool max is one ``np.maximum.reduceat`` and a
    tool's block is ``offsets[row]:offsets[row + 1]``. A tool's score never depends on another tool, so
    hidden tools cannot leak through this branch; callers normalize over the visible rows only.
    Only the texts of example vectors are kept (explanations quote the example request); the other texts
    are long documents nothing reads after encoding.
    """

    def __init__(self, per_doc: Sequence[np.ndarray], kinds: Sequence[Sequence[str]], texts: Sequence[Sequence[str]]):
        dims = {v.shape[1] for v in per_doc if v is not None and len(v)}
        self.dim = dims.pop() if dims else 0
        counts = np.zeros(len(per_doc), dtype=np.int64)
        blocks, all_kinds = [], []
        self.examples: dict[int, str] = {}  # vector index -> example request text
        total = 0
        for row, vectors in enumerate(per_doc):
            if vectors is None or not len(vectors):
                continue
            blocks.append(vectors)
            counts[row] = len(vectors)
            all_kinds.extend(kinds[row])
            for i, (kind, text) in enumerate(zip(kinds[row], texts[row], strict=False)):
                if kind == "example":
                    self.examples[total + i] = text
            total += len(vectors)
        self.n_docs = len(per_doc)
        # One allocation for the table (no float64 or per-block float32 copies on the way).
        self.matrix = np.empty((total, max(self.dim, 1)), np.float32)
        position = 0
        for block in blocks:
            self.matrix[position : position + len(block)] = block
            position += len(block)
        self.offsets = np.zeros(self.n_docs + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])
        self.owner = np.repeat(np.arange(self.n_docs, dtype=np.int64), counts)
        self.kinds = tuple(all_kinds)
        # Start offset of each owner's block, for reduceat; tools without vectors are filled afterwards.
        self._owners_with_vectors = np.flatnonzero(counts)
        self._starts = self.offsets[self._owners_with_vectors]
        self._all_have_vectors = len(self._owners_with_vectors) == self.n_docs

    def __len__(self) -> int:
        return len(self.owner)

    def text(self, vector: int) -> str | None:
        """The example request of an example vector (None for other kinds)."""
        return self.examples.get(vector)

    def score(self, query_vector: np.ndarray) -> DenseScores:
        if not len(self.owner):
            return DenseScores(np.full(self.n_docs, -1.0, dtype=np.float32), np.zeros(0, np.float32), self.offsets)
        sims = self.matrix @ query_vector.astype(np.float32)
        block_max = np.maximum.reduceat(sims, self._starts)
        if self._all_have_vectors:
            scores = block_max
        else:
            scores = np.full(self.n_docs, -1.0, dtype=np.float32)
            scores[self._owners_with_vectors] = block_max
        return DenseScores(scores, sims, self.offsets)

    def max_similarity(self, query_vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Best cosine of the query against each given row's vectors (-1 where none)."""
        result = np.full(len(rows), -1.0, dtype=np.float32)
        if not len(self.owner):
            return result
        for i, row in enumerate(rows):
            lo, hi = self.offsets[row], self.offsets[row + 1]
            if hi > lo:
                result[i] = float((self.matrix[lo:hi] @ query_vector).max())
        return result
