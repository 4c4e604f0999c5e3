"""Large catalogs: an int8 vector table with exact float32 re-scoring gives the exact scan's answers.

The same fixed catalog is indexed twice, with float32 vectors (the exact scan) and with ``quantized=True``
(int8 scanned by ONNX Runtime, float32 kept in an unlinked file and read back only for the tools ranking
names). Every request, fusion and visible set must return the same tools in the same order with the same
scores, ranks and closest vectors. The catalog has near-duplicate tools whose vectors differ far below int8's
resolution, so an answer taken from the int8 scores alone would order them wrongly.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from search.documents import ToolDoc
from search.engine import dense as dense_module
from search.engine.dense import DenseIndex, _Spill
from search.engine.ranking import RankingOptions
from search.engine.snapshot import DocVectors, IndexSnapshot

VERBS = ["get", "list", "create", "update", "delete", "search", "send", "archive"]
NOUNS = ["issue", "file", "message", "invoice", "user", "event", "report", "ticket", "page", "order"]
DIM = 48


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def catalog():
    rng = np.random.default_rng(5)
    docs, vectors = [], {}
    topics = unit(rng.standard_normal((len(NOUNS), DIM)))
    for server in range(6):
        for v, verb in enumerate(VERBS):
            for n, noun in enumerate(NOUNS):
                pk = len(docs) + 1
                docs.append(
                    ToolDoc(
                        pk=pk,
                        tool_id=f"srv{server}::{verb}_{noun}",
                        name=f"{verb}_{noun}",
                        server=f"srv{server}",
                        description=f"{verb.title()} a {noun} on server {server}. Works with {NOUNS[(n + v) % 10]}s.",
                        examples=(f"please {verb} my {noun}",) if pk % 3 == 0 else (),
                        negatives=(f"never {verb} a {noun}",) if pk % 17 == 0 else (),
                    )
                )
                count = len(docs[-1].dense_texts())
                if server >= 3 and pk > 3 * len(VERBS) * len(NOUNS):  # near-duplicates of server - 3's tools
                    twin = vectors[pk - 3 * len(VERBS) * len(NOUNS)].vectors[:count]
                    block = unit(twin + rng.standard_normal(twin.shape).astype(np.float32) * 2e-5)
                else:
                    block = unit(topics[n] + 0.6 * rng.standard_normal((count, DIM)) + 0.3 * (v + 1) / len(VERBS))
                negatives = unit(rng.standard_normal((1, DIM))) if docs[-1].negatives else None
                kinds = tuple(k for k, _ in docs[-1].dense_texts())
                texts = tuple(t for _, t in docs[-1].dense_texts())
                vectors[pk] = DocVectors(block, kinds, texts, negatives)
    exact = IndexSnapshot(docs, vectors, generation="exact")
    half = IndexSnapshot(docs, vectors, generation="int8", quantized=True)
    return docs, exact, half, topics


def requests(topics: np.ndarray) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(9)
    result = []
    for i in range(40):
        noun = NOUNS[i % len(NOUNS)]
        text = f"{VERBS[i % len(VERBS)]} the {noun}" + (" and then send a message" if i % 4 == 0 else "")
        vector = unit(topics[i % len(NOUNS)] + 0.5 * rng.standard_normal(DIM))
        result.append((text, vector))
    return result


def answer(snapshot: IndexSnapshot, text: str, vector: np.ndarray, visible, options: RankingOptions):
    """Everything a caller sees of a ranking (the dense rank, a preview diagnostic, is compared apart)."""
    from search.engine.decompose import request_parts

    mask = snapshot.visible_mask(visible)
    branches = snapshot.branches(text, vector, mask)
    rng = np.random.default_rng(len(text))
    parts = [(part, unit(vector + 0.3 * rng.standard_normal(DIM))) for part in request_parts(text)]
    ranking = snapshot.rank(branches, query=text, query_vector=vector, top_k=10, options=options, parts=parts)
    return [
        (
            snapshot.docs[c.row].tool_id,
            c.score,
            c.calibrated,
            c.bm25_rank,
            c.dense_score,
            c.best_vector,
            c.demoted,
        )
        for c in ranking.candidates
    ], (ranking.confidence, ranking.cut)


@pytest.mark.parametrize(
    "options",
    [
        RankingOptions(),
        RankingOptions(fusion="rrf"),
        RankingOptions(fusion="dense"),
        RankingOptions(decompose=False),
    ],
    ids=["convex", "rrf", "dense", "convex-whole-request"],
)
def test_int8_vectors_answer_exactly_as_the_float32_scan(catalog, options):
    docs, exact, half, topics = catalog
    everyone = [d.pk for d in docs]
    some = everyone[::3]
    for text, vector in requests(topics):
        for visible in (everyone, some):
            assert answer(half, text, vector, visible, options) == answer(exact, text, vector, visible, options)


def test_the_int8_scan_alone_would_not_give_the_exact_answer(catalog):
    """The re-score is what makes the answers exact: the int8 scores differ from float32 ones."""
    docs, exact, half, topics = catalog
    differ = 0
    for _text, vector in requests(topics):
        approx = half.dense.score(vector)
        truth = exact.dense.score(vector)
        assert approx.error > 0 and np.all(np.abs(approx.scores - truth.scores) <= approx.error)
        differ += int(np.any(approx.scores != truth.scores))
    assert differ > 0


def test_each_tools_own_bound_holds_and_is_tighter_than_the_tables(catalog):
    """Ranking re-scores a tool when its score plus its own bound reaches a threshold: that bound must hold
    for every tool (a tool outside it could belong in the answer unseen), and is the table's at most."""
    docs, exact, half, topics = catalog
    rows = np.arange(len(docs))
    tighter = 0
    for _text, vector in requests(topics):
        approx = half.dense.score(vector)
        own = approx.errors_at(rows)
        assert np.all(np.abs(approx.scores.astype(np.float64) - exact.dense.score(vector).scores) <= own)
        assert np.all(own <= approx.error)
        tighter += int(np.count_nonzero(own < 0.9 * approx.error))
    assert tighter > len(rows)  # most tools' bounds are well inside the table's


