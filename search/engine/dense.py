"""Multi-vector dense scoring: every tool has several unit vectors; a tool scores by its best one.

Large catalogs (``quantized=True``): the scanned table is int8 (a quarter of float32's bytes), multiplied
by ONNX Runtime's MatMulInteger with the table prepacked at build (``_Int8Table``; the packed copy on 2 MB
pages where the kernel allows, ``_back_with_huge_pages``), and the float32 vectors
go to an unlinked temporary file; only the rows a query re-scores are read back (pread past 64 MB of them, so
they never count as the process's resident memory; see ``_Spill``). A scan's scores are then approximate within a
proven bound
(``DenseScores.error``) and ``DenseScores.refine`` replaces the given tools' scores with the exact float32
ones; ranking refines every tool whose exact score could change what it returns (engine/ranking.py), so
answers are those of the exact scan. A request with parts scores all its vectors in one product
(``DenseIndex.score_all``).
"""

import ctypes
import mmap
import os
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

# Differences of float32 accumulation orders between paths (an exact scan and a re-score), and the few float32
# roundings of an int8 scan's scaling (relative 2**-24 each, of values below 1): far below this.
_ACCUMULATION_ERROR = 1e-5
# BLAS computes a matrix-vector product a group of rows at a time and the last ``rows % group`` rows by
# another code path (one float32 ulp apart). Tables and re-scored blocks are padded to a multiple of this,
# so every cosine comes out of the grouped path and a re-score gives the full scan's bits exactly.
_ROW_GROUP = 8
# Rows of the float32 table scanned at a time for several queries (``DenseIndex._scan``): 1.5 MB, which stays in
# cache while every query reads it; a multiple of _ROW_GROUP.
_SCAN_ROWS = 1024


def _padded(rows: int) -> int:
    return -(-rows // _ROW_GROUP) * _ROW_GROUP


@dataclass(frozen=True)
class DenseScores:
    """One query's dense branch. The best vector of a tool is looked up on demand (``best_of``): ranking reads it
    for its few candidates only, and an argmax over every tool's block costs more than the scan itself."""

    scores: np.ndarray  # (n_docs,) best cosine per tool; -1 where a tool has no vector
    sims: np.ndarray  # (n_vectors,) cosine of the query to every vector
    offsets: np.ndarray  # (n_docs + 1,) tool ``r``'s vectors are sims[offsets[r]:offsets[r + 1]]
    # Bound on |score - exact score| of a tool not yet refined (0: every score is exact).
    error: float = 0.0
    index: "DenseIndex | None" = field(default=None, repr=False)
    query: np.ndarray | None = field(default=None, repr=False)
    exact: np.ndarray | None = field(default=None, repr=False)  # (n_docs,) True where refined
    # int8 scan: (|q|, |q - q'|) of the query as scanned, for each tool's own bound (``errors_at``).
    norms: tuple[float, float] | None = field(default=None, repr=False)

    def copy(self) -> "DenseScores":
        """Scores to refine apart from these (refining changes ``scores``, ``sims`` and ``exact`` in place)."""
        if self.error == 0.0:
            return self  # exact already: nothing is ever refined
        exact = self.exact.copy() if self.exact is not None else None
        return replace(self, scores=self.scores.copy(), sims=self.sims.copy(), exact=exact)

    def refine(self, rows: np.ndarray) -> int:
        """Make the given tools' scores (and their vectors' sims) exact. Returns how many were not yet."""
        return refine_together([self], [rows])

    def errors_at(self, rows: np.ndarray) -> np.ndarray:
        """Bound on |score - exact score| of each given tool (float64, at most ``error``): ``error``'s formula
        with the largest residual and norm among that tool's own vectors instead of the whole table's, so a
        ranking re-scores only the tools whose own error could matter (about half the rows of one bound)."""
        if self.norms is None or self.index is None:
            return np.full(len(rows), self.error)
        residual, norm = self.index.tool_bounds
        query, left = self.norms
        return query * residual[rows] + left * norm[rows] + _ACCUMULATION_ERROR

    def best_of(self, rows: np.ndarray) -> np.ndarray:
        """Per given tool, the index into the vector table of its best vector (the first one on a tie), -1
        if it has none; a few array operations for all of them (a ranking's candidates)."""
        rows = np.asarray(rows, np.int64)
        result = np.full(len(rows), -1, np.int64)
        starts, lengths = self.offsets[rows], self.offsets[rows + 1] - self.offsets[rows]
        has = lengths > 0
        if not has.any():
            return result
        starts, lengths = starts[has], lengths[has]
        vectors = _concatenated_ranges(starts, lengths)
        sims = self.sims[vectors]
        at_best = sims == np.repeat(np.maximum.reduceat(sims, np.cumsum(lengths) - lengths), lengths)
        hits = np.flatnonzero(at_best)
        owner = np.repeat(np.arange(len(lengths)), lengths)[hits]
        first = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))  # the first hit per tool
        result[has] = vectors[hits[first]]
        return result


