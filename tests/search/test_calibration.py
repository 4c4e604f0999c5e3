"""Abstention evidence: a request's best tool must stand out from the rest, over the visible tools only."""

import numpy as np
import pytest

from search.engine.dense import DenseIndex
from search.engine.intent import tool_operation
from search.engine.ranking import Calibration, Confidence, RankingOptions, answer_confidence, rank, score_branches
from search.engine.sparse import SparseIndex, weighted_tokens
from search.text import mostly_foreign_latin, mostly_non_latin

DIM = 128  # one orthogonal direction per tool: up to 127 tools


def _unit(vector: np.ndarray) -> np.ndarray:
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def _catalog(cosines: list[float]) -> tuple[SparseIndex, DenseIndex, np.ndarray]:
    """Tools whose single vector has exactly the given cosine to the returned query vector."""
    query = np.zeros(DIM, np.float32)
    query[0] = 1.0
    vectors = []
    for i, cosine in enumerate(cosines):
        v = np.zeros(DIM, np.float32)
        v[0], v[i + 1] = cosine, np.sqrt(1 - cosine**2)  # orthogonal remainders: cosines are exact
        vectors.append(v[None, :])
    names = [f"tool{i}" for i in range(len(cosines))]
    sparse = SparseIndex([weighted_tokens({"name": n}, {"name": 1}) for n in names])
    dense = DenseIndex(vectors, [("document",)] * len(cosines), [(n,) for n in names])
    return sparse, dense, query


def _rank(cosines: list[float], visible: np.ndarray | None = None):
    sparse, dense, query = _catalog(cosines)
    visible = np.ones(len(cosines), bool) if visible is None else visible
    branches = score_branches(sparse, dense, "unrelated words", query, visible)
    return rank(
        branches,
        query="unrelated words",
        top_k=5,
        options=RankingOptions(),
        tie_keys=np.arange(len(cosines)),
        query_vector=query,
    )


def test_peak_is_the_best_cosine_above_the_twentieth():
    calibration = Calibration()
    cosines = np.linspace(0.6, 0.01, 40)
    assert np.isclose(calibration.peak(cosines), cosines[0] - cosines[19])
    assert np.isclose(calibration.peak(np.array([0.5, 0.2, 0.1])), 0.4)  # fewer tools: down to the last
    assert calibration.peak(None) == 0.0 and calibration.peak(np.zeros(0)) == 0.0


def test_a_modest_match_that_stands_out_is_high_a_flat_one_low_an_unrelated_one_withheld():
    best = 0.45  # a modest cosine, typical of short or human-written requests
    standing_out = _rank([best] + [0.08] * 30)
    flat = _rank([best] + [0.41] * 30)
    unrelated = _rank([0.12] + [0.1] * 30)
    assert standing_out.confidence is Confidence.HIGH and standing_out.kept[0].row == 0
    assert flat.confidence is Confidence.LOW and flat.kept[0].row == 0  # served, marked low
    assert unrelated.confidence is Confidence.NONE and unrelated.abstained and unrelated.kept == []


def test_the_one_confidence_rule():
    options = RankingOptions(withhold_threshold=0.2, withhold_peak=0.1, confidence_threshold=0.5)
    for flat in (0.05, None):  # no tool stands out, or too few tools to tell: the best score alone decides
        assert [answer_confidence(best, flat, options) for best in (0.0, 0.19, 0.2, 0.49, 0.5, 1.0)] == [
            Confidence.NONE,
            Confidence.NONE,
            Confidence.LOW,
            Confidence.LOW,
            Confidence.HIGH,
            Confidence.HIGH,
        ]
    # A weak best that stands out from the rest is served, as low; withheld only when both say nothing fits.
    assert [answer_confidence(0.1, peak, options) for peak in (0.0, 0.09, 0.1, 0.3)] == [
        Confidence.NONE,
        Confidence.NONE,
        Confidence.LOW,
        Confidence.LOW,
    ]


