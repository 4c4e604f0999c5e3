"""Evaluate retrieval on public catalogs and labeled queries, in an isolated in-memory index.

    manage.py scout_eval --catalog ../shared/eval/catalog-apify.jsonl --queries ../shared/eval/queries-apify.jsonl

Reports BM25-only, dense-only and both hybrid fusions side by side (the one chosen by --fusion, default
the SCOUT_SEARCH_FUSION setting, is marked as "hybrid"), overall, per source and per subset: the ranking's
figures, then the same figures as served (``served`` in --json: what a caller gets for top_k 10, where a
withheld answer is a miss, with the share of low-confidence answers, and the confidence's calibration: how
many answers were served high, low and withheld, and Hit@1 and Hit@5 among the high and among the low
ones, the precision and recall of high and of low on the first tool (``high_precision``: right first among
the answers served high; ``high_recall``: served high among the answers right first), then the same among
answerable requests alone: each label's requests by kind, and Hit@1 / Hit@5 of the single-tool ones served
high, low, and of the ranking behind those withheld). ``withhold_curve`` in --json (and
in the table with --withhold-curve): the shares of answerable and no-tool requests each withhold threshold would
withhold, so one run shows the whole trade-off. With ``--equivalence`` (sets of interchangeable tools, as in
equivalence-etom.jsonl) each group is also scored leniently, as the group ``lenient:<group>``: a tool in the
same set as a relevant one counts as relevant; the strict groups stay as they are.
"""

import argparse
import json
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from catalog.progress import ProgressCommand, ProgressSum
from search.encoder import EncoderUnavailable, encoder_get, model_key
from search.engine.decompose import request_parts
from search.engine.ranking import FUSIONS, MODES, RankingOptions
from search.engine.snapshot import IndexSnapshot
from search.evaluation import (
    EmbeddingCache,
    EvalDataError,
    doc_vectors,
    evaluate,
    learn_replay,
    load_catalogs,
    load_equivalence,
    load_queries,
    one_pass_parts,
    sample_queries,
)

METRICS = {
    "single": ["hit@1", "hit@3", "hit@5", "hit@10", "mrr@10", "ndcg@10"],
    "multi": ["slot_recall@10", "all_slots@10"],
    "answerable": ["false_abstention"],
    "none": ["abstention"],
}
SERVED_METRICS = {
    "single": ["hit@1", "hit@5", "mrr@10"],
    "multi": ["slot_recall@10"],
    "any": ["low_confidence"],
    # The confidence's calibration (search.evaluation.score_served): how far an agent may trust "high".
    "calibrated": ["high_hit@1", "high_hit@5", "low_hit@1", "low_hit@5"],
    # Its trade-off (search.evaluation._score_precision): of the answers served high, the share right first; of the
    # answers right first, the share served high; the same for low.
    "precision": ["high_precision", "high_recall", "low_precision", "low_recall"],
}
# The same among answerable requests alone (search.evaluation._score_label), printed where a mode has them.
LABEL_METRICS = [
    "high_single_hit@1",
    "high_single_hit@5",
    "low_single_hit@1",
    "low_single_hit@5",
    "withheld_ranked_hit@1",
    "withheld_ranked_hit@5",
    "high_slot_recall@10",
    "low_slot_recall@10",
]
KIND_NAMES = {"single": "single", "multi": "multi", "none": "no tool"}
LABEL_WIDTH = 30  # the table's first column: "served withheld_ranked_hit@1" and a space


