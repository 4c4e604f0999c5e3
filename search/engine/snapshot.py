"""An immutable in-memory index: documents, sparse matrix, vector tables. Built whole, then swapped in.

Searches take a reference to one snapshot and use only it, so a rebuild running next to them is never
half-visible: they see the old snapshot or the new one.
"""

import bisect
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..documents import ToolDoc
from ..indexes import ToolSearchIndex
from ..text import name_words, tokenize
from .decompose import is_implied
from .dense import DenseIndex
from .intent import tool_operation
from .producers import needed_identifiers, produced_words
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


def _doc_tokens(doc: ToolDoc, weights: dict[str, int]) -> list[tuple[str, float]]:
    learned = learned_tokens(doc.learned, ToolSearchIndex.learned_weight, doc.teachers())
    return weighted_tokens(doc.field_texts(), weights) + learned


VISIBLE_SETS_KEPT = 4  # visible sets whose mask a snapshot keeps (a few principals' at a time)
_NO_TERMS: frozenset[str] = frozenset()  # shared by every tool without negative examples or learned words


def _learned_terms(doc: ToolDoc, weights: dict[str, int]) -> frozenset[str]:
    """The words a tool has only from its learned requests (not in its curated text): what
    ``ranking.curated_evidence`` leaves out of its coverage."""
    if not doc.learned:
        return _NO_TERMS
    learned = {token for token, _ in learned_tokens(doc.learned, ToolSearchIndex.learned_weight, doc.teachers())}
    return frozenset(learned - {token for token, _ in weighted_tokens(doc.field_texts(), weights)})


def _negative_terms(doc: ToolDoc) -> frozenset[str]:
    return frozenset(t for n in doc.negatives for t in tokenize(n)) if doc.negatives else _NO_TERMS