def test_high_needs_the_first_tools_own_evidence():
    # A tool standing far above every other (a small catalog's peak) with a modest cosine of its own and no word
    # shared: its calibrated score clears the confidence threshold on the peak, its own evidence does not.
    lifted = _rank([0.34] + [0.0] * 30)
    assert lifted.candidates[0].calibrated >= RankingOptions().confidence_threshold
    assert lifted.candidates[0].evidence == pytest.approx(0.34)
    assert lifted.confidence is Confidence.LOW and lifted.kept[0].row == 0  # served first, marked low
    options = RankingOptions(confidence_evidence=0.4)
    assert answer_confidence(0.9, 0.3, options, first_evidence=0.39) is Confidence.LOW
    assert answer_confidence(0.9, 0.3, options, first_evidence=0.4) is Confidence.HIGH
    assert answer_confidence(0.9, 0.3, options) is Confidence.HIGH  # no dense branch: the best score decides


def test_a_first_tool_the_ranking_has_not_chosen_over_the_next_is_not_high():
    # Two tools as close to the request (cosines .80 and .795, the rest far below): the first's fused lead over the
    # second is under ``confidence_lead``, so the answer is low, the ranking unchanged; a clear lead stays high.
    lead = RankingOptions().confidence_lead
    tied = _rank([0.8, 0.795] + [0.1] * 30)
    assert [c.row for c in tied.kept[:2]] == [0, 1] and tied.candidates[0].score - tied.candidates[1].score < lead
    assert tied.candidates[0].calibrated >= RankingOptions().confidence_threshold
    assert tied.confidence is Confidence.LOW and not tied.abstained
    ahead = _rank([0.8, 0.77] + [0.1] * 30)
    assert ahead.candidates[0].score - ahead.candidates[1].score >= lead
    assert ahead.confidence is Confidence.HIGH
    # A hidden rival is no rival: the answer is the one of a catalog without it.
    hidden = _rank([0.8, 0.795] + [0.1] * 30, np.array([True, False] + [True] * 30))
    alone = _rank([0.8] + [0.1] * 30)
    assert hidden.confidence is alone.confidence is Confidence.HIGH
    assert [(c.row, c.calibrated) for c in hidden.kept] == [(0, alone.kept[0].calibrated)] + [
        (c.row + 1, c.calibrated) for c in alone.kept[1:]
    ]


def _first_tool_named(name: str, query: str) -> Confidence:
    """The confidence of ``query``'s answer over 31 tools: one named ``name`` (its cosine .36, above the rest's 0, a
    small catalog's peak), one ``read_files``, the others ``tool<i>``."""
    sparse, dense, vector = _catalog([0.36] + [0.0] * 30)
    names = [name, "read_files"] + [f"tool{i}" for i in range(2, 31)]
    sparse = SparseIndex([weighted_tokens({"name": n}, {"name": 1}) for n in names])
    branches = score_branches(sparse, dense, query, vector, np.ones(31, bool))
    ranking = rank(branches, query=query, top_k=5, options=RankingOptions(), tie_keys=np.arange(31))
    assert ranking.kept[0].row == 0 and ranking.candidates[0].calibrated >= RankingOptions().confidence_threshold
    return ranking.confidence


def test_a_tool_sharing_only_the_requests_verb_is_not_high():
    # "list files in a directory" on the demo: git_branch ("List Git branches"), a cosine of .36 and the verb "list"
    # its only word in common, was served high on the verb's coverage while other tools have the words "files" and
    # "directory". The verb says what to do, not on what.
    assert _first_tool_named("list_branches", "list files") is Confidence.LOW
    assert _first_tool_named("list_files", "list files") is Confidence.HIGH  # the object matched: high
    assert _first_tool_named("branch_files", "list files") is Confidence.HIGH  # the object alone: high
    # An object no tool has words for (a name, a fact): the verb is all a tool can share, and it counts.
    assert _first_tool_named("list_branches", "list carol") is Confidence.HIGH


def _first_a_write(query: str, reads: list[int], servers: list[int], hidden: int = -1, second: float = 0.58):
    """The confidence of ``query``'s answer over 31 tools, tool 0 (cosine .6) first and tool 1 (``second``) next,
    the rest unrelated; ``reads``: the tools governance classes as reads; ``servers``: tools 0 and 1's servers
    (the rest on others); tool ``hidden`` not visible."""
    sparse, dense, vector = _catalog([0.6, second] + [0.0] * 29)
    branches = score_branches(sparse, dense, query, vector, np.arange(31) != hidden)
    servers_of = np.asarray([*servers, *range(2, 31)])
    return _first_of_31(branches, query, vector, servers=servers_of, read_only=np.isin(np.arange(31), reads))


