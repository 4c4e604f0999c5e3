"""scout_eval on a self-made catalog (hand-checked metrics) and on the public Apify set."""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from search.backends.ranked import ranking_options
from search.engine.ranking import Candidate, Confidence, Ranking, RankingOptions
from search.evaluation import (
    WITHHOLD_CURVE,
    EvalDataError,
    EvalQuery,
    Tally,
    evaluate,
    load_equivalence,
    score_query,
    score_served,
    widened,
    withhold_curve,
)

CATALOG = [
    {
        "id": "mail::send_email",
        "server": "mail",
        "name": "send_email",
        "description": "Send an email message.",
        "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
    },
    {
        "id": "files::read_file",
        "server": "files",
        "name": "read_file",
        "description": "Read a file from disk.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
    {
        "id": "files::write_file",
        "server": "files",
        "name": "write_file",
        "description": "Write a file to disk.",
        "inputSchema": {},
    },
    {
        "id": "weather::get_forecast",
        "server": "weather",
        "name": "get_forecast",
        "description": "Weather forecast for a city.",
        "inputSchema": {},
    },
]
QUERIES = [
    {"query": "send_email", "relevant_groups": [["mail::send_email"]], "match": "all", "subset": "names"},
    {"query": "read_file", "relevant_groups": [["files::read_file"]], "match": "all", "subset": "names"},
    {
        "query": "read_file then send_email",
        "relevant_groups": [["files::read_file"], ["mail::send_email"]],
        "match": "all",
        "subset": "steps",
    },
    {"query": "zzyzx qwfp", "relevant_groups": [], "match": "none", "subset": "none"},
    {"query": "gone", "relevant_groups": [["nowhere::missing"]], "match": "all", "subset": "names"},
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_metrics_by_hand():
    single = EvalQuery("q", [["a", "b"]], "any", "s", "src")
    tally = Tally()
    score_query(single, ["x", "b", "a"], abstained=False, tally=tally)  # first relevant at rank 2
    multi = EvalQuery("q", [["a"], ["c"], ["d"]], "all", "s", "src")
    score_query(multi, ["c", "x", "a"], abstained=True, tally=tally)  # 2 of 3 slots
    none = EvalQuery("q", [], "none", "s", "src")
    score_query(none, ["a"], abstained=True, tally=tally)
    summary = tally.summary()
    assert summary["hit@1"] == 0 and summary["hit@3"] == 1 and summary["mrr@10"] == 0.5
    assert summary["ndcg@10"] == pytest.approx(1 / 1.584962500721156)
    assert summary["slot_recall@10"] == pytest.approx(2 / 3) and summary["all_slots@10"] == 0
    assert summary["false_abstention"] == 0.5 and summary["abstention"] == 1.0


def _ranking(confidence: Confidence, cut: int) -> Ranking:
    candidates = [
        Candidate(row=i, score=1.0 - i / 10, calibrated=0.9, bm25_rank=None, dense_rank=None) for i in range(3)
    ]
    return Ranking(candidates, confidence, cut)


def test_served_figures_count_a_withheld_answer_as_a_miss():
    single = EvalQuery("q", [["a"]], "all", "s", "src")
    ids = ["a", "b", "c"]
    served, ranking = Tally(), Tally()
    score_served(single, _ranking(Confidence.NONE, 0), ids, served)  # withheld: a miss, though "a" ranks first
    score_query(single, ids, abstained=True, tally=ranking)
    score_served(single, _ranking(Confidence.LOW, 1), ids, served)  # served low: counts, and is counted as low
    score_served(single, _ranking(Confidence.HIGH, 2), ["b", "c", "a"], served)  # "a" was cut off
    summary = served.summary()
    assert ranking.summary()["hit@1"] == 1.0
    assert summary["hit@1"] == pytest.approx(1 / 3) and summary["hit@10"] == pytest.approx(1 / 3)
    assert summary["false_abstention"] == pytest.approx(1 / 3)
    assert summary["low_confidence"] == pytest.approx(1 / 3)


def test_served_figures_calibrate_the_confidence():
    # How many answers each confidence got, and Hit@1 / Hit@5 among those served high and among those served low.
    single = EvalQuery("q", [["a"]], "all", "s", "src")
    none = EvalQuery("q", [], "none", "s", "src")
    multi = EvalQuery("q", [["a"], ["b"]], "all", "s", "src")
    tally = Tally()
    score_served(single, _ranking(Confidence.HIGH, 3), ["a", "b", "c"], tally)  # high, right first
    score_served(single, _ranking(Confidence.HIGH, 3), ["b", "a", "c"], tally)  # high, right second
    score_served(none, _ranking(Confidence.HIGH, 3), ["a", "b", "c"], tally)  # high where no tool fits: a miss
    score_served(single, _ranking(Confidence.LOW, 3), ["a", "b", "c"], tally)  # low, right first
    score_served(multi, _ranking(Confidence.LOW, 3), ["a", "b", "c"], tally)  # multi-step: counted, no hit
    score_served(single, _ranking(Confidence.NONE, 0), ["a", "b", "c"], tally)  # withheld
    score_served(none, _ranking(Confidence.NONE, 0), ["a", "b", "c"], tally)
    summary = tally.summary()
    assert (summary["answers_high"], summary["answers_low"], summary["answers_withheld"]) == (3, 2, 2)
    assert summary["high_hit@1"] == pytest.approx(1 / 3) and summary["high_hit@5"] == pytest.approx(2 / 3)
    assert summary["low_hit@1"] == 1.0 and summary["low_hit@5"] == 1.0
    assert "withheld_hit@1" not in summary
    # Precision and recall of each label on the first tool: of the 3 served high, 1 is right first; of the 2
    # right first (the withheld one not served), 1 was served high and 1 low.
    assert summary["high_precision"] == pytest.approx(1 / 3) and summary["low_precision"] == 1.0
    assert summary["high_recall"] == 0.5 and summary["low_recall"] == 0.5
    assert "withheld_precision" not in summary and "withheld_recall" not in summary
    # The same among answerable requests alone, with each label's requests counted by kind.
    by_kind = {
        kind: tuple(summary[f"answers_{label}_{kind}"] for label in ("high", "low", "withheld"))
        for kind in ("single", "multi", "none")
    }
    assert by_kind == {"single": (2, 1, 1), "multi": (0, 1, 0), "none": (1, 0, 1)}
    assert summary["high_single_hit@1"] == 0.5 and summary["high_single_hit@5"] == 1.0  # the no-tool one left out
    assert summary["low_single_hit@1"] == 1.0 and summary["low_slot_recall@10"] == 1.0
    assert summary["withheld_ranked_hit@1"] == 1.0  # withheld, though the ranking had it first
    assert "high_slot_recall@10" not in summary and "withheld_single_hit@1" not in summary


def test_equivalence_sets_widen_each_slot(tmp_path):
    sets = write_jsonl(
        tmp_path / "equivalence.jsonl",
        [
            {"set_id": 1, "tools": ["a::send", "b::send"], "unresolved": ["gone::send"]},
            {"set_id": 2, "tools": ["b::send", "c::post"]},
        ],
    )
    equivalents = load_equivalence([sets])
    assert equivalents["a::send"] == {"a::send", "b::send"}  # not c::post: only what shares a set with it
    assert equivalents["b::send"] == {"a::send", "b::send", "c::post"}  # in both sets
    assert "gone::send" not in equivalents
    query = EvalQuery("q", [["a::send"], ["x::other"]], "all", "s", "src")
    assert widened(query, equivalents).groups == [["a::send", "b::send"], ["x::other"]]
    assert query.groups == [["a::send"], ["x::other"]]  # the strict query is left as it was
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"set_id": 1, "members": ["a::send"]}])
    with pytest.raises(EvalDataError, match="no list of 'tools'"):
        load_equivalence([bad])


