"""Multi-vector dense scoring: every tool has several unit vectors; a tool scores by its best one.

Large catalogs (``half=True``): the scanned table is float16 (half the memory and, memory-bound, about a
third of the scan time) and the float32 vectors go to an unlinked temporary file; only the rows a query
re-scores are read back (pread: no mapping, so they never count as the process's resident memory). A scan's
scores are then approximate within a proven bound (``DenseScores.error``) and ``DenseScores.refine``
replaces the given tools' scores with the exact float32 ones; ranking refines every tool whose exact score
could change what it returns (engine/ranking.py), so answers are those of the exact scan. A request with
parts scores all its vectors in one read of the float16 table (``DenseIndex.score_all``).
"""

import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# float16 keeps 11 significant bits: each stored component (and the query's) is within 2**-11 relative of
# its float32 value, and the float16 result is rounded once more. Summed with Cauchy-Schwarz over unit
# vectors that is below 3 * 2**-11 * |q| * max|v|; the bound used is a third larger, plus the float32
# accumulation differences of either path.
_HALF_ERROR = 4 * 2.0**-11
_ACCUMULATION_ERROR = 1e-5
# BLAS computes a matrix-vector product a group of rows at a time and the last ``rows % group`` rows by
# another code path (one float32 ulp apart). Tables and re-scored blocks are padded to a multiple of this,
# so every cosine comes out of the grouped path and a re-score gives the full scan's bits exactly.
_ROW_GROUP = 8