class IndexSnapshot:
    def __init__(
        self,
        docs: Sequence[ToolDoc],
        vectors: Mapping[int, DocVectors] | None,
        *,
        generation: str = "",
        model_key: str | None = None,
        quantized: bool = False,
        spill_dir: str | None = None,
    ) -> None:
        """``quantized``: scan int8 vectors and re-score exactly from an unlinked float32 file in
        ``spill_dir`` (engine/dense.py); the answers are the exact scan's, scanned faster in less memory."""
        self.docs = tuple(docs)
        self.generation = generation
        self.model_key = model_key
        self.generation_mark: object = None  # the backend's record of the generations this includes
        self._visible_cache: dict[frozenset, tuple[np.ndarray, np.ndarray]] = {}
        self._index_rows()
        self._set_server_codes()
        weights = ToolSearchIndex.weights()
        # A generator: one document's tokens at a time, never every document's token list at once.
        self.sparse = SparseIndex(_doc_tokens(d, weights) for d in self.docs)
        self.tool_ops = [tool_operation(d.name, d.purpose or d.description, d.read_only) for d in self.docs]
        self.name_words = [name_words(d.name) for d in self.docs]
        self.deprecated = np.asarray([d.deprecated for d in self.docs], bool)
        self.read_only = np.asarray([d.read_only for d in self.docs], bool)
        self.takes_input = np.asarray([bool(d.parameters) for d in self.docs], bool)
        self.needs = [needed_identifiers(d.parameters) for d in self.docs]
        self.gives = self._gives_cached()
        self.negative_terms = [_negative_terms(d) for d in self.docs]
        self.learned_terms = [_learned_terms(d, weights) for d in self.docs]
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
                quantized=quantized,
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

    def _index_rows(self) -> None:
        """Row lookups and tie-break keys of ``self.docs``."""
        self.pks = np.asarray([d.pk for d in self.docs], dtype=np.int64)
        self._row_of_pk = _row_lookup(self.pks)
        # Tie-break key: position of the tool id in sorted order (relative order ignores hidden tools).
        order = sorted(range(len(self.docs)), key=lambda i: self.docs[i].tool_id)
        self.tie_keys = np.empty(len(self.docs), np.int64)
        self.tie_keys[order] = np.arange(len(self.docs))

    def updated(
        self,
        docs: Sequence[ToolDoc],
        vectors: Mapping[int, DocVectors] | None,
        removed: Collection[int],
        *,
        generation: str,
    ) -> "IndexSnapshot":
        """A new snapshot with ``docs`` added or replaced (by pk) and the tools ``removed`` gone; every other
        tool's tokens and vectors are reused, not recomputed. ``vectors``: those of ``docs`` (None: none).

        Equal to ``IndexSnapshot`` built from every document in pk order with the same vectors (rows in pk
        order, the same term frequencies, vector bits, tie keys and bounds); tests/search/test_snapshot_update.py
        compares the two. This snapshot is not changed: searches may still be using it."""
        changed = {d.pk for d in docs} | {int(pk) for pk in removed}
        kept = np.flatnonzero(~np.isin(self.pks, np.fromiter(changed, np.int64, len(changed))))
        incoming = sorted(docs, key=lambda d: d.pk)
        pks = np.concatenate((self.pks[kept], np.asarray([d.pk for d in incoming], np.int64)))
        order = np.argsort(pks, kind="stable")  # new row -> source (kept rows first, then incoming)
        source_row = np.empty(len(order), np.int64)
        source_row[order] = np.arange(len(order))  # source -> new row
        kept_to, added_rows = source_row[: len(kept)], source_row[len(kept) :].tolist()
        snapshot = IndexSnapshot.__new__(IndexSnapshot)
        snapshot.generation = generation
        snapshot.model_key = self.model_key
        snapshot.generation_mark = None
        snapshot._visible_cache = {}
        merged: list[ToolDoc | None] = [None] * len(order)
        tool_ops: list[frozenset[str]] = [_NO_TERMS] * len(order)
        names: list[frozenset[str]] = [_NO_TERMS] * len(order)
        negative_terms: list[frozenset[str]] = [_NO_TERMS] * len(order)
        learned_terms: list[frozenset[str]] = [_NO_TERMS] * len(order)
        needs: list[frozenset[str]] = [_NO_TERMS] * len(order)
        weights = ToolSearchIndex.weights()
        for old, new in zip(kept.tolist(), kept_to.tolist(), strict=True):
            merged[new] = self.docs[old]
            tool_ops[new] = self.tool_ops[old]
            names[new] = self.name_words[old]
            negative_terms[new] = self.negative_terms[old]
            learned_terms[new] = self.learned_terms[old]
            needs[new] = self.needs[old]
        for doc, row in zip(incoming, added_rows, strict=True):
            merged[row] = doc
            tool_ops[row] = tool_operation(doc.name, doc.purpose or doc.description, doc.read_only)
            names[row] = name_words(doc.name)
            negative_terms[row] = _negative_terms(doc)
            learned_terms[row] = _learned_terms(doc, weights)
            needs[row] = needed_identifiers(doc.parameters)
        snapshot.docs = tuple(merged)
        snapshot._set_server_codes()
        snapshot.tool_ops, snapshot.negative_terms, snapshot.name_words = tool_ops, negative_terms, names
        snapshot.deprecated = np.zeros(len(order), bool)
        snapshot.deprecated[kept_to] = self.deprecated[kept]
        snapshot.deprecated[added_rows] = [doc.deprecated for doc in incoming]
        snapshot.read_only = np.zeros(len(order), bool)
        snapshot.read_only[kept_to] = self.read_only[kept]
        snapshot.read_only[added_rows] = [doc.read_only for doc in incoming]
        snapshot.takes_input = np.zeros(len(order), bool)
        snapshot.takes_input[kept_to] = self.takes_input[kept]
        snapshot.takes_input[added_rows] = [bool(doc.parameters) for doc in incoming]
        snapshot.learned_terms = learned_terms
        snapshot.needs, snapshot.gives = needs, snapshot._gives_cached()
        snapshot.pks = pks[order]
        snapshot._row_of_pk = _row_lookup(snapshot.pks)
        snapshot.tie_keys = self._merged_tie_keys(kept, kept_to, incoming, added_rows)
        snapshot.sparse = self.sparse.updated(
            kept,
            kept_to,
            len(order),
            {row: _doc_tokens(doc, weights) for doc, row in zip(incoming, added_rows, strict=True)},
        )
        snapshot.dense = snapshot.negatives = None
        snapshot.missing_vectors = 0
        if self.dense is not None and vectors is not None:
            found = [vectors.get(doc.pk) for doc in incoming]
            kept_missing = int((np.diff(self.dense.offsets)[kept] == 0).sum())
            snapshot.missing_vectors = kept_missing + sum(1 for v in found if v is None)
            snapshot.dense = self.dense.updated(
                kept,
                kept_to,
                len(order),
                {row: (v.vectors, v.kinds, v.texts) for row, v in zip(added_rows, found, strict=True) if v is not None},
            )
            snapshot.negatives = self.negatives.updated(
                kept,
                kept_to,
                len(order),
                {
                    row: (v.negatives, ("negative",) * len(v.negatives), ())
                    for row, v in zip(added_rows, found, strict=True)
                    if v is not None and v.negatives is not None
                },
            )
        return snapshot

    def _merged_tie_keys(
        self, kept: np.ndarray, kept_to: np.ndarray, incoming: Sequence[ToolDoc], added_rows: Sequence[int]
    ) -> np.ndarray:
        """The tie keys of an update (positions in tool id order), without sorting every tool id again: the
        kept tools keep their relative order and each new one is inserted among them."""
        by_key = np.argsort(self.tie_keys[kept])
        kept_ids = [self.docs[row].tool_id for row in kept[by_key].tolist()]
        new = sorted(range(len(incoming)), key=lambda j: incoming[j].tool_id)
        # New tool j (in tool id order) follows ``positions[j]`` kept tools and j new ones.
        positions = np.asarray([bisect.bisect_left(kept_ids, incoming[j].tool_id) for j in new], np.int64)
        keys = np.empty(len(kept) + len(incoming), np.int64)
        ranks = np.arange(len(kept), dtype=np.int64)
        keys[kept_to[by_key]] = ranks + np.searchsorted(positions, ranks, side="right")
        keys[np.asarray([added_rows[j] for j in new], np.int64)] = positions + np.arange(len(new))
        return keys

    def __len__(self) -> int:
        return len(self.docs)

    def _gives_cached(self) -> Callable[[int], frozenset[str]]:
        """``producers.produced_words`` of a row, computed when ranking first asks (only for the candidates of a
        server one of whose first tools needs an identifier): kept for every row it would be some 2.6 kB a tool,
        260 MB at 100k tools (issue 9's 1 GB a process). This snapshot's rows; a few thousand kept."""
        docs = self.docs

        @lru_cache(maxsize=4096)
        def gives(row: int) -> frozenset[str]:
            return produced_words(docs[row].name, docs[row].description)

        return gives

    def _set_server_codes(self) -> None:
        """A number per row, the same for the tools of one server (ranking's server share). Set with the
        snapshot (build or update: 20 ms at 100k tools), so no search pays for it."""
        numbers: dict[str, int] = {}
        self.server_codes = np.fromiter(
            (numbers.setdefault(d.server, len(numbers)) for d in self.docs), np.int64, len(self.docs)
        )

    def row_of(self, pk: int) -> int | None:
        """The row of a tool pk (None: not in this snapshot)."""
        if self._row_of_pk is not None:
            row = int(self._row_of_pk[pk]) if 0 <= pk < len(self._row_of_pk) else -1
            return row if row >= 0 else None
        found = np.flatnonzero(self.pks == pk)
        return int(found[0]) if len(found) else None

    def visible_mask(self, visible: Collection[int] | None) -> np.ndarray:
        """Boolean mask over rows for the caller's visible tool pks (None: every tool, for evaluation)."""
        return self.visibility(visible)[0]

    def visibility(self, visible: Collection[int] | None) -> tuple[np.ndarray, np.ndarray]:
        """(mask, rows) of the caller's visible tools, read-only. A caller's visible set is usually the same
        frozenset from one request to the next (governance caches it): the last few are kept per snapshot,
        since building the mask from 100k pks cost more than the rest of the ranking."""
        key = visible if isinstance(visible, frozenset) else None
        found = self._visible_cache.get(key) if key is not None else None
        if found is not None:
            return found
        mask = self._visible_mask(visible)
        rows = np.flatnonzero(mask)
        mask.flags.writeable = rows.flags.writeable = False
        if key is not None:
            if len(self._visible_cache) >= VISIBLE_SETS_KEPT:
                self._visible_cache.pop(next(iter(self._visible_cache), None), None)
            self._visible_cache[key] = (mask, rows)
        return mask, rows

    def _visible_mask(self, visible: Collection[int] | None) -> np.ndarray:
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
        visible = branches_visible(branches)
        clauses = [replace(self.branches(text, vector, visible), implied=is_implied(text)) for text, vector in parts]
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
            servers=self.server_codes,
            name_words=self.name_words,
            deprecated=self.deprecated,
            read_only=self.read_only,
            takes_input=self.takes_input,
            needs=self.needs,
            gives=self.gives,
            vector_kinds=self.dense.kinds if self.dense is not None else None,
            learned_terms=self.learned_terms,
            vectors=self.dense,
        )

    def explain(
        self,
        row: int,
        best_vector: int,
        query_terms: Sequence[str],
        dense: DenseIndex | None = None,
        own_vector: int = -1,
    ) -> dict:
        """Why a tool matched: the request's terms it contains (by field) and its closest vector.

        ``dense``: the vector table ``best_vector`` indexes (default: this snapshot's). When the closest is a
        learned request's, ``own``: the closest of the tool's own texts' (``own_vector``, ``ranking.own_vectors``),
        which is what a caller is told (the curator preview says "learned")."""
        dense = dense if dense is not None else self.dense
        doc = self.docs[row]
        wanted = set(query_terms)
        fields: dict[str, list[str]] = {}
        for label, text, lowered in _explained_fields(doc):
            hits = _hits(text, wanted, lowered)
            if hits:
                shown = fields.setdefault(label, [])
                shown += [h for h in hits if h not in shown]
        said = set().union(*fields.values())
        terms = [t for t in query_terms if t in said]
        why: dict = {"terms": terms, "fields": fields}
        if dense is not None and best_vector >= 0:
            kind = dense.kinds[best_vector]
            why["closest"] = kind
            if kind == "example":
                why["example_request"] = dense.text(best_vector)
            elif kind == "learned":
                why["closest"] = "learned"  # never the text: it is another user's words
                if own_vector >= 0:
                    own_kind = dense.kinds[own_vector]
                    why["own"] = {"closest": own_kind}
                    if own_kind == "example":
                        why["own"]["example_request"] = dense.text(own_vector)
        return why