def test_int8_tables_take_a_quarter_of_the_bytes_and_keep_float32_out_of_memory(catalog):
    _docs, exact, half, _topics = catalog
    assert half.dense.matrix is None and half.dense._int8.rows is None  # only ONNX Runtime's packed copy
    rows = half.dense._int8.stored_rows()
    assert rows.dtype == np.int8 and exact.dense.matrix.dtype == np.float32
    assert rows.nbytes * 4 == exact.dense.matrix.nbytes
    n = len(half.dense)
    starts, ends = np.asarray([0]), np.asarray([n])
    np.testing.assert_array_equal(half.dense.exact_rows(starts, ends), exact.dense.matrix[:n])


def test_dense_ranks_of_the_int8_table_are_within_the_error_band(catalog):
    """Dense ranks are not refined (a diagnostic): they may differ only by tools within the error band."""
    docs, exact, half, topics = catalog
    options = RankingOptions(dense_rank_depth=len(docs))  # every rank reported
    for text, vector in requests(topics)[:10]:
        mask = exact.visible_mask(None)
        truth = exact.rank(
            exact.branches(text, vector, mask), query=text, query_vector=vector, top_k=10, options=options
        )
        approx = half.rank(
            half.branches(text, vector, mask), query=text, query_vector=vector, top_k=10, options=options
        )
        error = half.dense.score(vector).error
        scores = exact.dense.score(vector).scores
        for a, b in zip(approx.candidates, truth.candidates, strict=True):
            near = int((np.abs(scores - scores[b.row]) <= 2 * error).sum())
            assert a.row == b.row and abs(a.dense_rank - b.dense_rank) <= near