def _padded(rows: int) -> int:
    return -(-rows // _ROW_GROUP) * _ROW_GROUP


@dataclass(frozen=True)
class DenseScores:
    """One query's dense branch. The best vector of a tool is looked up on demand (``best``): ranking reads it
    for its few candidates only, and an argmax over every tool's block costs more than the scan itself."""

    scores: np.ndarray  # (n_docs,) best cosine per tool; -1 where a tool has no vector
    sims: np.ndarray  # (n_vectors,) cosine of the query to every vector
    offsets: np.ndarray  # (n_docs + 1,) tool ``r``'s vectors are sims[offsets[r]:offsets[r + 1]]
    # Bound on |score - exact score| of a tool not yet refined (0: every score is exact).
    error: float = 0.0
    index: "DenseIndex | None" = field(default=None, repr=False)
    query: np.ndarray | None = field(default=None, repr=False)
    exact: np.ndarray | None = field(default=None, repr=False)  # (n_docs,) True where refined

    def refine(self, rows: np.ndarray) -> int:
        """Make the given tools' scores (and their vectors' sims) exact. Returns how many were not yet."""
        if self.error == 0.0 or self.index is None or not len(rows):
            return 0
        rows = np.unique(np.asarray(rows, np.int64))
        rows = rows[~self.exact[rows]]
        if not len(rows):
            return 0
        self.exact[rows] = True
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        has = ends > starts
        rows, starts, ends = rows[has], starts[has], ends[has]
        if not len(rows):
            return int(has.size)
        lengths = ends - starts
        vector_ids = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
        self.sims[vector_ids] = self.index.exact_sims(starts, ends, self.query)
        self.scores[rows] = np.maximum.reduceat(self.sims[vector_ids], np.cumsum(lengths) - lengths)
        return int(has.size)

    def best(self, row: int) -> int:
        """Index into the vector table of the tool's best vector (the first one on a tie), -1 if none."""
        lo, hi = int(self.offsets[row]), int(self.offsets[row + 1])
        return lo + int(np.argmax(self.sims[lo:hi])) if hi > lo else -1


class _Spill:
    """float32 vector rows in an unlinked temporary file, only ever appended to, so a table updated from
    another (``DenseIndex.updated``) shares the rows it keeps and writes only the new ones. Read back with
    pread: mapped pages would count as the process's resident memory."""

    def __init__(self, width: int, directory: str | None) -> None:
        self.file = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 - lives as long as its tables
        self.row_bytes = width * 4
        self.rows = 0
        self._lock = threading.Lock()  # two tables may be built from one at once (publish beside a search)

    def append(self, blocks: Sequence[np.ndarray]) -> int:
        """Write the float32 blocks after every row so far, in order; returns the row of the first."""
        with self._lock:
            first = position = self.rows
            pending: list[bytes] = []
            size = 0
            for block in blocks:
                pending.append(block.tobytes())
                size += len(pending[-1])
                if size >= _SPILL_CHUNK:
                    position = self._write(pending, position)
                    pending, size = [], 0
            self._write(pending, position)
            return first

    def _write(self, pending: list[bytes], position: int) -> int:
        if pending:
            data = b"".join(pending)
            os.pwrite(self.file.fileno(), data, position * self.row_bytes)
            position += len(data) // self.row_bytes
            self.rows = position
        return position

    def read(self, first: int, out: np.ndarray) -> None:
        """Rows ``first:first + len(out)`` into the float32 array ``out`` (a contiguous view)."""
        raw = out.reshape(-1).view(np.uint8)
        got = os.preadv(self.file.fileno(), [raw], first * self.row_bytes)
        if got != len(raw):
            raise OSError(f"short read from the vector spill file ({got} of {len(raw)} bytes)")


_SPILL_CHUNK = 8 << 20


def copy_rows(target: np.ndarray, target_rows: np.ndarray, source: np.ndarray, source_rows: np.ndarray) -> None:
    """``target[target_rows] = source[source_rows]`` a run of consecutive rows at a time: a slice copy is
    several times faster than fancy indexing, and rows kept across an update come in long runs."""
    if not len(source_rows):
        return
    breaks = np.flatnonzero((np.diff(source_rows) != 1) | (np.diff(target_rows) != 1)) + 1
    starts = np.concatenate(([0], breaks)).tolist()
    ends = np.concatenate((breaks, [len(source_rows)])).tolist()
    for lo, hi in zip(starts, ends, strict=True):
        to, fro = int(target_rows[lo]), int(source_rows[lo])
        target[to : to + hi - lo] = source[fro : fro + hi - lo]


def _concatenated_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``starts[i]:starts[i] + lengths[i]`` for every i, one after the other, as one index array."""
    lengths = np.asarray(lengths, np.int64)
    return np.repeat(np.asarray(starts, np.int64) - np.cumsum(lengths) + lengths, lengths) + np.arange(
        int(lengths.sum()), dtype=np.int64
    )


class DenseIndex:
    """Vectors of all tools stacked; ``owner[i]`` is the document row of vector ``i``.

    Vectors are grouped by owner in row order, so a per-tool max is a max over each block and a
    tool's block is ``offsets[row]:offsets[row + 1]``. A tool's score never depends on another tool, so
    hidden tools cannot leak through this branch; callers normalize over the visible rows only.
    Only the texts of example vectors are kept (explanations quote the example request); the other texts
    are long documents nothing reads after encoding.
    """

    def __init__(
        self,
        per_doc: Sequence[np.ndarray],
        kinds: Sequence[Sequence[str]],
        texts: Sequence[Sequence[str]],
        *,
        half: bool = False,
        spill_dir: str | None = None,
    ):
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
        width = max(self.dim, 1)
        self.half = bool(half and total)
        self._spill: _Spill | None = None
        self._file_row: np.ndarray | None = None  # half: the spill file row of each vector
        self._norms: np.ndarray | None = None  # half: each tool's largest vector norm (0: none)
        if self.half:
            # float32 rows written to an unlinked file (never held in memory), float16 rows scanned.
            self.matrix = np.empty((total, width), np.float16)
            self._spill = _Spill(width, spill_dir)
            self._norms = np.zeros(len(per_doc), np.float64)
            exact_blocks = [np.ascontiguousarray(block, dtype=np.float32) for block in blocks]
            self._spill.append(exact_blocks)
            self._file_row = np.arange(total, dtype=np.int64)
            position = 0
            for row, exact in zip(np.flatnonzero(counts).tolist(), exact_blocks, strict=True):
                self.matrix[position : position + len(exact)] = exact
                self._norms[row] = float(np.sqrt((exact * exact).sum(axis=1)).max())
                position += len(exact)
            self.exact_matrix = None  # read back from the spill file (pread)
        else:
            # One allocation for the table (no float64 or per-block float32 copies on the way).
            self.matrix = np.zeros((_padded(total), width), np.float32)
            position = 0
            for block in blocks:
                self.matrix[position : position + len(block)] = block
                position += len(block)
            self.exact_matrix = self.matrix
        self.kinds = tuple(all_kinds)
        self._set_rows(counts)

    def _set_rows(self, counts: np.ndarray) -> None:
        self.n_docs = len(counts)
        self.max_norm = float(self._norms.max()) if self._norms is not None and len(self._norms) else 1.0
        self.offsets = np.zeros(self.n_docs + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])
        self.owner = np.repeat(np.arange(self.n_docs, dtype=np.int64), counts)
        # Start offset of each owner's block; tools without vectors are filled afterwards.
        self._owners_with_vectors = np.flatnonzero(counts)
        self._starts = self.offsets[self._owners_with_vectors]
        self._all_have_vectors = len(self._owners_with_vectors) == self.n_docs
        self._without_vectors = counts_zero(self.offsets)
        self._owner_max = _OwnerMax.of(counts[self._owners_with_vectors], self._starts)

    def _block_max(self, sims: np.ndarray) -> np.ndarray:
        """Each owner's best sim (owners with vectors, in row order): ``np.maximum.reduceat(sims, starts)``,
        bit for bit (a max is exact), in a few whole-array passes instead of reduceat's per-block loop (7x
        slower at 100k tools, most with two vectors)."""
        where = self._owner_max
        best = sims[self._starts]
        for owners, vectors in where.columns:
            if owners is None:
                np.maximum(best, sims[vectors], out=best)
            else:
                best[owners] = np.maximum(best[owners], sims[vectors])
        if len(where.tail_owners):
            tail = np.maximum.reduceat(sims[where.tail_vectors], where.tail_starts)
            best[where.tail_owners] = np.maximum(best[where.tail_owners], tail)
        return best

    def updated(
        self,
        kept: np.ndarray,
        kept_to: np.ndarray,
        n_docs: int,
        added: "dict[int, tuple[np.ndarray | None, Sequence[str], Sequence[str]]]",
    ) -> "DenseIndex":
        """This table for another set of rows: old row ``kept[i]`` becomes row ``kept_to[i]``, ``added`` gives
        new rows their (vectors, kinds, texts); rows in neither have no vectors. The same table, bit for bit,
        as building it from every row's vectors (same order, precision and ``max_norm``), but the kept rows
        are copied as they are and a float16 table shares its float32 file, to which only new rows are added.
        """
        kept, kept_to = np.asarray(kept, np.int64), np.asarray(kept_to, np.int64)
        old_counts = np.diff(self.offsets)[kept]
        added = {row: item for row, item in added.items() if item[0] is not None and len(item[0])}
        counts = np.zeros(n_docs, dtype=np.int64)
        counts[kept_to] = old_counts
        for row, (vectors, _, _) in added.items():
            counts[row] = len(vectors)
        offsets = np.concatenate(([0], np.cumsum(counts)))
        total = int(offsets[-1])
        dims = {int(vectors.shape[1]) for vectors, _, _ in added.values()}
        if old_counts.sum():
            dims.add(self.dim)
        if len(dims) > 1:
            raise ValueError(f"vectors of different widths: {sorted(dims)}")
        src = _concatenated_ranges(self.offsets[kept], old_counts)
        dst = _concatenated_ranges(offsets[kept_to], old_counts)
        table = DenseIndex.__new__(DenseIndex)
        table.dim = dims.pop() if dims else 0
        width = max(table.dim, 1)
        table.half = self.half and total > 0
        table.exact_matrix = None
        table._spill, table._file_row, table._norms = None, None, None
        kinds = np.empty(total, dtype=object)
        kinds[dst] = np.asarray(self.kinds, dtype=object)[src] if len(src) else []
        new_vector = np.full(len(self.owner), -1, np.int64)
        new_vector[src] = dst
        table.examples = {int(new_vector[v]): t for v, t in self.examples.items() if new_vector[v] >= 0}
        rows = sorted(added)
        for row in rows:
            _, row_kinds, row_texts = added[row]
            start = int(offsets[row])
            kinds[start : start + counts[row]] = list(row_kinds)
            for i, (kind, text) in enumerate(zip(row_kinds, row_texts, strict=False)):
                if kind == "example":
                    table.examples[start + i] = text
        if table.half:
            exact = [np.ascontiguousarray(added[row][0], dtype=np.float32) for row in rows]
            table.matrix = np.empty((total, width), np.float16)
            copy_rows(table.matrix, dst, self.matrix, src)
            table._norms = np.zeros(n_docs, np.float64)
            table._norms[kept_to] = self._norms[kept]
            table._spill = self._spill if self._spill is not None else _Spill(width, None)
            first = table._spill.append(exact)
            table._file_row = np.empty(total, np.int64)
            table._file_row[dst] = self._file_row[src]
            for row, block in zip(rows, exact, strict=True):
                start = int(offsets[row])
                table.matrix[start : start + len(block)] = block
                table._norms[row] = float(np.sqrt((block * block).sum(axis=1)).max())
                table._file_row[start : start + len(block)] = np.arange(first, first + len(block))
                first += len(block)
        else:
            table.matrix = np.zeros((_padded(total), width), np.float32)
            copy_rows(table.matrix, dst, self.matrix, src)
            for row in rows:
                start = int(offsets[row])
                table.matrix[start : start + counts[row]] = added[row][0]
            table.exact_matrix = table.matrix
        table.kinds = tuple(kinds.tolist())
        table._set_rows(counts)
        return table

    def spill_waste(self) -> int:
        """Rows of the shared float32 file no longer in this table (removed or replaced tools)."""
        return self._spill.rows - len(self.owner) if self._spill is not None else 0

    def __len__(self) -> int:
        return len(self.owner)

    def text(self, vector: int) -> str | None:
        """The example request of an example vector (None for other kinds)."""
        return self.examples.get(vector)

    def exact_rows(self, starts: np.ndarray, ends: np.ndarray, padded: int = 0) -> np.ndarray:
        """The float32 vectors ``starts[i]:ends[i]`` stacked (and zero rows up to ``padded``)."""
        count = int((ends - starts).sum())
        width = self.matrix.shape[1]
        block = np.zeros((max(count, padded), width), np.float32)
        if self.exact_matrix is not None:
            position = 0
            for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
                block[position : position + hi - lo] = self.exact_matrix[lo:hi]
                position += hi - lo
            return block
        # A tool's vectors are contiguous in the spill file (each range here is one tool's block).
        position = 0
        for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
            self._spill.read(int(self._file_row[lo]), block[position : position + hi - lo])
            position += hi - lo
        return block

    def exact_sims(self, starts: np.ndarray, ends: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
        """float32 cosines of the vectors ``starts[i]:ends[i]``, bit for bit those of the exact full scan."""
        query = np.asarray(query_vector, dtype=np.float32)
        count = int((ends - starts).sum())
        return (self.exact_rows(starts, ends, padded=_padded(count)) @ query)[:count]

    def _half_scan(self, query: np.ndarray) -> np.ndarray:
        try:
            import torch  # loaded with the model anyway; its float16 kernel accumulates in float32
        except ImportError:  # pragma: no cover - without torch: convert in blocks (slower, same bound)
            return self._shared_scan(query[None, :])[0]
        with torch.inference_mode():
            result = torch.from_numpy(self.matrix) @ torch.from_numpy(query.astype(np.float16))
        return result.float().numpy()

    def _shared_scan(self, queries: np.ndarray) -> np.ndarray:
        """float32 cosines of every vector to each of the (k, dim) ``queries``, as a (k, n_vectors) array,
        reading the float16 table once: ``_SCAN_ROWS`` rows at a time are converted to float32 (exactly)
        into one reused block, which BLAS multiplies by the queries, ``_SCAN_COLUMNS`` at a time, while it
        is in cache. Within the float16 scan's bound: only the table's rounding is left (the queries stay
        float32 and the result is not rounded to float16)."""
        rows, width = self.matrix.shape
        groups = -(-len(queries) // _SCAN_COLUMNS)
        columns = np.zeros((groups, width, _SCAN_COLUMNS), np.float32)  # zero columns pad the last group
        for j, query in enumerate(queries):
            columns[j // _SCAN_COLUMNS, :, j % _SCAN_COLUMNS] = query
        block = np.empty((min(_SCAN_ROWS, rows), width), np.float32)
        sims = np.empty((groups, rows, _SCAN_COLUMNS), np.float32)
        convert = _converter(self.matrix, block)
        for start in range(0, rows, _SCAN_ROWS):
            end = min(start + _SCAN_ROWS, rows)
            convert(start, end)
            for group in range(groups):
                np.matmul(block[: end - start], columns[group], out=sims[group, start:end])
        return np.stack([sims[j // _SCAN_COLUMNS, :, j % _SCAN_COLUMNS] for j in range(len(queries))])

    def score(self, query_vector: np.ndarray) -> DenseScores:
        if not len(self.owner):
            return DenseScores(np.full(self.n_docs, -1.0, dtype=np.float32), np.zeros(0, np.float32), self.offsets)
        query = np.asarray(query_vector, dtype=np.float32)
        if self.half:
            sims = self._half_scan(query)
        else:
            sims = (self.matrix @ query)[: len(self.owner)]  # the padding rows' zeros dropped
        return self._scores(query, sims)

    def score_all(self, query_vectors: Sequence[np.ndarray]) -> list[DenseScores]:
        """``[self.score(v) for v in query_vectors]`` (a request and its parts). A float16 table is read
        once for all of them when there are ``_SHARED_SCAN_MIN`` or more; scores are approximate within
        the same bound either way, and ranking refines the same tools to exact float32 values."""
        if not self.half or len(query_vectors) < _SHARED_SCAN_MIN or not len(self.owner):
            return [self.score(vector) for vector in query_vectors]
        queries = np.stack([np.asarray(vector, dtype=np.float32) for vector in query_vectors])
        return [self._scores(query, sims) for query, sims in zip(queries, self._shared_scan(queries), strict=True)]

    def _scores(self, query: np.ndarray, sims: np.ndarray) -> DenseScores:
        block_max = self._block_max(sims)
        if self._all_have_vectors:
            scores = block_max
        else:
            scores = np.full(self.n_docs, -1.0, dtype=np.float32)
            scores[self._owners_with_vectors] = block_max
        if not self.half:
            return DenseScores(scores, sims, self.offsets)
        error = _HALF_ERROR * self.max_norm * float(np.linalg.norm(query)) + _ACCUMULATION_ERROR
        exact = np.zeros(self.n_docs, dtype=bool)
        exact[self._without_vectors] = True  # no vector: -1, exact
        return DenseScores(scores, sims, self.offsets, error, self, query, exact)

    def max_similarity(self, query_vector: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Best cosine of the query against each given row's vectors (-1 where none)."""
        result = np.full(len(rows), -1.0, dtype=np.float32)
        if not len(self.owner):
            return result
        for i, row in enumerate(rows):
            lo, hi = self.offsets[row], self.offsets[row + 1]
            if hi > lo:
                result[i] = float((self.exact_rows(np.asarray([lo]), np.asarray([hi])) @ query_vector).max())
        return result