def refine_together(scores: Sequence["DenseScores | None"], rows: Sequence[np.ndarray]) -> int:
    """``scores[i].refine(rows[i])`` for each (None and exact scores are skipped), reading the float32 vectors
    of the tools any of them lacks once: a request and its parts scanned together (``DenseIndex.score_all``)
    share one table, and mostly the same tools. Each is refined at every tool read (an exact score is the
    same whichever pass asks for it). Returns how many tools were not yet exact in the one that lacked most."""
    lacking = []
    for item, wanted in zip(scores, rows, strict=True):
        if item is None or item.error == 0.0 or item.index is None or not len(wanted):
            continue
        wanted = np.unique(np.asarray(wanted, np.int64))
        lacking.append((item, wanted[~item.exact[wanted]]))
    lacking = [(item, lack) for item, lack in lacking if len(lack)]
    if not lacking:
        return 0
    groups: dict[int, list[tuple[DenseScores, np.ndarray]]] = {}  # by table: in practice one
    for item, lack in lacking:
        groups.setdefault(id(item.index), []).append((item, lack))
    for pairs in groups.values():
        group = [item for item, _ in pairs]
        union = np.unique(np.concatenate([lack for _, lack in pairs]))
        starts, ends = group[0].offsets[union], group[0].offsets[union + 1]
        has = ends > starts
        tools, starts, ends = union[has], starts[has], ends[has]
        lengths = ends - starts
        count = int(lengths.sum())
        vector_ids = _concatenated_ranges(starts, lengths)
        block = group[0].index.exact_rows(starts, ends, padded=_padded(count)) if count else None
        for item in group:
            item.exact[union] = True
            if count:
                item.sims[vector_ids] = (block @ item.query)[:count]  # each row as the full scan computes it
                item.scores[tools] = np.maximum.reduceat(item.sims[vector_ids], np.cumsum(lengths) - lengths)
    return max(len(lack) for _, lack in lacking)