def test_withhold_curve_by_hand():
    # (no_tool, best calibrated score): withheld at a threshold when the score is below it, as answered.
    curve = {p["threshold"]: p for p in withhold_curve([(False, 0.9), (False, 0.2), (True, 0.1), (True, 0.3)])}
    assert set(curve) == set(WITHHOLD_CURVE)
    assert curve[0.1] == {"threshold": 0.1, "false_withholding": 0.0, "no_tool_withheld": 0.0}  # 0.1 is not below
    assert curve[0.15] == {"threshold": 0.15, "false_withholding": 0.0, "no_tool_withheld": 0.5}
    assert curve[0.3] == {"threshold": 0.3, "false_withholding": 0.5, "no_tool_withheld": 0.5}
    assert curve[0.6] == {"threshold": 0.6, "false_withholding": 0.5, "no_tool_withheld": 1.0}
    only_answerable = withhold_curve([(False, 0.4)])
    assert all(p["no_tool_withheld"] is None for p in only_answerable)
    # A request whose best tool stands out (evaluate gives it an infinite score) is withheld at no threshold.
    assert all(p["false_withholding"] == 0.0 for p in withhold_curve([(False, math.inf)]))


@pytest.mark.slow
def test_eval_command_on_a_small_catalog(tmp_path, capsys, settings):
    settings.SCOUT_SEARCH_EVAL_CACHE_DIR = str(tmp_path / "cache")
    catalog = write_jsonl(tmp_path / "catalog-small.jsonl", CATALOG)
    queries = write_jsonl(tmp_path / "queries-small.jsonl", QUERIES)
    out = tmp_path / "report.json"
    call_command("scout_eval", "--catalog", str(catalog), "--queries", str(queries), "--json", str(out))
    report = json.loads(out.read_text())
    assert report["texts_encoded"] > 0 and (tmp_path / "cache").is_dir()
    assert report["tools"] == 4 and report["n_queries"] == 4 and report["dropped_queries"] == 1
    overall = report["groups"]["all"]
    assert overall["counts"] == {"single": 2, "multi": 1, "none": 1}
    for mode in ("bm25", "dense", "convex", "rrf"):
        assert overall[mode]["slot_recall@10"] == 1.0 and overall[mode]["all_slots@10"] == 1.0
    for mode in ("bm25", "convex", "rrf"):  # exact tool names: BM25 and both fusions put them first
        assert overall[mode]["hit@1"] == 1.0 and overall[mode]["mrr@10"] == 1.0
    assert overall["convex"]["abstention"] == 1.0 and overall["convex"]["false_abstention"] == 0.0
    assert set(report["groups"]) >= {"all", "small", "small/names", "small/steps", "small/none"}
    for mode in ("bm25", "dense", "convex", "rrf"):  # as served, beside the ranking, for every mode
        served = overall[mode]["served"]
        assert {"hit@1", "hit@5", "mrr@10", "slot_recall@10", "false_abstention", "low_confidence"} <= set(served)
        assert served["abstention"] == overall[mode]["abstention"]
        answers = served["answers_high"] + served["answers_low"] + served["answers_withheld"]
        assert answers == report["n_queries"] and served["answers_withheld"] >= 1  # the no-tool request
    assert overall["convex"]["served"]["hit@1"] == 1.0  # nothing withheld: served as ranked
    served_with = ranking_options("convex")  # the figures are for the options the gateway serves with
    for option in ("withhold_threshold", "withhold_peak", "withhold_spread", "withhold_flat_threshold"):
        assert report[option] == getattr(served_with, option)
    for option in ("confidence_threshold", "confidence_evidence", "confidence_lead", "name_share"):
        assert report[option] == getattr(served_with, option)
    table = capsys.readouterr().out
    assert "hybrid:convex" in table and "== small/names" in table and "served hit@5" in table
    assert "served high/low/withh." in table and "served high_hit@1" in table
    assert "served high_precision" in table and "served low_recall" in table
    assert "withhold below" not in table  # the curve is printed only when asked for
    # Both names served high and right first: high is precise and holds every right first tool.
    for mode in ("bm25", "dense", "convex", "rrf"):
        served = overall[mode]["served"]
        assert (served["high_precision"], served["high_recall"], served["low_recall"]) == (1.0, 1.0, 0.0)
        assert "low_precision" not in served  # nothing served low

    # Every answer low: the same first tools, so the same hit figures, now all right first tools served low.
    call_command(
        "scout_eval", "--catalog", str(catalog), "--queries", str(queries), "--json", str(out),
        "--confidence-threshold", "1.01",
    )  # fmt: skip
    low = json.loads(out.read_text())["groups"]["all"]["convex"]["served"]
    assert low["hit@1"] == overall["convex"]["served"]["hit@1"] and low["answers_high"] == 0
    assert (low["low_precision"], low["low_recall"], low["high_recall"]) == (1.0, 1.0, 0.0)
    assert "high_precision" not in low

    # The curve at each threshold is what a run with that threshold withholds.
    for threshold in (0.3, 0.6):
        call_command(
            "scout_eval", "--catalog", str(catalog), "--queries", str(queries), "--json", str(out),
            "--withhold-threshold", str(threshold), "--withhold-curve",
        )  # fmt: skip
        at = json.loads(out.read_text())["groups"]["all"]
        for mode in ("bm25", "convex"):
            point = next(p for p in overall[mode]["withhold_curve"] if p["threshold"] == threshold)
            assert point["false_withholding"] == at[mode]["served"]["false_abstention"]
            assert point["no_tool_withheld"] == at[mode]["served"]["abstention"]
    assert "withhold below" in capsys.readouterr().out

    # Every answer withheld: the ranking figures stay, the served ones count each withheld answer as a miss.
    call_command(
        "scout_eval", "--catalog", str(catalog), "--queries", str(queries), "--json", str(out),
        "--withhold-threshold", "1.01",
    )  # fmt: skip
    withheld = json.loads(out.read_text())["groups"]["all"]["convex"]
    assert withheld["hit@1"] == 1.0 and withheld["slot_recall@10"] == 1.0
    assert withheld["served"]["hit@1"] == 0.0 and withheld["served"]["slot_recall@10"] == 0.0
    assert withheld["served"]["false_abstention"] == 1.0 and withheld["served"]["low_confidence"] == 0.0

    call_command(
        "scout_eval",
        "--catalog",
        str(catalog),
        "--queries",
        str(queries),
        "--json",
        str(out),
        "--fusion",
        "rrf",
        "--sample",
        "2",
        "--seed",
        "3",
    )
    again = json.loads(out.read_text())
    assert again["hybrid"] == "rrf" and again["n_queries"] == 2 and again["texts_encoded"] == 0  # cached