# A float16 scan of several vectors (a request and its parts) converts this many rows at a time to float32
# (768 KB: in a core's L2 for the products) and multiplies them by this many vectors at once: OpenBLAS's
# sgemm is steady and fast with 4 columns and erratic with 2, 3 or 6-8 (measured on 216k x 384 rows).
_SCAN_ROWS = 512
_SCAN_COLUMNS = 4
# From this many vectors one conversion of the table for all of them beats torch's float16 matrix-vector
# product per vector (that one converts in registers: one or two vectors are faster that way).
_SHARED_SCAN_MIN = 3


def _converter(matrix: np.ndarray, block: np.ndarray):
    """``convert(start, end)``: float16 rows ``start:end`` of ``matrix`` into the first rows of the float32
    ``block``, exactly. torch's conversion is vectorized: about 15x numpy's."""
    try:
        import torch
    except ImportError:  # pragma: no cover - numpy's conversion: slower, the same values
        return lambda start, end: np.copyto(block[: end - start], matrix[start:end], casting="unsafe")
    source, target = torch.from_numpy(matrix), torch.from_numpy(block)

    def convert(start: int, end: int) -> None:
        target[: end - start].copy_(source[start:end])

    return convert


# Vectors per tool taken one whole-array pass at a time; a tool's vectors past this many (long lists of
# examples or learned requests: few tools) are reduced block by block.
_COLUMN_PASSES = 8