class _Spill:
    """float32 vector rows in an unlinked temporary file, only ever appended to, so a table updated from
    another (``DenseIndex.updated``) shares the rows it keeps and writes only the new ones.

    Read back from a read-only mapping of the file while it is within ``_MAPPED_BUDGET`` (a copy from memory,
    where a pread per run of rows, a system call per re-scored tool and ~200 a request, cost 0.6 ms a request),
    else with pread: a larger file's mapped pages would count as the process's resident memory."""

    def __init__(self, width: int, directory: str | None) -> None:
        self.file = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 - lives as long as its tables
        self.row_bytes = width * 4
        self.rows = 0
        self._lock = threading.Lock()  # two tables may be built from one at once (publish beside a search)
        self._mapped: np.ndarray | None = None  # (rows, width) float32 over a mapping of the file (``read``)

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

    def read(self, firsts: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> None:
        """Runs of rows ``firsts[i]:firsts[i] + lengths[i]``, one after the other, into the contiguous float32
        array ``out`` (its first rows): copied from the file's mapping while the file is within
        ``_MAPPED_BUDGET``, else one system call a run, each into its place in ``out`` (no copies)."""
        firsts, lengths = np.asarray(firsts, np.int64), np.asarray(lengths, np.int64)
        if not len(firsts):
            return
        if self.rows * self.row_bytes <= _MAPPED_BUDGET:
            rows = _concatenated_ranges(firsts, lengths)
            mapped = self._rows_mapped(int((firsts + lengths).max()))
            np.take(mapped, rows, axis=0, out=out[: len(rows)], mode="clip")  # "clip": not buffered; rows are valid
            return
        self._mapped = None  # grown past the budget: the mapping goes with its last reader
        # Runs that follow each other in the file as in ``out`` are read as one.
        joined = firsts[1:] == firsts[:-1] + lengths[:-1]
        last = np.flatnonzero(np.append(~joined, True))  # each merged run's last piece
        first = np.concatenate(([0], last[:-1] + 1))
        out_ends = np.cumsum(lengths)
        places = (out_ends[first] - lengths[first]) * self.row_bytes
        sizes = out_ends[last] * self.row_bytes - places
        offsets = firsts[first] * self.row_bytes
        target = memoryview(out.reshape(-1).view(np.uint8))
        fd = self.file.fileno()
        for place, offset, want in zip(places.tolist(), offsets.tolist(), sizes.tolist(), strict=True):
            got = os.preadv(fd, [target[place : place + want]], offset)
            if got != want:
                raise OSError(f"short read from the vector spill file ({got} of {want} bytes)")

    def _rows_mapped(self, end: int) -> np.ndarray:
        """The file's rows as an array over a read-only mapping of at least ``end`` rows (mapped again after
        appends; a reader of the former mapping keeps it until it lets go of it)."""
        mapped = self._mapped
        if mapped is None or len(mapped) < end:
            with self._lock:
                if self._mapped is None or len(self._mapped) < end:
                    view = mmap.mmap(self.file.fileno(), self.rows * self.row_bytes, prot=mmap.PROT_READ)
                    self._mapped = np.frombuffer(view, np.float32).reshape(self.rows, -1)
                mapped = self._mapped
        return mapped


_SPILL_CHUNK = 8 << 20
# A spill file up to this size is read back from a mapping of it (``_Spill``): 64 MB, ~40,000 float32 vectors of 384
# dimensions (a catalog of 10,000 tools has ~21,000). Past it, pread: mapped pages count as resident memory, and on
# Linux 6.x a fault maps a whole large folio of the page cache (up to 2 MB measured), so a larger file's mapping
# ends up resident whole (100,000 tools: 310 MB) whatever the reads, and dropping its pages costs more than pread.
_MAPPED_BUDGET = 64 << 20


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
        quantized: bool = False,
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
        self.quantized = bool(quantized and total)
        self._spill: _Spill | None = None
        self._file_row: np.ndarray | None = None  # quantized: the spill file row of each vector
        self._int8: _Int8Table | None = None
        self.spill_dir = spill_dir
        if self.quantized:
            # float32 rows written to an unlinked file (never held in memory), int8 rows scanned.
            self._spill = _Spill(width, spill_dir)
            exact_blocks = [np.ascontiguousarray(block, dtype=np.float32) for block in blocks]
            self._spill.append(exact_blocks)
            self._file_row = np.arange(total, dtype=np.int64)
            self._int8 = _Int8Table.of(exact_blocks, total, width, spill_dir)
            self.matrix = None  # the scan reads ONNX Runtime's packed copy of the int8 rows (``_Int8Table``)
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
        self.offsets = np.zeros(self.n_docs + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])
        self.owner = np.repeat(np.arange(self.n_docs, dtype=np.int64), counts)
        # Start offset of each owner's block; tools without vectors are filled afterwards.
        self._owners_with_vectors = np.flatnonzero(counts)
        self._starts = self.offsets[self._owners_with_vectors]
        self._all_have_vectors = len(self._owners_with_vectors) == self.n_docs
        self._without_vectors = counts_zero(self.offsets)
        self._owner_max = _OwnerMax.of(counts[self._owners_with_vectors], self._starts)
        self.tool_bounds = self._tool_bounds()

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
        as building it from every row's vectors (same order, precision and error bound), but the kept rows
        are copied as they are and an int8 table shares its float32 file, to which only new rows are added.
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
        table.quantized = self.quantized and total > 0
        table.exact_matrix = None
        table._spill, table._file_row, table._int8 = None, None, None
        table.spill_dir = self.spill_dir
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
        if table.quantized:
            exact = [np.ascontiguousarray(added[row][0], dtype=np.float32) for row in rows]
            table._spill = self._spill if self._spill is not None else _Spill(width, self.spill_dir)
            first = table._spill.append(exact)
            table._file_row = np.empty(total, np.int64)
            table._file_row[dst] = self._file_row[src]
            for row, block in zip(rows, exact, strict=True):
                start = int(offsets[row])
                table._file_row[start : start + len(block)] = np.arange(first, first + len(block))
                first += len(block)
            starts = [int(offsets[row]) for row in rows]
            table._int8 = _Int8Table.updated(self._int8, src, dst, total, width, exact, starts, self.spill_dir)
            table.matrix = None
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
        width = max(self.dim, 1)
        # Every row up to ``count`` is written below: only the padding is zeroed (zeroing the whole block first
        # cost a quarter more than the copy itself: 520 rows 42 -> 32 us).
        block = np.empty((max(count, padded), width), np.float32)
        block[count:] = 0
        if self.exact_matrix is not None:
            position = 0
            for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
                block[position : position + hi - lo] = self.exact_matrix[lo:hi]
                position += hi - lo
            return block
        # A tool's vectors are contiguous in the spill file (each range here is one tool's block).
        self._spill.read(self._file_row[starts], ends - starts, block)
        return block

    def exact_sims(self, starts: np.ndarray, ends: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
        """float32 cosines of the vectors ``starts[i]:ends[i]``, bit for bit those of the exact full scan."""
        query = np.asarray(query_vector, dtype=np.float32)
        count = int((ends - starts).sum())
        return (self.exact_rows(starts, ends, padded=_padded(count)) @ query)[:count]

    def score(self, query_vector: np.ndarray) -> DenseScores:
        return self.score_all([query_vector])[0]

    def score_all(self, query_vectors: Sequence[np.ndarray]) -> list[DenseScores]:
        """``[self.score(v) for v in query_vectors]`` (a request and its parts). An int8 table is read once
        for all of them (one product); its scores are approximate within ``DenseScores.error``, and ranking
        refines the tools it depends on to exact float32 values."""
        queries = [np.asarray(vector, dtype=np.float32) for vector in query_vectors]
        if not len(self.owner):
            empty = np.full(self.n_docs, -1.0, dtype=np.float32)
            return [DenseScores(empty.copy(), np.zeros(0, np.float32), self.offsets) for _ in queries]
        if not self.quantized:
            return [self._scores(query, sims) for query, sims in zip(queries, self._scan(queries), strict=True)]
        sims, norms = self._int8.scan(np.stack(queries))
        return [self._scores(q, s, n) for q, s, n in zip(queries, sims, norms, strict=True)]

    def _scan(self, queries: Sequence[np.ndarray]) -> list[np.ndarray]:
        """float32 cosines of every vector to each query, bit for bit ``self.matrix @ query``. Several queries
        (a request and its parts) are scanned a block of ``_SCAN_ROWS`` rows at a time, each block read from
        memory once for all of them: one product per query over the whole table read it once each, and a
        search is bound by reading the table (4 queries at 10k tools: 35 -> 15 ms). Not one matrix product:
        BLAS adds a matrix-matrix product's terms in another order (other bits)."""
        total = len(self.owner)
        if len(queries) == 1:
            return [(self.matrix @ queries[0])[:total]]
        sims = np.empty((len(queries), len(self.matrix)), np.float32)
        for start in range(0, len(self.matrix), _SCAN_ROWS):
            block = self.matrix[start : start + _SCAN_ROWS]  # a multiple of _ROW_GROUP rows: the grouped path
            for query, out in zip(queries, sims, strict=True):
                np.matmul(block, query, out=out[start : start + len(block)])
        return [row[:total] for row in sims]

    def _scores(self, query: np.ndarray, sims: np.ndarray, norms: tuple[float, float] | None = None) -> DenseScores:
        block_max = self._block_max(sims)
        if self._all_have_vectors:
            scores = block_max
        else:
            scores = np.full(self.n_docs, -1.0, dtype=np.float32)
            scores[self._owners_with_vectors] = block_max
        if not self.quantized:
            return DenseScores(scores, sims, self.offsets)
        exact = np.zeros(self.n_docs, dtype=bool)
        exact[self._without_vectors] = True  # no vector: -1, exact
        return DenseScores(scores, sims, self.offsets, self._int8.error(norms), self, query, exact, norms)

    def _tool_bounds(self) -> tuple[np.ndarray, np.ndarray] | None:
        """int8 table: per tool (row), the largest residual |v - v'| and norm |v'| among its vectors (0 for a
        tool without vectors), for its own error bound (``DenseScores.errors_at``); None for a float32 table.
        Computed with the table (build or update), so no search pays for it."""
        if not self.quantized:
            return None
        residual, norm = np.zeros(self.n_docs), np.zeros(self.n_docs)
        if len(self._owners_with_vectors):
            residual[self._owners_with_vectors] = self._block_max(self._int8.residual_norms)
            norm[self._owners_with_vectors] = self._block_max(self._int8.quantized_norms)
        return residual, norm

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


# A query is cut into two 7-bit integer vectors (its value to 1/126 of its largest component, then what is
# left to 1/126 of that): the query's own rounding stays below 2**-13 of its largest component.
_QUERY_LEVEL = 63
# ONNX Runtime's u8 x s8 kernels on CPUs without VNNI (AVX2) add adjacent products in int16 with saturation:
# a query value of at most 127 (zero point 64) times table values within +-127 keeps every pair below 2**15,
# so each integer product is exact on every kernel.
_ZERO_POINT = 64
_TABLE_LEVEL = 127
_QUANTIZE_ROWS = 2048  # rows quantized at a time at build (float64 temporaries of a few MB)


@dataclass
class _Int8Table:
    """Each vector as ``scale[i] * rows[i]`` with int8 ``rows`` (per-row scale: its largest component is 127),
    scanned by ONNX Runtime's MatMulInteger with the table prepacked once per table (a constant initializer):
    about 4x faster than a float16 scan for one vector and 8x for several, reading a quarter of float32's bytes.
    Once the session is made, the only copy in memory is the session's packed one; the rows stay in the table's
    temporary file for an update to read (``stored_rows``).

    Bound: with q' the query as scanned and v' = scale * rows, |q.v - q'.v'| <= |q| |v - v'| + |q - q'| |v'|;
    ``residual`` and ``quantized_norm`` are the largest |v - v'| and |v'| over the table (float64)."""

    rows: np.ndarray | None  # (n_vectors, dim) int8 (transposed in memory) while built; then None (in the file)
    scale: np.ndarray  # (n_vectors,) float32
    residual_norms: np.ndarray  # (n_vectors,) float64: |v - v'| per vector
    quantized_norms: np.ndarray  # (n_vectors,) float64: |v'| per vector
    residual: float = 0.0
    quantized_norm: float = 0.0
    session: object = field(repr=False, default=None)
    files: tempfile.TemporaryDirectory | None = field(repr=False, default=None)  # removed with the table

    @classmethod
    def empty(cls, total: int, width: int) -> "_Int8Table":
        # The rows as a view of their transpose, the layout the file holds (``_written``): writing needs no copy.
        rows = np.empty((width, total), np.int8).T
        return cls(rows, np.empty(total, np.float32), np.empty(total), np.empty(total))

    @classmethod
    def of(cls, blocks: Sequence[np.ndarray], total: int, width: int, spill_dir: str | None) -> "_Int8Table":
        table = cls.empty(total, width)
        position = 0
        for block in blocks:
            table._quantize(block, position)
            position += len(block)
        return table._finish(spill_dir)

    @classmethod
    def updated(
        cls,
        old: "_Int8Table",
        src: np.ndarray,
        dst: np.ndarray,
        total: int,
        width: int,
        added: Sequence[np.ndarray],
        starts: Sequence[int],
        spill_dir: str | None,
    ) -> "_Int8Table":
        """Rows ``src`` of ``old`` at ``dst`` and the float32 blocks ``added`` quantized at ``starts``: the same
        table, bit for bit, as quantizing every row again."""
        table = cls.empty(total, width)
        copy_rows(table.rows, dst, old.stored_rows(), src)
        table.scale[dst] = old.scale[src]
        table.residual_norms[dst] = old.residual_norms[src]
        table.quantized_norms[dst] = old.quantized_norms[src]
        for start, block in zip(starts, added, strict=True):
            table._quantize(block, start)
        return table._finish(spill_dir)

    def _finish(self, spill_dir: str | None) -> "_Int8Table":
        self.residual = float(self.residual_norms.max())
        self.quantized_norm = float(self.quantized_norms.max())
        count, width = self.rows.shape
        self.files = _written(self.rows, spill_dir)
        self.rows = None  # freed before the session reads the file: the build's peak holds one copy less
        self.session = _session(self.files.name, count, width)
        return self

    def stored_rows(self) -> np.ndarray:
        """The int8 rows (n_vectors, dim), read back from the table's file (a transposed view)."""
        count = len(self.scale)
        return np.fromfile(Path(self.files.name) / "table.bin", np.int8).reshape(-1, count).T

    def _quantize(self, block: np.ndarray, start: int) -> None:
        """float32 ``block`` into rows from ``start``, a chunk at a time (float64 temporaries of a chunk only)."""
        for lo in range(0, len(block), _QUANTIZE_ROWS):
            exact = block[lo : lo + _QUANTIZE_ROWS].astype(np.float64)
            largest = np.abs(exact).max(axis=1)
            scale = np.where(largest > 0, largest / _TABLE_LEVEL, 1.0).astype(np.float32)
            rows = np.clip(np.rint(exact / scale[:, None]), -_TABLE_LEVEL, _TABLE_LEVEL)
            approx = rows * scale[:, None].astype(np.float64)
            at = slice(start + lo, start + lo + len(exact))
            self.rows[at] = rows
            self.scale[at] = scale
            self.residual_norms[at] = np.sqrt(((exact - approx) ** 2).sum(axis=1))
            self.quantized_norms[at] = np.sqrt((approx**2).sum(axis=1))

    def scan(self, queries: np.ndarray) -> tuple[np.ndarray, list[tuple[float, float]]]:
        """float32 approximate cosines of every vector to each of the (k, dim) ``queries`` ((k, n_vectors)),
        and each query's (|q|, |q - q'|), from which its bounds on their distance from the exact float32
        cosines follow (``error``; a tool's own: ``DenseScores.errors_at``)."""
        exact = queries.astype(np.float64)
        largest = np.abs(exact).max(axis=1)
        high_step = np.where(largest > 0, largest / _QUERY_LEVEL, 1.0)
        high = np.rint(exact / high_step[:, None])
        rest = exact - high * high_step[:, None]
        low_step = high_step / (2 * _QUERY_LEVEL)  # |rest| <= high_step / 2: within +-63 steps
        low = np.rint(rest / low_step[:, None])
        leftover = rest - low * low_step[:, None]
        levels = np.empty((2 * len(queries), queries.shape[1]), np.uint8)
        levels[0::2], levels[1::2] = high + _ZERO_POINT, low + _ZERO_POINT
        products = self.session.run(None, {"query": levels})[0]  # (2k, n_vectors) int32, exact
        # high_step * high + low_step * low = low_step * (2 * _QUERY_LEVEL * high + low): the two products summed
        # exactly in integers (in place), then one conversion and two scalings (not two of each and a sum).
        combined = products[0::2]
        if queries.shape[1] * _QUERY_LEVEL * _TABLE_LEVEL * (2 * _QUERY_LEVEL + 1) >= 2**31:  # past int32
            combined = combined.astype(np.int64)
        combined *= 2 * _QUERY_LEVEL
        combined += products[1::2]
        sims = combined.astype(np.float32)
        sims *= low_step[:, None].astype(np.float32)
        sims *= self.scale
        norms = [(float(np.linalg.norm(exact[j])), float(np.linalg.norm(leftover[j]))) for j in range(len(queries))]
        return sims, norms

    def error(self, norms: tuple[float, float]) -> float:
        """The bound of a query scanned with ``norms`` (``scan``) over every vector of the table."""
        return norms[0] * self.residual + norms[1] * self.quantized_norm + _ACCUMULATION_ERROR


_TRANSPOSE_COLUMNS = 32  # the table is written transposed this many dimensions at a time


def _written(rows: np.ndarray, spill_dir: str | None) -> tempfile.TemporaryDirectory:
    """A temporary directory (removed with the object) holding ``rows`` transposed in ``table.bin``."""
    files = tempfile.TemporaryDirectory(dir=spill_dir)
    with open(Path(files.name) / "table.bin", "wb") as file:  # a few dimensions at a time: no whole copy
        for lo in range(0, rows.shape[1], _TRANSPOSE_COLUMNS):
            file.write(np.ascontiguousarray(rows[:, lo : lo + _TRANSPOSE_COLUMNS].T))  # rows as ``empty`` makes
            # them: a view of contiguous memory, written as it is
    return files


def _session(directory: str, count: int, width: int):
    """An ONNX Runtime session computing ``(query - 64) @ rows.T`` for uint8 queries, with the (count, width)
    int8 ``rows`` of ``directory``/table.bin a constant the session prepacks."""
    import onnxruntime
    from onnx import TensorProto, helper

    table = TensorProto(name="table", data_type=TensorProto.INT8, dims=[width, count])
    table.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "table.bin"), ("offset", "0"), ("length", str(width * count))):
        table.external_data.add(key=key, value=value)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["query", "table", "zero_point"], ["products"])],
        "int8_scan",
        [helper.make_tensor_value_info("query", TensorProto.UINT8, [None, width])],
        [helper.make_tensor_value_info("products", TensorProto.INT32, [None, count])],
        [table, helper.make_tensor("zero_point", TensorProto.UINT8, [], [_ZERO_POINT])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    path = Path(directory) / "scan.onnx"
    path.write_bytes(model.SerializeToString())
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # the request's own thread, as the BLAS scan of a float32 table
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    before = _anonymous_regions()
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    _back_with_huge_pages(_anonymous_regions() - before, least=count * width)
    path.unlink()
    return session


# madvise(2) advice (Linux): mark a range for transparent huge pages; collapse it into them now (Linux 6.1+).
_MADV_HUGEPAGE = 14
_MADV_COLLAPSE = 25


def _anonymous_regions() -> set[tuple[int, int]]:
    """(start, end) of every anonymous mapping of this process (none where /proc is absent: not Linux)."""
    try:
        with open("/proc/self/maps", encoding="ascii") as maps:
            lines = maps.readlines()
    except OSError:
        return set()
    regions = set()
    for line in lines:
        fields = line.split()
        if len(fields) == 5:  # no path: anonymous memory
            start, end = fields[0].split("-")
            regions.add((int(start, 16), int(end, 16)))
    return regions


def _back_with_huge_pages(regions: set[tuple[int, int]], *, least: int) -> None:
    """Back the regions of at least ``least`` bytes (ONNX Runtime's packed copy of an int8 table, allocated while
    its session was made) with 2 MB pages, their contents unchanged. Every scan reads the whole table: on 4 KB
    pages a 100,000-tool table (78 MB) is ~19,000 pages, and its scan took ~40% longer (bench/NOTES-scale5.md).
    A table gets a mapping of its own past glibc's mmap threshold (at most 32 MB: ~85,000 vectors), where it
    matters; a smaller one stays in the heap as it was. Best effort: a kernel without transparent huge pages or
    MADV_COLLAPSE refuses, and the table stays as it was."""
    wanted = [(start, end - start) for start, end in regions if end - start >= least]
    if not wanted:
        return
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for start, length in wanted:
        madvise(start, length, _MADV_HUGEPAGE)  # also for khugepaged, should the collapse below be refused
        madvise(start, length, _MADV_COLLAPSE)


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