@pytest.mark.slow
def test_eval_command_scores_equivalent_tools_leniently_apart(tmp_path, capsys, settings):
    # Another server's tool named in the request comes first; the label names its equivalent. Strict scoring
    # counts a miss, the lenient groups a hit, and the strict figures are the same with or without the sets.
    settings.SCOUT_SEARCH_EVAL_CACHE_DIR = str(tmp_path / "cache")
    load_file = {"id": "disk::load_file", "server": "disk", "name": "load_file", "description": "Load a file."}
    catalog = write_jsonl(tmp_path / "catalog-small.jsonl", [*CATALOG, load_file])
    labelled = {"query": "load_file", "relevant_groups": [["files::read_file"]], "match": "all", "subset": "dup"}
    queries = write_jsonl(tmp_path / "queries-small.jsonl", [labelled, *QUERIES])
    sets = write_jsonl(
        tmp_path / "equivalence.jsonl",
        [{"set_id": 1, "tools": ["files::read_file", "disk::load_file"], "unresolved": ["weather::get_forecast"]}],
    )
    strict_out, lenient_out = tmp_path / "strict.json", tmp_path / "lenient.json"
    args = ["scout_eval", "--catalog", str(catalog), "--queries", str(queries)]
    call_command(*args, "--json", str(strict_out))
    capsys.readouterr()
    call_command(*args, "--json", str(lenient_out), "--equivalence", str(sets))
    strict, lenient = json.loads(strict_out.read_text()), json.loads(lenient_out.read_text())
    lenient_groups = {g: v for g, v in lenient["groups"].items() if g.startswith("lenient:")}
    assert {g: v for g, v in lenient["groups"].items() if g not in lenient_groups} == strict["groups"]
    assert set(lenient_groups) == {"lenient:" + g for g in strict["groups"]}
    assert lenient["equivalence"] == [str(sets)] and strict["equivalence"] == []
    assert lenient_groups["lenient:all"]["counts"] == {**strict["groups"]["all"]["counts"], "widened": 3}
    for mode in ("bm25", "convex"):
        assert strict["groups"]["small/dup"][mode]["hit@1"] == 0.0
        assert strict["groups"]["small/dup"][mode]["served"]["hit@1"] == 0.0
        assert lenient_groups["lenient:small/dup"][mode]["hit@1"] == 1.0
        assert lenient_groups["lenient:small/dup"][mode]["served"]["hit@1"] == 1.0
        # Where the labelled tool already came first (read_file, widened too), the lenient figures are the strict ones.
        assert lenient_groups["lenient:small/names"][mode] == {
            k: v for k, v in strict["groups"]["small/names"][mode].items() if k != "withhold_curve"
        }
    table = capsys.readouterr().out
    assert "== lenient:small/dup" in table and "== small/dup" in table


