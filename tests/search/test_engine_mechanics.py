"""The fast paths of the engine against the plain computations they replace (ORM-free, no model).

Ranking selects and sorts only the head of each order and computes branch ranks for the candidates only;
the dense branch finds a tool's best vector on demand; the visible mask goes through a pk -> row array.
Each must give exactly what the full computation gives, ties included.
"""

import numpy as np
import pytest

from search.documents import ToolDoc
from search.engine.dense import DenseIndex, DenseScores
from search.engine.ranking import Branches, Calibration, RankingOptions, _kth_best, _ranks_at, _top, rank
from search.engine.snapshot import IndexSnapshot
from search.engine.sparse import SparseScores


def full_order(values: np.ndarray, tie: np.ndarray) -> np.ndarray:
    """Every position, value descending, ties by tie key: what the engine sorted before."""
    return np.lexsort((tie, -values))


def tied_values(rng: np.random.Generator, n: int, spread: int = 12) -> np.ndarray:
    """Scores with exact ties and zeros (unmatched BM25 rows), as real branches have."""
    values = rng.integers(0, spread, n).astype(np.float32) / 4
    values[rng.random(n) < 0.3] = 0.0
    return values


@pytest.mark.parametrize("n", [1, 7, 50, 3000])
def test_top_is_the_head_of_the_full_order(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        values = tied_values(rng, n)
        tie = rng.permutation(n)
        expected = full_order(values, tie)
        for k in (0, 1, 3, 15, 30, n - 1, n, n + 5):
            assert _top(values, tie, k).tolist() == expected[: max(k, 0)].tolist()


@pytest.mark.parametrize("spread", [12, 400, 10**9])  # a few values (the sample's threshold keeps too many
def test_top_of_a_large_array_is_the_head_of_the_full_order(spread):  # rows), ties at the head, or none
    """From ``_SAMPLED_TOP_MIN`` rows the head is selected among the rows above a sampled threshold: the same
    rows in the same order, the k-th value's ties included, as the full order."""
    rng = np.random.default_rng(spread)
    for n in (4096, 20_000):
        for _ in range(5):
            values = (rng.integers(0, spread, n) / spread).astype(np.float32)
            values[rng.choice(n, 40, replace=False)] = values.max()  # many rows tied at the top
            tie = rng.permutation(n)
            expected = full_order(values, tie)
            for k in (1, 5, 30, 64, 90, 300):
                assert _top(values, tie, k).tolist() == expected[:k].tolist()
                assert _kth_best(values, k) == np.sort(values)[n - k]
            negated = -values  # the head of ascending values too (a sample skewed the other way)
            assert _top(negated, tie, 64).tolist() == full_order(negated, tie)[:64].tolist()


@pytest.mark.parametrize("spread", [12, 1_000_000])  # many exact ties, or almost none
def test_ranks_at_equal_the_ranks_of_the_full_order(spread):
    rng = np.random.default_rng(spread)
    for n in (1, 40, 2500):
        for _ in range(10):
            values = tied_values(rng, n, spread)
            tie = rng.permutation(n)
            rank_of = np.empty(n, np.int64)
            rank_of[full_order(values, tie)] = np.arange(1, n + 1)
            positions = rng.choice(n, size=min(n, 30), replace=False)
            assert _ranks_at(values, tie, positions, positive_only=False).tolist() == rank_of[positions].tolist()
            expected = np.where(values[positions] > 0, rank_of[positions], 0)
            assert _ranks_at(values, tie, positions, positive_only=True).tolist() == expected.tolist()
            for depth in (1, 5, 64):  # ranks past the depth are 0 (the head alone is selected)
                for positive_only in (False, True):
                    cut = np.where(rank_of[positions] <= depth, rank_of[positions], 0)
                    cut = np.where(values[positions] > 0, cut, 0) if positive_only else cut
                    found = _ranks_at(values, tie, positions, positive_only=positive_only, depth=depth)
                    assert found.tolist() == cut.tolist()


def test_best_vector_on_demand_is_the_first_best_of_the_tools_block():
    rng = np.random.default_rng(3)
    per_doc = [None if i % 5 == 0 else rng.standard_normal((1 + i % 4, 8)).astype(np.float32) for i in range(40)]
    per_doc[7] = np.ones((3, 8), np.float32)  # a tie inside one block: the first vector wins
    kinds = [() if v is None else ("document",) + ("example",) * (len(v) - 1) for v in per_doc]
    texts = [() if v is None else tuple(f"text {i}.{j}" for j in range(len(v))) for i, v in enumerate(per_doc)]
    index = DenseIndex(per_doc, kinds, texts)
    query = rng.standard_normal(8).astype(np.float32)
    scores = index.score(query)
    all_sims = index.matrix @ query  # one product over the table, as the engine computes it
    best = scores.best_of(np.arange(len(per_doc)))
    assert scores.best_of(np.arange(len(per_doc))[::-1]).tolist() == best[::-1].tolist()  # any order of rows
    start = 0
    for row, vectors in enumerate(per_doc):
        if vectors is None:
            assert best[row] == -1 and scores.scores[row] == -1.0
            continue
        sims = all_sims[start : start + len(vectors)]
        assert np.allclose(sims, vectors @ query, atol=1e-5)
        assert best[row] == start + int(np.argmax(sims))
        assert scores.scores[row] == sims.max()
        # Explanations quote example requests only; other texts are not kept.
        assert index.text(start) is None
        assert [index.text(start + j) for j in range(1, len(vectors))] == list(texts[row][1:])
        start += len(vectors)
    assert np.allclose(index.max_similarity(query, np.arange(40)), scores.scores, atol=1e-5)


def test_a_request_and_its_parts_scanned_together_get_the_bits_of_each_scanned_alone():
    """``score_all`` reads a float32 table a block at a time for all its vectors (one read of memory); each
    vector's cosines are those of its own full product, bit for bit (one matrix product would add in another
    order). Over more rows than a block, and a last block shorter than the others."""
    rng = np.random.default_rng(5)
    per_doc = [rng.standard_normal((1 + i % 3, 384)).astype(np.float32) for i in range(1500)]  # 2999 vectors
    kinds = [("document",) * len(v) for v in per_doc]
    texts = [("",) * len(v) for v in per_doc]
    index = DenseIndex(per_doc, kinds, texts)
    queries = list(rng.standard_normal((4, 384)).astype(np.float32))
    together = index.score_all(queries)
    for query, scores in zip(queries, together, strict=True):
        alone = index.score(query)
        assert np.array_equal(scores.sims, (index.matrix @ query)[: len(index.owner)])
        assert np.array_equal(scores.sims, alone.sims) and np.array_equal(scores.scores, alone.scores)


def test_a_table_without_any_vector_gives_no_tool_meaning_evidence():
    """Tools whose vectors are all missing (none encoded yet) score -1, as a tool without a vector does in a
    table that has some: never a cosine that could lift them or vouch for an answer."""
    index = DenseIndex([None, None, None], [(), (), ()], [(), (), ()])
    scores = index.score(np.ones(8, np.float32))
    assert scores.scores.tolist() == [-1.0, -1.0, -1.0]
    assert scores.best_of(np.arange(3)).tolist() == [-1, -1, -1]
    assert index.max_similarity(np.ones(8, np.float32), np.arange(3)).tolist() == [-1.0, -1.0, -1.0]


@pytest.mark.parametrize("pks", [[3, 1, 2, 10], [5, 10_000_000, 7]])  # dense ids use the lookup array
def test_visible_mask_matches_membership(pks):
    docs = [ToolDoc(pk=pk, tool_id=f"s::t{pk}", name=f"t{pk}", server="s", description="Do a thing.") for pk in pks]
    snapshot = IndexSnapshot(docs, None)
    for visible in ([], [pks[0]], pks, [pks[-1], -4, 99_999_999_999, pks[-1]], {str(pks[1])}):
        expected = np.isin(snapshot.pks, [int(pk) for pk in visible])
        assert snapshot.visible_mask(visible).tolist() == expected.tolist()
    assert snapshot.visible_mask(None).all()


def test_visible_masks_are_kept_per_visible_set_and_read_only():
    docs = [
        ToolDoc(pk=pk, tool_id=f"s::t{pk}", name=f"t{pk}", server="s", description="Do a thing.") for pk in range(1, 9)
    ]
    snapshot = IndexSnapshot(docs, None)
    mask, rows = snapshot.visibility(frozenset({2, 5}))
    assert mask.tolist() == [pk in (2, 5) for pk in range(1, 9)] and rows.tolist() == [1, 4]
    assert snapshot.visibility(frozenset({5, 2}))[0] is mask  # an equal set: the kept mask
    assert snapshot.visible_mask(frozenset({3})).tolist() == [pk == 3 for pk in range(1, 9)]
    with pytest.raises(ValueError):
        mask[0] = True  # shared between requests: nobody may change it
    for pk in range(1, 9):
        assert snapshot.visibility(frozenset({pk}))[1].tolist() == [pk - 1]
    assert snapshot.visibility(frozenset({2, 5}))[1].tolist() == [1, 4]  # evicted, computed again


@pytest.mark.parametrize("most", [1, 2, 3])
def test_a_tools_dense_score_is_the_best_of_its_vectors_however_many_it_has(most):
    """Per-tool maxima are taken a vector position at a time (and block by block past a few): the same
    values as the max over each tool's block, for tools with none, one, typical and very many vectors."""
    rng = np.random.default_rng(most)
    counts = np.full(400, most)
    counts[rng.choice(400, 60, replace=False)] = rng.integers(0, 30, 60)  # none, a few and past the passes
    per_doc = [rng.standard_normal((c, 16)).astype(np.float32) if c else None for c in counts]
    table = DenseIndex(per_doc, [("document",) * c for c in counts], [("",) * c for c in counts])
    for _ in range(5):
        query = rng.standard_normal(16).astype(np.float32)
        expected = [float((v @ query).max()) if v is not None else -1.0 for v in per_doc]
        found = table.score(query)
        assert found.scores.tolist() == pytest.approx(expected, abs=1e-5)
        blocks = [found.sims[lo:hi] for lo, hi in zip(table.offsets[:-1], table.offsets[1:], strict=True)]
        assert found.scores.tolist() == [float(b.max()) if len(b) else -1.0 for b in blocks]


def plain_candidates(branches, clauses, options, tie, calibration, pool):
    """Fusion of the request and its parts over every visible row (convex, no intent or negatives): what
    ranking computed for every row before it computed calibrated scores and branch shares per candidate."""
    rows = branches.visible_rows

    def fuse(b):
        bm25, dense = b.sparse.scores[rows], b.dense.scores[rows]
        top = float(bm25.max())
        bm25_part = options.bm25_weight * (bm25 / top if top > 0 else np.zeros_like(bm25))
        return bm25_part, (1 - options.bm25_weight) * dense.astype(np.float64), dense, b.sparse.coverage[rows]

    bm25_part, dense_part, dense, coverage = fuse(branches)
    peak = calibration.peak(dense)
    fused, step = bm25_part + dense_part, np.zeros(len(rows), np.int64)
    calibrated = calibration.score(dense, coverage, peak)
    for i, clause in enumerate(clauses, start=1):
        b, d, cosine, cov = fuse(clause)
        wins = options.clause_discount * (b + d) > fused
        fused = np.where(wins, options.clause_discount * (b + d), fused)
        bm25_part = np.where(wins, options.clause_discount * b, bm25_part)
        dense_part = np.where(wins, options.clause_discount * d, dense_part)
        step = np.where(wins, i, step)
        calibrated = np.maximum(calibrated, calibration.score(cosine, cov, peak))
    order = np.lexsort((tie[rows], -fused))[:pool]
    return [
        (int(rows[i]), fused[i], calibrated[i], bm25_part[i], dense_part[i], int(step[i]), float(dense[i]))
        for i in order
    ]


@pytest.mark.parametrize("visible_share", [1.0, 0.4])  # every row visible (arrays used as they are), or some
def test_candidates_equal_the_plain_fusion_of_every_row(visible_share):
    """Calibrated scores and branch shares are computed for the candidates only, the peak is read from the
    dense head: every value equals the whole-array computation's, bit for bit, with parts and ties."""
    rng = np.random.default_rng(int(visible_share * 10))
    n, calibration = 1003, Calibration()  # an odd size: no whole number of SIMD lanes
    options = RankingOptions(intent=False)
    tie = rng.permutation(n)
    visible = rng.random(n) < visible_share
    rows = np.flatnonzero(visible)

    def branch():
        bm25 = tied_values(rng, n)
        dense = (rng.integers(-40, 90, n) / 100).astype(np.float32)  # ties, as float16-close tools have
        sparse = SparseScores(np.where(visible, bm25, 0.0), rng.random(n), ("term",))
        return Branches(sparse, DenseScores(dense, dense.copy(), np.arange(n + 1)), rows)

    for _ in range(10):
        whole, clauses = branch(), [branch() for _ in range(rng.integers(0, 3))]
        ranking = rank(whole, query="plain", top_k=5, options=options, tie_keys=tie, clauses=clauses)
        found = [
            (c.row, c.score, c.calibrated, c.bm25_part, c.dense_part, c.step, c.dense_score) for c in ranking.candidates
        ]
        assert found == plain_candidates(whole, clauses, options, tie, calibration, options.second_stage)


def test_the_peak_read_from_the_dense_head_is_the_peak_of_every_row():
    rng = np.random.default_rng(4)
    calibration = Calibration()
    for n in (1, 5, 20, 21, 500):
        values = (rng.integers(0, 30, n) / 30).astype(np.float32)
        tie = rng.permutation(n)
        head = _top(values, tie, 64)
        assert calibration.peak_of_head(values[head]) == calibration.peak(values)