def _first_of_31(branches, query: str, vector: np.ndarray, **rows: np.ndarray) -> Confidence:
    """The confidence of the answer over ``_first_a_write``'s or ``_first_takes``' 31 tools (tool 0 first), with
    ``rows``: per-row columns for ``rank``."""
    ranking = rank(
        branches, query=query, top_k=5, options=RankingOptions(), tie_keys=np.arange(31), query_vector=vector, **rows
    )
    assert ranking.kept[0].row == 0
    return ranking.confidence


def _first_named_with_its_operation(name: str, query: str) -> Confidence:
    """``_first_tool_named`` with each tool's operation read from its name (``intent.tool_operation``)."""
    sparse, dense, vector = _catalog([0.36] + [0.0] * 30)
    names = [name, "read_files"] + [f"tool{i}" for i in range(2, 31)]
    sparse = SparseIndex([weighted_tokens({"name": n}, {"name": 1}) for n in names])
    branches = score_branches(sparse, dense, query, vector, np.ones(31, bool))
    ops = [tool_operation(n, "") for n in names]
    return _first_of_31(branches, query, vector, tool_ops=ops)


def test_a_deleting_tool_sharing_only_the_requests_verb_is_not_high():
    # "delete my account" on the demo: memory::delete_entities, high, on the verb "delete" (cosine .32) where no
    # tool knows accounts. What a tool deletes must already be its kind of thing; the verb does not show that.
    assert _first_named_with_its_operation("delete_entities", "delete account") is Confidence.LOW
    assert _first_named_with_its_operation("delete_entities", "delete entities account") is Confidence.HIGH
    # A create's object is new (a name, a fact): the verb is all it can share, and it counts ("remember that
    # Carol prefers tea").
    assert _first_named_with_its_operation("add_entities", "add account") is Confidence.HIGH


def test_a_read_request_led_by_a_write_with_a_read_of_its_server_close_behind_is_not_high():
    # "list all entities in memory" on the demo: memory::delete_entities first, high, read_graph and open_nodes
    # (governance's reads: readOnlyHint) close behind. An agent trusts high and deletes.
    assert _first_a_write("list entities", reads=[1], servers=[0, 0]) is Confidence.LOW
    assert _first_a_write("list entities", reads=[0, 1], servers=[0, 0]) is Confidence.HIGH  # a read leads
    assert _first_a_write("list entities", reads=[1], servers=[0, 1]) is Confidence.HIGH  # another server's read
    assert _first_a_write("list entities", reads=[], servers=[0, 0]) is Confidence.HIGH  # no read known
    assert _first_a_write("delete entities", reads=[1], servers=[0, 0]) is Confidence.HIGH  # a write asked for
    assert _first_a_write("entities", reads=[1], servers=[0, 0]) is Confidence.HIGH  # no operation named
    assert _first_a_write("list entities", reads=[1], servers=[0, 0], second=0.1) is Confidence.HIGH  # far below
    # A read the caller may not see changes nothing the caller sees.
    assert _first_a_write("list entities", reads=[1], servers=[0, 0], hidden=1) is Confidence.HIGH


def test_a_change_asked_of_a_tool_governance_classes_as_a_read_is_not_high():
    # "erase my history" on the demo: git::git_log first, high; "edit the commit message": git::git_show (both
    # readOnlyHint). A read changes nothing: no visible tool does what was asked, and an agent trusts high.
    assert _first_a_write("delete entities", reads=[0], servers=[0, 1]) is Confidence.LOW
    assert _first_a_write("edit entities", reads=[0], servers=[0, 1]) is Confidence.LOW
    assert _first_a_write("delete entities", reads=[], servers=[0, 1]) is Confidence.HIGH  # not known to read only
    assert _first_a_write("delete entities", reads=[1], servers=[0, 1]) is Confidence.HIGH  # the read is second
    # A read computes or makes what a create asks for ("add 3 and 4": get-sum), and a read may be asked for.
    assert _first_a_write("add entities", reads=[0], servers=[0, 1]) is Confidence.HIGH
    assert _first_a_write("list entities", reads=[0], servers=[0, 1]) is Confidence.HIGH
    assert _first_a_write("delete entities then list them", reads=[0], servers=[0, 1]) is Confidence.HIGH
    assert _first_a_write("entities", reads=[0], servers=[0, 1]) is Confidence.HIGH  # no operation named