@lru_cache(maxsize=1024)
def _explained_fields(doc: ToolDoc) -> tuple[tuple[str, str, str | None], ...]:
    """``explain``'s view of a tool's non-empty fields, in ``field_texts`` order: (label, text, the text's
    ``_hits`` form when ASCII, else None). An answer's tools come back request after request, and building
    their field texts, labels and lowercase forms again was a quarter of explaining one (issue 9: 12 -> 9 us a
    tool). Bounded: the last thousand tools explained, each a few kilobytes."""
    return tuple(
        (ToolSearchIndex.label(name), text, _hit_form(text)) for name, text in doc.field_texts().items() if text
    )


def _hit_form(text: str) -> str | None:
    """What ``_hits`` searches an ASCII text in: its lowercase form, ``-`` read as ``_`` (as tokenize joins a
    compound); None for a text that is not ASCII (always tokenized)."""
    return text.lower().replace("-", "_") if text.isascii() else None


def _hits(text: str, wanted: set[str], lowered: str | None) -> list[str]:
    """The words of ``text`` (``tokenize``) that are in ``wanted``, each once, in text order. An ASCII text
    whose ``_hit_form`` (``lowered``) contains no wanted word at all has none, and is not tokenized: every
    word tokenize gives an ASCII text is part of that form (issue 9: tokenizing the fields of the tools an
    answer explains was the largest part of ranking's Python time at 10k tools, most fields sharing no word
    with the request)."""
    if lowered is not None:
        for term in wanted:  # a plain loop: ``any`` over a generator cost a third of explaining a tool
            if term in lowered:
                break
        else:
            return []
    return [t for t in _distinct_tokens(text) if t in wanted]


@lru_cache(maxsize=4096)
def _distinct_tokens(text: str) -> tuple[str, ...]:
    """A field text's words, each once, in order: ``explain`` asks for the same few tools' fields on request
    after request (issue 9: tokenizing them again was about a quarter of a search's CPU outside the model). Bounded:
    the texts of the last few thousand fields explained."""
    return tuple(dict.fromkeys(tokenize(text)))