def test_auto_precision_keeps_small_tables_in_float32_and_large_ones_in_int8(settings):
    """The embedded backend's choice for a whole build: ``auto`` (default) goes int8 from
    SCOUT_SEARCH_HALF_MIN_VECTORS stored vectors on (a small table gains little); ``int8`` (or its former
    name ``float16``) and ``float32`` are taken as they are."""
    from search.backends.embedded import quantized_table

    block = unit(np.random.default_rng(1).standard_normal((3, DIM)))
    vectors = {pk: DocVectors(block, ("description",) * 3, ("d",) * 3) for pk in range(1, 5)}  # 12 vectors
    assert settings.SCOUT_SEARCH_VECTOR_PRECISION == "auto"
    settings.SCOUT_SEARCH_HALF_MIN_VECTORS = 13
    assert quantized_table(vectors) is False
    settings.SCOUT_SEARCH_HALF_MIN_VECTORS = 12
    assert quantized_table(vectors) is True
    settings.SCOUT_SEARCH_VECTOR_PRECISION = "float32"
    assert quantized_table(vectors) is False
    settings.SCOUT_SEARCH_HALF_MIN_VECTORS = 10**9
    for name in ("int8", "float16"):
        settings.SCOUT_SEARCH_VECTOR_PRECISION = name
        assert quantized_table(vectors) is True


# -- a request and its parts scanned together (DenseIndex.score_all) on a fixed 20k-tool table ------------

LARGE_TOOLS, LARGE_DIM, TWIN_OFFSET = 20_000, 64, 9_999  # the offset keeps a twin's vector count (row % 3)


@pytest.fixture(scope="module")
def large_tables():
    """20k tools with 1-3 vectors each (40k rows), as a float32 and an int8 table. Every fourth tool of the
    second half is a near-duplicate of one in the first, closer than int8 (or float16) resolves."""
    rng = np.random.default_rng(20)
    topics = unit(rng.standard_normal((50, LARGE_DIM)))
    per_doc = []
    for row in range(LARGE_TOOLS):
        count = 1 + row % 3
        if row >= TWIN_OFFSET and row % 4 == 0:
            twin = per_doc[row - TWIN_OFFSET]
            per_doc.append(unit(twin + rng.standard_normal(twin.shape).astype(np.float32) * 2e-5))
        else:
            per_doc.append(unit(topics[row % 50] + 0.8 * rng.standard_normal((count, LARGE_DIM))))
    kinds = [("document", "summary", "example")[: len(v)] for v in per_doc]
    texts = [tuple(f"text {row}.{j}" for j in range(len(v))) for row, v in enumerate(per_doc)]
    exact = DenseIndex(per_doc, kinds, texts)
    half = DenseIndex(per_doc, kinds, texts, quantized=True)
    return exact, half, topics


def large_requests(topics: np.ndarray) -> list[list[np.ndarray]]:
    """A request's vector and its parts' (2 to 5 vectors: one and two column groups of the shared scan)."""
    rng = np.random.default_rng(21)
    result = []
    for i in range(12):
        base = topics[(7 * i) % len(topics)]
        result.append([unit(base + 0.4 * rng.standard_normal(LARGE_DIM)) for _ in range(2 + i % 4)])
    return result


def test_a_shared_scan_is_within_the_int8_bound_and_refines_to_the_exact_scores(large_tables):
    exact, half, topics = large_tables
    rows = np.arange(LARGE_TOOLS)
    for vectors in large_requests(topics):
        shared = half.score_all(vectors)
        for approx, vector in zip(shared, vectors, strict=True):
            truth = exact.score(vector)
            assert approx.error > 0 and np.all(np.abs(approx.scores - truth.scores) <= approx.error)
            assert np.any(approx.scores != truth.scores)  # approximate until refined
            approx.refine(rows)
            np.testing.assert_array_equal(approx.scores, truth.scores)
            np.testing.assert_array_equal(approx.sims, truth.sims)