def _first_takes(
    query: str,
    inputs: bool,
    second: str = "tool1",
    hidden: bool = False,
    every_tool_without: bool = False,
    first: str = "read_graph",
) -> Confidence:
    """The confidence of ``query``'s answer over 31 tools, tool 0 ``first`` first (cosine .6, taking an input or
    none), tool 1 named ``second`` (hidden or not), the rest unrelated."""
    sparse, dense, vector = _catalog([0.6, 0.1] + [0.0] * 29)
    names = [first, second] + [f"tool{i}" for i in range(2, 31)]
    sparse = SparseIndex([weighted_tokens({"name": n}, {"name": 1}) for n in names])
    branches = score_branches(sparse, dense, query, vector, np.arange(31) != (1 if hidden else -1))
    takes_input = np.zeros(31, bool) if every_tool_without else np.arange(31) != (-1 if inputs else 0)
    return _first_of_31(branches, query, vector, takes_input=takes_input)


def test_a_tool_taking_no_input_is_not_high_for_a_thing_no_tool_knows():
    # "read README.md" on the demo: memory::read_graph (no input, the whole knowledge graph) alone, high, on the
    # verb "read"; no tool has the words "readme" or "md". It cannot be pointed at the file: an agent trusts high
    # and reads the graph.
    assert _first_takes("read readme md", inputs=False) is Confidence.LOW
    assert _first_takes("read readme md", inputs=True) is Confidence.HIGH  # it takes what the request names
    none_do = _first_takes("read readme md", inputs=False, every_tool_without=True)
    assert none_do is Confidence.HIGH  # no tool declares an input (a catalog without schemas): nothing to tell
    assert _first_takes("read graph readme", inputs=False) is Confidence.HIGH  # it shares what the request acts on
    assert _first_takes("read", inputs=False) is Confidence.HIGH  # the request names nothing unknown
    assert _first_takes("read readme", inputs=False, second="open_readme") is Confidence.HIGH  # the catalog knows it
    # A tool the caller may not see changes nothing the caller sees: its words make nothing known.
    assert _first_takes("read readme", inputs=False, second="open_readme", hidden=True) is Confidence.LOW


def test_a_tool_sharing_only_a_part_of_a_compound_no_tool_knows_is_not_high():
    # "list my GitHub issues" on the demo: git::git_branch (it takes the repository's path), high, on "list" and
    # the "git" that "github" splits into; no tool knows GitHub or issues.
    first = "list_git_branches"
    assert _first_takes("list GitHub issues", inputs=True, first=first) is Confidence.LOW
    assert _first_takes("list git issues", inputs=True, first=first) is Confidence.HIGH  # it names Git itself
    assert _first_takes("list GitHub", inputs=True, first=first, second="github") is Confidence.HIGH  # known whole
    # A tool the caller may not see changes nothing the caller sees: its words make nothing known.
    assert _first_takes("list GitHub", inputs=True, first=first, second="github", hidden=True) is Confidence.LOW


def _weak_options() -> RankingOptions:
    # Thresholds such that the catalogs below fall on either side of both conditions.
    return RankingOptions(withhold_threshold=0.35, withhold_peak=0.12)  # not the defaults: both sides reachable


def _rank_with(cosines: list[float], options: RankingOptions, visible: np.ndarray | None = None):
    sparse, dense, query = _catalog(cosines)
    visible = np.ones(len(cosines), bool) if visible is None else visible
    branches = score_branches(sparse, dense, "unrelated words", query, visible)
    return rank(
        branches, query="unrelated words", top_k=5, options=options, tie_keys=np.arange(len(cosines)),
        query_vector=query,
    )  # fmt: skip


def test_a_weak_match_that_stands_out_is_served_low_a_weak_flat_one_withheld():
    # The same weak best cosine (its calibrated score under the withhold threshold in both): served as low
    # when it stands out from the other tools, withheld when they are about as close.
    standing_out = _rank_with([0.3] + [0.1] * 30, _weak_options())
    flat = _rank_with([0.3] + [0.25] * 30, _weak_options())
    assert standing_out.kept[0].calibrated < 0.35 and flat.kept == [] and flat.candidates[0].calibrated < 0.35
    assert standing_out.peak >= 0.12 > flat.peak
    assert standing_out.confidence is Confidence.LOW and standing_out.kept[0].row == 0
    assert flat.confidence is Confidence.NONE and flat.abstained