@dataclass(frozen=True)
class _OwnerMax:
    """Where each owner's vectors are, for a per-owner max (``DenseIndex._block_max``).

    ``columns[j - 1]``: the owners (positions among the owners with vectors; None: all of them) with more than
    j vectors, and the index of their (j+1)-th vector, for j below ``_COLUMN_PASSES``. ``tail_owners`` have
    more vectors than that; the rest of theirs are ``tail_vectors``, one block per owner from ``tail_starts``."""

    columns: list[tuple[np.ndarray | None, np.ndarray]]
    tail_owners: np.ndarray
    tail_vectors: np.ndarray
    tail_starts: np.ndarray

    @classmethod
    def of(cls, counts: np.ndarray, starts: np.ndarray) -> "_OwnerMax":
        columns = []
        for j in range(1, min(int(counts.max()) if len(counts) else 0, _COLUMN_PASSES)):
            owners = np.flatnonzero(counts > j)
            columns.append((None if len(owners) == len(counts) else owners, starts[owners] + j))
        tail = np.flatnonzero(counts > _COLUMN_PASSES)
        lengths = counts[tail] - _COLUMN_PASSES
        vectors = _concatenated_ranges(starts[tail] + _COLUMN_PASSES, lengths)
        return cls(columns, tail, vectors, np.cumsum(lengths) - lengths)


def counts_zero(offsets: np.ndarray) -> np.ndarray:
    """Rows without vectors."""
    return np.flatnonzero(offsets[1:] == offsets[:-1])