def ranked(sparse, dense, rows, options, tie):
    """The ranking of a request (first branch) and its parts from each's BM25 and dense scores."""
    from search.engine.ranking import Branches, rank

    whole, *clauses = [Branches(s, d, rows) for s, d in zip(sparse, dense, strict=True)]
    return rank(whole, query="plain", top_k=10, options=options, tie_keys=tie, clauses=clauses), whole, clauses


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
@pytest.mark.parametrize("visible_share", [1.0, 0.4])
def test_a_shared_scan_ranks_exactly_as_the_float32_scan_of_each_vector(large_tables, fusion, visible_share):
    """Every candidate field (scores, calibrated scores, BM25 rank, branch shares, step, closest vector), the
    confidence and the cut: the int8 table scanned once for a request and its parts, then refined by
    ranking, against the float32 table scanned per vector; for convex fusion also against the plain fusion
    of every visible row of the exact scores. The dense rank, a preview diagnostic, is left out as above
    (past the peak depth it is exact only up to tools within the error band, as with ``score``)."""
    from dataclasses import asdict

    from search.engine.ranking import Calibration
    from search.engine.sparse import SparseScores

    from .test_engine_mechanics import plain_candidates, tied_values

    def fields(candidate):
        return {name: value for name, value in asdict(candidate).items() if name != "dense_rank"}

    exact, half, topics = large_tables
    rng = np.random.default_rng(int(visible_share * 10))
    tie = rng.permutation(LARGE_TOOLS)
    visible = rng.random(LARGE_TOOLS) < visible_share
    rows = np.flatnonzero(visible)
    options = RankingOptions(fusion=fusion, intent=False)
    for vectors in large_requests(topics):
        sparse = [
            SparseScores(np.where(visible, tied_values(rng, LARGE_TOOLS), 0.0), rng.random(LARGE_TOOLS), ("t",))
            for _ in vectors
        ]

        found, _, _ = ranked(sparse, half.score_all(vectors), rows, options, tie)
        expected, whole, clauses = ranked(sparse, [exact.score(vector) for vector in vectors], rows, options, tie)
        assert [fields(c) for c in found.candidates] == [fields(c) for c in expected.candidates]
        assert (found.confidence, found.cut, found.peak, found.spread) == (
            expected.confidence,
            expected.cut,
            expected.peak,
            expected.spread,
        )
        if fusion == "convex":
            plain = plain_candidates(whole, clauses, options, tie, Calibration(), options.second_stage)
            assert [
                (c.row, c.score, c.calibrated, c.bm25_part, c.dense_part, c.step, c.dense_score)
                for c in found.candidates
            ] == plain


def test_the_integer_products_are_exact_at_the_largest_values():
    """Every query and table value at its extreme (the products where a CPU's 16-bit pair sums would saturate
    first): the int8 scores stay within their bound of the float32 ones, with table rows of either sign."""
    rng = np.random.default_rng(30)
    flat = np.full(LARGE_DIM, 1 / np.sqrt(LARGE_DIM), np.float32)
    signs = np.where(np.arange(LARGE_DIM) % 2, -1.0, 1.0).astype(np.float32)
    per_doc = [np.stack([flat, -flat, flat * signs]), unit(rng.standard_normal((2, LARGE_DIM)))]
    kinds = [("document", "summary", "example"), ("document", "summary")]
    texts = [("a", "b", "c"), ("d", "e")]
    exact = DenseIndex(per_doc, kinds, texts)
    int8 = DenseIndex(per_doc, kinds, texts, quantized=True)
    for query in (flat, -flat, flat * signs, unit(rng.standard_normal(LARGE_DIM))):
        approx, truth = int8.score(query), exact.score(query)
        assert np.all(np.abs(approx.sims - truth.sims) <= approx.error)
    assert int8.score(flat).error < 0.02  # a bound tight enough to exclude most tools