def test_hidden_tools_move_neither_condition():
    # Hidden tools as close as the best would flatten the peak (and withhold the answer) if they counted;
    # hidden tools far below would make a flat answer stand out. Neither may change what the caller gets.
    weak = [0.3] + [0.1] * 30
    hidden_close = np.array([True] * 31 + [False] * 25)
    with_hidden = _rank_with(weak + [0.29] * 25, _weak_options(), hidden_close)
    alone = _rank_with(weak, _weak_options())
    assert with_hidden.confidence is alone.confidence is Confidence.LOW
    assert with_hidden.peak == alone.peak
    assert [(c.row, c.calibrated) for c in with_hidden.kept] == [(c.row, c.calibrated) for c in alone.kept]
    flat = [0.3] + [0.25] * 10  # fewer than 20 visible tools: the peak is down to the last one
    hidden_far = np.array([True] * 11 + [False] * 25)
    assert _rank_with(flat + [0.0] * 25, _weak_options(), hidden_far).confidence is Confidence.NONE
    assert _rank_with(flat, _weak_options()).confidence is Confidence.NONE


def test_hidden_tools_do_not_move_the_peak():
    # A hidden near-duplicate of the best tool would flatten the peak; it must change nothing.
    cosines = [0.42] + [0.08] * 30 + [0.41] * 20
    visible = np.array([True] * 31 + [False] * 20)
    with_hidden = _rank(cosines, visible)
    without = _rank(cosines[:31])
    assert not with_hidden.abstained
    assert [(c.row, c.calibrated) for c in with_hidden.kept] == [(c.row, c.calibrated) for c in without.kept]


def test_spread_is_the_tenth_best_cosine_above_the_fiftieth():
    calibration = Calibration()
    head = np.linspace(0.6, 0.01, 64)
    assert np.isclose(calibration.spread_of_head(head), head[9] - head[49])
    assert calibration.spread_of_head(head[:49]) is None  # fewer visible tools than its depth: not measured


def _domain(flat: float, head: float) -> list[float]:
    """60 tools: none stands out alone (the best about as close as the 20th), the first 25 well above the rest
    when ``head`` is high: a request in the catalog's domain that no one tool matches well."""
    return [0.3] + [head] * 24 + [flat] * 35


def test_a_weak_flat_match_with_a_head_above_the_bulk_is_served_low_without_one_withheld():
    options = RankingOptions(withhold_threshold=0.35, withhold_peak=0.12, withhold_spread=0.065)
    in_domain = _rank_with(_domain(flat=0.15, head=0.28), options)
    off_topic = _rank_with(_domain(flat=0.25, head=0.28), options)
    for ranking in (in_domain, off_topic):  # the same weak best, and no tool stands out alone
        assert ranking.candidates[0].calibrated < 0.35 and ranking.peak < 0.12
    assert in_domain.spread >= 0.065 > off_topic.spread
    assert in_domain.confidence is Confidence.LOW and in_domain.kept[0].row == 0
    assert off_topic.confidence is Confidence.NONE and off_topic.kept == []


def test_the_spread_in_the_one_confidence_rule():
    options = RankingOptions(
        withhold_threshold=0.2, withhold_peak=0.1, withhold_spread=0.05, withhold_flat_threshold=0.25
    )
    assert [answer_confidence(0.1, 0.05, options, spread) for spread in (None, 0.0, 0.049, 0.05, 0.2)] == [
        Confidence.NONE,
        Confidence.NONE,
        Confidence.NONE,
        Confidence.LOW,
        Confidence.LOW,
    ]
    # A measured flat spread withholds up to the flat threshold; unmeasured (fewer than 50 tools), the base one.
    assert answer_confidence(0.22, 0.05, options, 0.0) is Confidence.NONE
    assert answer_confidence(0.22, 0.05, options, None) is Confidence.LOW
    assert answer_confidence(0.25, 0.05, options, 0.0) is Confidence.LOW