class Command(ProgressCommand):
    help = "Evaluate tool retrieval (BM25, dense, hybrid) on JSONL catalogs and labeled queries."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--catalog", action="append", required=True, type=Path, help="catalog JSONL (repeat)")
        parser.add_argument("--queries", action="append", required=True, type=Path, help="queries JSONL (repeat)")
        parser.add_argument("--fusion", choices=FUSIONS, default=None, help="the fusion reported as hybrid")
        parser.add_argument(
            "--limit", type=_positive_int, default=None, help="only the first N queries (after sampling)"
        )
        parser.add_argument("--sample", type=_positive_int, default=None, help="a random sample of N queries")
        parser.add_argument("--seed", type=int, default=0, help="seed for --sample")
        parser.add_argument("--json", type=Path, default=None, help="write every figure as JSON here")
        parser.add_argument("--no-intent", action="store_true", help="disable operation-intent re-ranking")
        parser.add_argument("--no-decompose", action="store_true", help="do not split multi-step requests")
        parser.add_argument(
            "--equivalence",
            action="append",
            default=[],
            type=Path,
            help="equivalence sets JSONL (repeat): also score leniently, a tool equivalent to a relevant one counting",
        )
        parser.add_argument(
            "--learn-from",
            action="append",
            default=[],
            type=Path,
            help="labelled queries replayed first as searches followed by a successful call (repeat)",
        )
        parser.add_argument(
            "--withhold-threshold",
            type=_non_negative,
            default=None,
            help="answer withheld below this best calibrated score (default SCOUT_SEARCH_WITHHOLD_THRESHOLD)",
        )
        parser.add_argument(
            "--withhold-peak",
            type=_non_negative,
            default=None,
            help="... and when the request's peak is below this (default SCOUT_SEARCH_WITHHOLD_PEAK)",
        )
        parser.add_argument(
            "--withhold-spread",
            type=_non_negative,
            default=None,
            help="... and when the request's spread is below this (default SCOUT_SEARCH_WITHHOLD_SPREAD)",
        )
        parser.add_argument(
            "--withhold-flat-threshold",
            type=_non_negative,
            default=None,
            help="withhold threshold where a flat spread was measured (default SCOUT_SEARCH_WITHHOLD_FLAT_THRESHOLD)",
        )
        parser.add_argument(
            "--withhold-curve",
            action="store_true",
            help="also print, per group, the shares each withhold threshold would withhold (hybrid only)",
        )
        parser.add_argument(
            "--confidence-threshold",
            type=_non_negative,
            default=None,
            help="low confidence below this best calibrated score (default SCOUT_SEARCH_CONFIDENCE_THRESHOLD)",
        )

        parser.add_argument(
            "--confidence-lead",
            type=_non_negative,
            default=None,
            help="low when the first tool leads the next of its step by less than this fused score (0: off)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:  # noqa: C901 - a linear script
        fusion = opts["fusion"] or settings.SCOUT_SEARCH_FUSION
        started = time.monotonic()
        try:
            docs = load_catalogs(opts["catalog"])
            queries, dropped = load_queries(opts["queries"], {d.tool_id for d in docs})
            equivalents = load_equivalence(opts["equivalence"]) if opts["equivalence"] else None
        except EvalDataError as exc:
            raise CommandError(str(exc)) from exc
        queries = sample_queries(queries, opts["sample"], opts["seed"], opts["limit"])
        if not docs or not queries:
            raise CommandError("nothing to evaluate: no tools or no queries")
        vectors, query_vectors, degraded, encoded, cache, parts_for = None, None, False, 0, None, None
        encoded_so_far = None
        try:
            encoder = encoder_get()
            with self.progress("encoding", unit="texts") as progress:
                encoded_so_far = ProgressSum(progress)
                cache = EmbeddingCache(
                    Path(settings.SCOUT_SEARCH_EVAL_CACHE_DIR),
                    model_key(),
                    lambda texts: encoder.encode(texts, progress=encoded_so_far.part()),
                )
                vectors = doc_vectors(docs, cache.vectors)
                query_vectors = cache.vectors([q.text for q in queries])
                if encoder.one_pass:  # parts pooled from their request's pass, as a search gets them
                    parts_for = partial(one_pass_parts, encoder)
                else:  # multi-step requests' parts too, here under the bar (evaluate() then finds them cached)
                    cache.vectors([part for q in queries for part in request_parts(q.text)])
        except EncoderUnavailable as exc:
            degraded = True
            self.stderr.write(f"embedding model unavailable, BM25 only: {exc}")
        options = RankingOptions(
            fusion=fusion,
            bm25_weight=settings.SCOUT_SEARCH_BM25_WEIGHT,
            withhold_threshold=_given(opts["withhold_threshold"], settings.SCOUT_SEARCH_WITHHOLD_THRESHOLD),
            withhold_peak=_given(opts["withhold_peak"], settings.SCOUT_SEARCH_WITHHOLD_PEAK),
            withhold_spread=_given(opts["withhold_spread"], settings.SCOUT_SEARCH_WITHHOLD_SPREAD),
            withhold_flat_threshold=_given(
                opts["withhold_flat_threshold"], settings.SCOUT_SEARCH_WITHHOLD_FLAT_THRESHOLD
            ),
            confidence_threshold=_given(opts["confidence_threshold"], settings.SCOUT_SEARCH_CONFIDENCE_THRESHOLD),
            confidence_lead=_given(opts["confidence_lead"], RankingOptions.confidence_lead),
            name_share=settings.SCOUT_SEARCH_NAME_SHARE,
            cluster_share=settings.SCOUT_SEARCH_CLUSTER_SHARE,
            intent=not opts["no_intent"],
            decompose=not opts["no_decompose"],
        )
        snapshot = IndexSnapshot(docs, vectors, generation="eval")
        learned_summary = None
        if opts["learn_from"]:
            with self.progress("learning: encoding", unit="texts") as progress:
                if encoded_so_far is not None:  # the cache's encoder now reports to this bar
                    encoded_so_far.progress, encoded_so_far.done, encoded_so_far.total = progress, 0, 0
                docs, learned_summary = self._learn(snapshot, docs, opts["learn_from"], cache, options, parts_for)
                vectors = doc_vectors(docs, cache.vectors) if cache else None
            snapshot = IndexSnapshot(docs, vectors, generation="eval+learned")
        with self.progress("evaluating", unit="queries") as progress:
            results = evaluate(
                snapshot,
                queries,
                query_vectors,
                cache.vectors if cache else None,
                options,
                progress=progress,
                parts_for=parts_for,
                equivalents=equivalents,
            )
        encoded = cache.encoded if cache else 0
        report = {
            "catalogs": [str(p) for p in opts["catalog"]],
            "queries": [str(p) for p in opts["queries"]],
            "equivalence": [str(p) for p in opts["equivalence"]],
            "tools": len(docs),
            "n_queries": len(queries),
            "dropped_queries": dropped,
            "sample": opts["sample"],
            "seed": opts["seed"],
            "limit": opts["limit"],
            "hybrid": fusion,
            "withhold_threshold": options.withhold_threshold,
            "withhold_peak": options.withhold_peak,
            "withhold_spread": options.withhold_spread,
            "withhold_flat_threshold": options.withhold_flat_threshold,
            "confidence_threshold": options.confidence_threshold,
            "confidence_evidence": options.confidence_evidence,
            "confidence_lead": options.confidence_lead,
            "name_share": options.name_share,
            "cluster_share": options.cluster_share,
            "model": model_key(),
            "one_pass_parts": parts_for is not None,
            "degraded": degraded,
            "texts_encoded": encoded,
            "seconds": round(time.monotonic() - started, 1),
            "learned": learned_summary,
            "groups": results,
        }
        if opts["verbosity"]:
            self.stdout.write(render_table(report, curve=opts["withhold_curve"]))
        if opts["json"]:
            opts["json"].parent.mkdir(parents=True, exist_ok=True)
            opts["json"].write_text(json.dumps(report, indent=2))

    def _learn(self, snapshot, docs, paths, cache, options, parts_for) -> tuple[list, dict]:
        """Replay ``paths`` as traffic (search.evaluation.learn_replay) and return the docs with what it taught."""
        try:
            learn_queries, dropped = load_queries(paths, {d.tool_id for d in docs})
        except EvalDataError as exc:
            raise CommandError(str(exc)) from exc
        learned = learn_replay(snapshot, learn_queries, cache.vectors if cache else None, options, parts_for=parts_for)
        summary = {
            "files": [str(p) for p in paths],
            "queries": len(learn_queries),
            "dropped": dropped,
            "requests_learned": sum(len(fields["learned"]) for fields in learned.values()),
            "tools": len(learned),
        }
        if not self.progress_quiet:
            self.stdout.write(
                f"learned {summary['requests_learned']} requests for {summary['tools']} tools "
                f"from {summary['queries']} replayed queries"
            )
        return [replace(doc, **learned.get(doc.pk, {})) for doc in docs], summary


def _non_negative(text: str) -> float:
    """A score or share: a negative one would silently mean "never" (a lead of -1 is always met), so it is refused."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {text}")
    return value


def _given(value: float | None, default: float) -> float:
    return default if value is None else value


def _answers_cell(figures: dict | None) -> str:
    """How many answers a mode served high, low and withheld, as one cell ("-" for a mode that did not run)."""
    served = (figures or {}).get("served", {})
    if "answers_high" not in served:
        return f"{'-':>15}"
    return f"{served['answers_high']}/{served['answers_low']}/{served['answers_withheld']}".rjust(15)


def _kind_answers_cell(figures: dict | None, kind: str) -> str:
    """How many requests of ``kind`` a mode served high, low and withheld, as one cell."""
    served = (figures or {}).get("served", {})
    if f"answers_high_{kind}" not in served:
        return f"{'-':>15}"
    return "/".join(str(served[f"answers_{label}_{kind}"]) for label in ("high", "low", "withheld")).rjust(15)


def render_table(report: dict, curve: bool = False) -> str:
    hybrid = report["hybrid"]
    labels = {m: ("hybrid:" + m if m == hybrid else m) for m in MODES}
    lines = [
        f"tools={report['tools']} queries={report['n_queries']} dropped={report['dropped_queries']} "
        f"model={report['model']} degraded={report['degraded']} encoded={report['texts_encoded']} "
        f"seconds={report['seconds']}",
    ]
    header = f"{'metric':<{LABEL_WIDTH}}" + "".join(f"{labels[m]:>15}" for m in MODES)
    for group, data in report["groups"].items():
        counts = data.get("counts", {})
        lines += ["", f"== {group}  " + " ".join(f"{k}={v}" for k, v in sorted(counts.items())), header]
        for kind, metrics in METRICS.items():
            present = counts.get(kind, 0) or (kind == "answerable" and (counts.get("single") or counts.get("multi")))
            if not present:
                continue
            for metric in metrics:
                cells = "".join(
                    f"{data[m][metric]:>15.3f}" if m in data and metric in data[m] else f"{'-':>15}" for m in MODES
                )
                lines.append(f"{metric:<{LABEL_WIDTH}}{cells}")
        lines.append(f"{'served high/low/withh.':<{LABEL_WIDTH}}" + "".join(_answers_cell(data.get(m)) for m in MODES))
        for kind, name in KIND_NAMES.items():
            if counts.get(kind, 0):
                lines.append(
                    f"{'  of them ' + name:<{LABEL_WIDTH}}"
                    + "".join(_kind_answers_cell(data.get(m), kind) for m in MODES)
                )
        for kind, metrics in SERVED_METRICS.items():
            if kind not in ("any", "calibrated", "precision") and not counts.get(kind, 0):
                continue
            lines += [_served_row(data, metric) for metric in metrics]
        present = {metric for m in MODES for metric in data.get(m, {}).get("served", {})}
        lines += [_served_row(data, metric) for metric in LABEL_METRICS if metric in present]
        if curve and "withhold_curve" in data.get(hybrid, {}):
            lines.append(
                f"{'withhold below':<{LABEL_WIDTH}}{'answerable':>15}{'no tool':>15}   (share withheld, hybrid)"
            )
            for point in data[hybrid]["withhold_curve"]:
                cells = "".join(
                    f"{'-':>15}" if point[key] is None else f"{point[key]:>15.3f}"
                    for key in ("false_withholding", "no_tool_withheld")
                )
                lines.append(f"{point['threshold']:<{LABEL_WIDTH}.2f}{cells}")
    return "\n".join(lines) + "\n"


def _served_row(data: dict, metric: str) -> str:
    cells = "".join(
        f"{data[m]['served'][metric]:>15.3f}" if m in data and metric in data[m].get("served", {}) else f"{'-':>15}"
        for m in MODES
    )
    return f"{'served ' + metric:<{LABEL_WIDTH}}{cells}"