def test_eval_command_rejects_bad_files(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        call_command("scout_eval", "--catalog", str(tmp_path / "nope.jsonl"), "--queries", str(tmp_path / "q.jsonl"))
    bad = tmp_path / "catalog-bad.jsonl"
    bad.write_text("{not json\n")
    with pytest.raises(CommandError, match="not JSON"):
        call_command("scout_eval", "--catalog", str(bad), "--queries", str(bad))


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--confidence-lead", "-0.1", "must be 0 or more"),
        ("--withhold-threshold", "nan", "must be 0 or more"),
        ("--confidence-threshold", "high", "not a number"),
        ("--limit", "0", "must be 1 or more"),
        ("--sample", "-5", "must be 1 or more"),
    ],
)
def test_eval_command_refuses_a_knob_out_of_range_by_name(tmp_path, option, value, says):
    # A negative lead was silently "off" and a limit of 0 said "nothing to evaluate": each now names its option.
    with pytest.raises(CommandError, match=f"argument {option}: .*{says}"):
        call_command(
            "scout_eval", "--catalog", str(tmp_path / "c.jsonl"), "--queries", str(tmp_path / "q.jsonl"), option, value
        )


@pytest.fixture
def eval_dir() -> Path:
    path = Path(os.environ.get("SCOUT_EVAL_DIR") or Path(settings.BASE_DIR).parent / "shared" / "eval")
    if not (path / "catalog-apify.jsonl").is_file():
        if os.environ.get("SCOUT_REQUIRE_EVAL_DATA") == "1":
            pytest.fail(f"SCOUT_REQUIRE_EVAL_DATA=1 but the public eval data is missing at {path}")
        pytest.skip(f"public eval data not found at {path} (set SCOUT_EVAL_DIR)")
    return path