def adversarial(exact: DenseIndex, vector: np.ndarray, error: float, signs: np.ndarray):
    """Dense scores as an approximate scan could give them at worst: every cosine moved by just under
    ``error`` (up where ``signs`` > 0, else down), re-scored exactly from the float32 table on demand."""
    from search.engine.dense import DenseScores

    truth = exact.score(vector)
    sims = (truth.sims + np.where(signs > 0, 1, -1) * 0.999 * error).astype(np.float32)
    scores = np.maximum.reduceat(sims, truth.offsets[:-1])
    query = np.asarray(vector, np.float32)
    return DenseScores(scores, sims, truth.offsets, error, exact, query, np.zeros(len(scores), bool))


@pytest.mark.parametrize("fusion", ["convex", "rrf", "dense"])
def test_ranking_is_exact_when_every_approximate_score_is_off_by_the_whole_bound(large_tables, fusion, monkeypatch):
    """The rows ranking re-scores are enough however the approximate scores sit within their bound: here every
    cosine is moved by (just under) the full bound, the tools just above each threshold down and those below
    it up (the worst case for which tools cross it), or in random directions. The answer must still be the
    exact scan's in every field but the dense rank, for a request alone and with parts, all tools or some;
    and the tools are re-scored in one round (convex and dense: the pass after it is the last and does not ask
    again), their float32 vectors read once for the request and its parts."""
    from dataclasses import asdict

    from search.engine import ranking
    from search.engine.sparse import SparseScores

    rounds = []

    def counted(scores, rows):
        changed = ranking_refine(scores, rows)
        rounds.append(changed)
        return changed

    ranking_refine = ranking.refine_together
    monkeypatch.setattr(ranking, "refine_together", counted)
    reads = []  # float32 reads: one per round for the request and its parts together
    exact_rows = DenseIndex.exact_rows
    monkeypatch.setattr(DenseIndex, "exact_rows", lambda *a, **k: reads.append(1) or exact_rows(*a, **k))

    from .test_engine_mechanics import tied_values

    exact, _half, topics = large_tables
    rng = np.random.default_rng(40)
    tie = rng.permutation(LARGE_TOOLS)
    options = RankingOptions(fusion=fusion, intent=False)
    error = 0.03  # wider than the int8 bound (~0.011), so that many tools are within it of each threshold
    checked = 0
    for visible_share in (1.0, 0.5):
        visible = rng.random(LARGE_TOOLS) < visible_share
        rows = np.flatnonzero(visible)
        for vectors in large_requests(topics)[:6]:
            sparse = [
                SparseScores(np.where(visible, tied_values(rng, LARGE_TOOLS), 0.0), rng.random(LARGE_TOOLS), ("t",))
                for _ in vectors
            ]
            expected, _, _ = ranked(sparse, [exact.score(v) for v in vectors], rows, options, tie)
            for strategy in ("straddle", "random"):
                dense = []
                for vector in vectors:
                    sims = exact.score(vector).sims
                    if strategy == "straddle":  # the middle of the top tools' band: down above it, up below
                        signs = np.where(sims > np.sort(sims)[-40], -1, 1)
                    else:
                        signs = rng.choice([-1, 1], len(sims))
                    dense.append(adversarial(exact, vector, error, signs))
                rounds.clear()
                reads.clear()
                found, _, _ = ranked(sparse, dense, rows, options, tie)
                assert len(reads) == sum(1 for changed in rounds if changed)
                # Convex and dense: one round, the pass after it the last (it names no row, so it does not ask).
                # RRF: a tool of a BM25 head may join the candidates once the dense heads are exact (a round more).
                assert rounds[0] > 0 and (rounds == rounds[:1] if fusion != "rrf" else rounds[-1] == 0)
                assert [{k: v for k, v in asdict(c).items() if k != "dense_rank"} for c in found.candidates] == [
                    {k: v for k, v in asdict(c).items() if k != "dense_rank"} for c in expected.candidates
                ]
                assert (found.confidence, found.cut, found.peak, found.spread) == (
                    expected.confidence,
                    expected.cut,
                    expected.peak,
                    expected.spread,
                )
                checked += int(not all(d.exact.all() for d in dense))
    assert checked  # the answers came from partly re-scored tables, not from re-scoring every tool