def test_hidden_tools_do_not_move_the_spread():
    # Hidden tools between the head and the bulk would flatten the spread (and withhold the answer) if they
    # counted; with them hidden the answer is the one of a catalog without them.
    options = RankingOptions(withhold_threshold=0.35, withhold_peak=0.12, withhold_spread=0.065)
    cosines = _domain(flat=0.15, head=0.28)
    visible = np.array([True] * 60 + [False] * 40)
    with_hidden = _rank_with(cosines + [0.27] * 40, options, visible)
    alone = _rank_with(cosines, options)
    assert with_hidden.spread == alone.spread and with_hidden.confidence is alone.confidence is Confidence.LOW
    assert [(c.row, c.calibrated) for c in with_hidden.kept] == [(c.row, c.calibrated) for c in alone.kept]
    assert _rank_with(cosines + [0.27] * 40, options).confidence is Confidence.NONE  # visible, they would


def _rank_text(cosines: list[float], query_text: str):
    sparse, dense, query = _catalog(cosines)
    branches = score_branches(sparse, dense, query_text, query, np.ones(len(cosines), bool))
    return rank(
        branches, query=query_text, top_k=5, options=RankingOptions(), tie_keys=np.arange(len(cosines)),
        query_vector=query,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("query", "served"),
    [
        ("查询 tool3 的运行状态", True),  # the model cannot read it: low, not withheld
        ("查询天气预报", True),  # nor this one, sharing no word with any tool (BM25 cannot read it either)
        ("unrelated tool3", False),  # read by the model, which says nothing fits: withheld as before
        ("réserve une table à Paris pour ce soir", True),  # French: the English-only model cannot read it either
        ("busca los archivos de mi carpeta", True),  # Spanish
        ("unrelated tool3 in Los Angeles", False),  # an English request naming a place: read, withheld
    ],
)
def test_a_request_the_model_cannot_read_is_not_withheld_on_its_evidence_alone(query, served):
    ranking = _rank_text([0.12] + [0.1] * 30, query)
    assert ranking.confidence is (Confidence.LOW if served else Confidence.NONE)
    assert bool(ranking.kept) is served


def test_mostly_non_latin():
    assert mostly_non_latin("帮我查一下 GitHub 上的仓库") and mostly_non_latin("найди мой файл")
    assert not mostly_non_latin("réserve une table à Paris") and not mostly_non_latin("find my file 文件")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("find my file", False),  # ASCII: answered without looking at the letters
        ("", False),
        ("12345 !?", False),  # no letters at all
        ("réserve une table à Paris", False),  # accented Latin
        ("Ärger über Öl", False),
        ("find my file 文件", False),  # mixed, mostly Latin
        ("查询这个文件 file", True),  # mixed, mostly not
        ("GitHub 仓库 查询 运行状态", True),
        ("найди мой файл", True),  # Cyrillic
        ("ابحث عن ملف", True),  # Arabic
        ("ファイルを探す", True),  # Japanese
    ],
)
def test_mostly_non_latin_on_latin_mixed_and_non_latin_text(text, expected):
    assert mostly_non_latin(text) is expected


@pytest.mark.parametrize(
    "text",
    [
        "réserve une table à Paris",
        "Quels sont les fichiers dans mon dossier ?",
        "¿Cuántas ramas tiene el repositorio?",
        "zeige mir die Dateien in meinem Ordner",
        "mostre as mensagens não lidas do meu email",
    ],
)
def test_mostly_foreign_latin_reads_other_latin_languages(text):
    assert mostly_foreign_latin(text)


@pytest.mark.parametrize(
    "text",
    [
        "Find me a budget-friendly hotel in Los Angeles.",
        "Retrieve details about the place named 'Café del Mar' in Barcelona",
        "Fetch AI-related news from CNN and BBC",
        "I want an AI ad generator, also per user, non-blocking",
    ],
)
def test_mostly_foreign_latin_leaves_english_requests(text):
    assert not mostly_foreign_latin(text)