@pytest.mark.eval_data
@pytest.mark.slow
def test_hybrid_at_least_as_good_as_either_branch_on_apify(eval_dir, tmp_path):
    out = tmp_path / "apify.json"
    call_command(
        "scout_eval",
        "--catalog",
        str(eval_dir / "catalog-apify.jsonl"),
        "--queries",
        str(eval_dir / "queries-apify.jsonl"),
        "--json",
        str(out),
    )
    overall = json.loads(out.read_text())["groups"]["all"]
    tolerance = 0.03
    for metric in ("hit@1", "hit@5", "mrr@10"):
        best_branch = max(overall["bm25"][metric], overall["dense"][metric])
        assert overall["convex"][metric] >= best_branch - tolerance, (metric, overall)


LEARN = [
    # a paraphrase of the forecast tool, asked twice (two principals: one learned request, more weight)
    {"query": "will it rain in paris tomorrow", "relevant_groups": [["weather::get_forecast"]], "match": "all"},
    {"query": "Will it  rain in Paris tomorrow", "relevant_groups": [["weather::get_forecast"]], "match": "all"},
    # nonsense labelled with a tool: withheld, so never followed by a linked call, so nothing is learned
    {"query": "qwfp zzyzx blorft", "relevant_groups": [["mail::send_email"]], "match": "all"},
    {"query": "nothing fits", "relevant_groups": [], "match": "none"},
]