def test_rows_read_back_from_the_spill_file_are_its_rows_mapped_only_within_the_budget(monkeypatch):
    """The float32 rows a re-score reads are the file's rows, also after rows are appended (an update): read from
    a mapping of the file while it is within ``_MAPPED_BUDGET``, with pread once it has grown past it (a larger
    file's mapping would end up resident whole), the mapping then let go."""
    monkeypatch.setattr(dense_module, "_MAPPED_BUDGET", 3000 * 384 * 4)
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((4000, 384)).astype(np.float32)
    spill = _Spill(384, None)
    out = np.zeros((8, 384), np.float32)
    for size in (1000, 3000, 4000):  # mapped, mapped again (appended rows), past the budget
        spill.append([rows[spill.rows : size]])
        for _ in range(50):
            firsts = np.sort(rng.choice(size - 3, 2, replace=False))
            lengths = rng.integers(1, 4, 2)
            spill.read(firsts, lengths, out)
            expected = np.concatenate(
                [rows[first : first + count] for first, count in zip(firsts, lengths, strict=True)]
            )
            np.testing.assert_array_equal(out[: len(expected)], expected)
        mapped = len(spill._mapped) if spill._mapped is not None else None
        assert mapped == (size if size <= 3000 else None)


def _huge_pages_collapse() -> bool:
    """Whether this kernel backs a range with transparent huge pages on request (MADV_COLLAPSE, Linux 6.1+)."""
    import mmap

    try:
        probe = mmap.mmap(-1, 6 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # one 2 MB-aligned range at least
        probe.write(b"x" * len(probe))
        probe.madvise(mmap.MADV_HUGEPAGE)
        probe.madvise(dense_module._MADV_COLLAPSE)
    except (OSError, AttributeError, ValueError):
        return False
    probe.close()
    return True


# Run in a process of its own: builds a 6,000-tool int8 table and prints the kB of 2 MB pages backing the anonymous
# mappings its build left (ONNX Runtime's packed copy of the table).
_PACKED_TABLE_PAGES = """
import numpy as np
from search.engine import dense

rng = np.random.default_rng(3)
per_doc = [(v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
           for v in rng.standard_normal((6000, 2, 384))]
before = dense._anonymous_regions()
table = dense.DenseIndex(per_doc, [("document", "summary")] * 6000, [("", "")] * 6000, quantized=True)
made = {f"{a:x}-{b:x}" for a, b in dense._anonymous_regions() - before if b - a >= 12000 * 384}
huge, inside = 0, False
for line in open("/proc/self/smaps"):
    if line[0] in "0123456789abcdef" and "-" in line.split()[0]:
        inside = line.split()[0] in made
    elif inside and line.startswith("AnonHugePages:"):
        huge += int(line.split()[1])
scores = table.score(per_doc[7][1])
assert abs(scores.scores[7] - 1.0) <= scores.error  # the table answers as before: tool 7's own vector is closest
print(huge)
"""


def test_the_packed_int8_table_is_on_huge_pages():
    """Every scan reads ONNX Runtime's whole packed copy of the table: on 4 KB pages it took ~40% longer at 100,000
    tools. Where the kernel can back a range with 2 MB pages, the copy made with the session is. glibc maps every
    allocation past its threshold (at most 32 MB: an int8 table of ~85,000 vectors) on its own; the process here
    sets the threshold low, so that a small table is mapped as a large one is."""
    if not _huge_pages_collapse():
        pytest.skip("this kernel backs no range with transparent huge pages on request")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(1 << 20)}
    done = subprocess.run(
        [sys.executable, "-c", _PACKED_TABLE_PAGES], cwd=root, env=env, capture_output=True, text=True, check=True
    )
    assert int(done.stdout.split()[-1]) >= 2048  # kB: one 2 MB page at least