def test_a_small_catalog_serves_a_weak_real_match_low_and_withholds_nothing_related():
    # Seven visible tools (one server): no peak or spread is read, the best calibrated score alone decides.
    weak_real = _rank([0.35] + [0.1] * 6)
    unrelated = _rank([0.12] + [0.1] * 6)
    assert weak_real.peak is None and weak_real.spread is None
    assert weak_real.confidence is Confidence.LOW and weak_real.kept[0].row == 0
    assert unrelated.confidence is Confidence.NONE and unrelated.kept == []
    # Hidden tools, as close as the best or far below it, move neither answer.
    visible = np.array([True] * 7 + [False] * 40)
    for hidden in ([0.34] * 40, [0.0] * 40):
        for cosines, alone in (([0.35] + [0.1] * 6, weak_real), ([0.12] + [0.1] * 6, unrelated)):
            ranking = _rank(cosines + hidden, visible)
            assert ranking.confidence is alone.confidence
            assert [(c.row, c.calibrated) for c in ranking.kept] == [(c.row, c.calibrated) for c in alone.kept]


def _two_step_catalog(whole: list[float], part: list[float]) -> tuple[SparseIndex, DenseIndex, np.ndarray, np.ndarray]:
    """Tools whose single vector has exactly the given cosines to the returned request vector (``whole``) and to
    the returned vector of one of its parts (``part``)."""
    request, step = np.zeros(DIM, np.float32), np.zeros(DIM, np.float32)
    request[0], step[1] = 1.0, 1.0
    vectors = []
    for i, (a, b) in enumerate(zip(whole, part, strict=True)):
        v = np.zeros(DIM, np.float32)
        v[0], v[1], v[i + 2] = a, b, np.sqrt(1 - a**2 - b**2)  # orthogonal remainders: cosines are exact
        vectors.append(v[None, :])
    names = [f"tool{i}" for i in range(len(whole))]
    sparse = SparseIndex([weighted_tokens({"name": n}, {"name": 1}) for n in names])
    dense = DenseIndex(vectors, [("document",)] * len(whole), [(n,) for n in names])
    return sparse, dense, request, step


def _rank_two_steps(whole: list[float], part: list[float], visible: np.ndarray | None = None):
    sparse, dense, request, step = _two_step_catalog(whole, part)
    visible = np.ones(len(whole), bool) if visible is None else visible
    return rank(
        score_branches(sparse, dense, "unrelated words", request, visible),
        query="unrelated words",
        top_k=5,
        options=RankingOptions(),
        tie_keys=np.arange(len(whole)),
        query_vector=request,
        clauses=[score_branches(sparse, dense, "other words", step, visible)],
    )


FLAT_WHOLE = [0.3] + [0.25] * 59  # the whole request: a weak best, nothing stands out alone or as a group


def test_a_multi_step_request_with_one_part_in_the_catalogs_domain_is_served_low():
    # The whole request's vector is flat over the 60 tools; one of its parts has 25 related tools well above
    # the other 35 (a head): that part's spread keeps the answer served, as low. Both flat: withheld.
    in_domain = _rank_two_steps(FLAT_WHOLE, [0.28] * 25 + [0.15] * 35)
    off_topic = _rank_two_steps(FLAT_WHOLE, [0.28] * 25 + [0.26] * 35)
    alone = _rank_with(FLAT_WHOLE, RankingOptions())  # the same request without its parts
    for ranking in (in_domain, off_topic, alone):  # the same weak best, far under the flat threshold
        assert max(c.calibrated for c in ranking.candidates) < 0.3 and ranking.peak < 0.145
    assert alone.spread < 0.065 and alone.confidence is Confidence.NONE
    assert in_domain.spread >= 0.065 > off_topic.spread
    assert in_domain.confidence is Confidence.LOW and in_domain.kept
    assert off_topic.confidence is Confidence.NONE and off_topic.kept == []


def test_hidden_tools_do_not_move_a_parts_spread():
    # Hidden tools between the part's head and its bulk would flatten its spread (and withhold the answer) if
    # they counted; hidden, the answer is the one of a catalog without them.
    part = [0.28] * 25 + [0.15] * 35
    visible = np.array([True] * 60 + [False] * 40)
    with_hidden = _rank_two_steps(FLAT_WHOLE + [0.25] * 40, part + [0.27] * 40, visible)
    without = _rank_two_steps(FLAT_WHOLE, part)
    assert with_hidden.spread == without.spread and with_hidden.confidence is without.confidence is Confidence.LOW
    assert [(c.row, c.calibrated) for c in with_hidden.kept] == [(c.row, c.calibrated) for c in without.kept]
    assert _rank_two_steps(FLAT_WHOLE + [0.25] * 40, part + [0.27] * 40).confidence is Confidence.NONE  # visible