def test_learn_from_replays_traffic_through_the_learning_rules(tmp_path, settings):
    settings.SCOUT_SEARCH_EVAL_CACHE_DIR = str(tmp_path / "cache")
    catalog = write_jsonl(tmp_path / "catalog-small.jsonl", CATALOG)
    queries = write_jsonl(
        tmp_path / "queries-small.jsonl",
        [{"query": "will it rain in paris tomorrow", "relevant_groups": [["weather::get_forecast"]]}],
    )
    learn = write_jsonl(tmp_path / "queries-learn.jsonl", LEARN)
    out = tmp_path / "report.json"
    call_command("scout_eval", "--catalog", str(catalog), "--queries", str(queries), "--json", str(out))
    before = json.loads(out.read_text())
    assert before["learned"] is None
    call_command(
        "scout_eval", "--catalog", str(catalog), "--queries", str(queries), "--json", str(out),
        "--learn-from", str(learn),
    )  # fmt: skip
    after = json.loads(out.read_text())
    assert after["learned"] == {
        "files": [str(learn)], "queries": 4, "dropped": 0, "requests_learned": 1, "tools": 1,
    }  # fmt: skip
    assert after["groups"]["all"]["dense"]["served"]["hit@1"] == 1.0


def test_learn_replay_weights_by_distinct_principals(tmp_path, settings):
    from search.documents import learned_weight
    from search.encoder import encoder_get
    from search.engine.ranking import RankingOptions
    from search.engine.snapshot import IndexSnapshot
    from search.evaluation import doc_vectors, learn_replay, load_catalogs, load_queries

    docs = load_catalogs([write_jsonl(tmp_path / "catalog-small.jsonl", CATALOG)])
    learn, _ = load_queries([write_jsonl(tmp_path / "queries-learn.jsonl", LEARN)], {d.tool_id for d in docs})
    encode = encoder_get().encode
    snapshot = IndexSnapshot(docs, doc_vectors(docs, encode), generation="t")
    learned = learn_replay(snapshot, learn, encode, RankingOptions(fusion="convex", bm25_weight=0.3))
    forecast = next(d.pk for d in docs if d.tool_id == "weather::get_forecast")
    # One learned request (two principals' words): no centroid, which needs several requests.
    assert list(learned) == [forecast]
    assert learned[forecast]["learned"] == (("will it rain in paris tomorrow", learned_weight(2)),)
    assert learned[forecast]["learned_centroid"] == 0.0
    (teachers,) = learned[forecast]["learned_teachers"]  # its two teachers, each query a principal of its own
    assert len(set(teachers)) == 2
    assert learned_weight(2) > learned_weight(1)


def _crafted(cosines: list[float]) -> tuple:
    """A snapshot whose tools' single vectors have exactly the given cosines to the returned query vector."""
    from search.documents import tool_doc_from_record
    from search.engine.snapshot import DocVectors, IndexSnapshot

    dim = len(cosines) + 1
    query = np.zeros(dim, np.float32)
    query[0] = 1.0
    docs, vectors = [], {}
    for i, cosine in enumerate(cosines):
        doc = tool_doc_from_record(i + 1, {"id": f"s::tool{i}", "server": "s", "name": f"tool{i}"}, {})
        v = np.zeros(dim, np.float32)
        v[0], v[i + 1] = cosine, np.sqrt(1 - cosine**2)
        docs.append(doc)
        vectors[doc.pk] = DocVectors(v[None, :], ("document",), ("",))
    return IndexSnapshot(docs, vectors, generation="t"), query


@pytest.mark.parametrize(("others", "stands_out"), [(0.1, True), (0.28, False)])
def test_withhold_curve_applies_the_peak_condition(others, stands_out):
    # Same weak best cosine (its calibrated score under the default threshold either way), 25 visible tools.
    snapshot, query = _crafted([0.3] + [others] * 24)
    queries = [EvalQuery("unrelated words", [["s::tool0"]], "all", "x", "x")]
    options = RankingOptions()
    results = evaluate(snapshot, queries, query[None, :], None, options, modes=["convex"])["all"]["convex"]
    at = {p["threshold"]: p["false_withholding"] for p in results["withhold_curve"]}
    assert results["served"]["false_abstention"] == at[options.withhold_threshold] == (0.0 if stands_out else 1.0)
    assert at[0.95] == (0.0 if stands_out else 1.0)  # a request that stands out is withheld at no threshold


@pytest.mark.parametrize(("bulk", "withheld"), [(0.37, True), (0.3, False)])
def test_withhold_curve_applies_the_spread_and_the_flat_threshold(bulk, withheld):
    # 60 visible tools, none standing out alone; a best calibrated score between the base and the flat
    # threshold. A flat spread withholds it (the curve at the base threshold agrees); a head of tools
    # above the bulk serves it at every threshold.
    snapshot, query = _crafted([0.42] + [0.4] * 24 + [bulk] * 35)
    queries = [EvalQuery("unrelated words", [["s::tool0"]], "all", "x", "x")]
    options = RankingOptions()
    results = evaluate(snapshot, queries, query[None, :], None, options, modes=["convex"])["all"]["convex"]
    at = {p["threshold"]: p["false_withholding"] for p in results["withhold_curve"]}
    assert results["served"]["false_abstention"] == at[options.withhold_threshold] == float(withheld)
    assert at[0.95] == float(withheld)


def test_learn_replay_learns_only_from_what_tool_search_serves_by_default():
    # Seven tools about equally close to the requests: every one is served for a top_k of 10 (the evaluation's
    # depth), only the first TOP_K_DEFAULT for the answer an agent gets. An agent never calls a tool it was not
    # shown, so a replayed request whose tool ranks below them teaches nothing (the gateway links a call only
    # to a search that returned its tool).
    from search.evaluation import learn_replay
    from search.services import TOP_K_DEFAULT

    cosines = [0.9 - 0.01 * i for i in range(7)] + [0.1] * 20
    snapshot, query = _crafted(cosines)
    below = f"s::tool{TOP_K_DEFAULT}"  # ranked just below the default answer
    learn = [
        EvalQuery("unrelated words", [["s::tool0"]], "all", "x", "x"),
        EvalQuery("other unrelated words", [[below]], "all", "x", "x"),
    ]

    def vectors_for(texts: list[str]) -> np.ndarray:
        return np.repeat(query[None, :], len(texts), axis=0)

    ranking = snapshot.rank(
        snapshot.branches("other unrelated words", query, snapshot.visible_mask(None)),
        query="other unrelated words",
        query_vector=query,
        top_k=10,
        options=RankingOptions(),
    )
    served_at_10 = [snapshot.docs[c.row].tool_id for c in ranking.kept]
    assert served_at_10.index(below) == TOP_K_DEFAULT  # served at the evaluation's depth, just past the default
    learned = learn_replay(snapshot, learn, vectors_for, RankingOptions())
    pk_of = {doc.tool_id: doc.pk for doc in snapshot.docs}
    assert set(learned) == {pk_of["s::tool0"]}
