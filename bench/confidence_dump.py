"""Per-request features of the served answers of one eval set (convex fusion, as ``scout_eval`` serves them), for
the error analysis of ``high`` (bench/NOTES-agentux25.md): what separates a wrong first tool served high from a right
one. Writes one JSON line per request: its kind and labels, the confidence, whether the first served tool is right,
the inputs ``answer_confidence`` read (best, peak, spread, first evidence, misled) and the first five candidates'
scores and parts.

    DEBUG=1 SCOUT_SEARCH_ENCODER_CACHE_DIR=var/encoder SCOUT_SEARCH_EVAL_CACHE_DIR=/tmp/agentux25-lmb \
        .venv/bin/python bench/confidence_dump.py --catalog $E/catalog-livemcpbench.jsonl \
        --queries $E/queries-livemcpbench.jsonl --queries $E/queries-mcpverse.jsonl --out /tmp/agentux25/lmb.jsonl

Bench-only: it wraps ``ranking.answer_confidence`` and ``evaluation.score_served`` to read what they are given (the
app never does); the figures are ``search.evaluation.evaluate``'s own run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")


def main() -> None:
    import django

    django.setup()
    from django.conf import settings

    from search import evaluation
    from search.backends.ranked import ranking_options
    from search.encoder import encoder_get, model_key
    from search.engine import ranking as ranking_module
    from search.engine.snapshot import IndexSnapshot

    parser = argparse.ArgumentParser()
    parser.add_argument("--catalog", action="append", required=True, type=Path)
    parser.add_argument("--queries", action="append", required=True, type=Path)
    parser.add_argument("--learn-from", action="append", default=[], type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()

    docs = evaluation.load_catalogs(args.catalog)
    queries, _ = evaluation.load_queries(args.queries, {d.tool_id for d in docs})
    encoder = encoder_get()
    cache = evaluation.EmbeddingCache(Path(settings.SCOUT_SEARCH_EVAL_CACHE_DIR), model_key(), encoder.encode)
    vectors = evaluation.doc_vectors(docs, cache.vectors)
    query_vectors = cache.vectors([q.text for q in queries])
    parts_for = partial(evaluation.one_pass_parts, encoder) if encoder.one_pass else None
    # The gateway's options, the answers before ``ranking.undecided`` (whose lead the dump records).
    options = replace(ranking_options("convex"), confidence_lead=0.0)
    snapshot = IndexSnapshot(docs, vectors, generation="eval")
    if args.learn_from:
        learn, _ = evaluation.load_queries(args.learn_from, {d.tool_id for d in docs})
        learned = evaluation.learn_replay(snapshot, learn, cache.vectors, options, parts_for=parts_for)
        docs = [replace(doc, **learned.get(doc.pk, {})) for doc in docs]
        snapshot = IndexSnapshot(docs, evaluation.doc_vectors(docs, cache.vectors), generation="eval+learned")

    last_rule: dict = {}
    original_rule = ranking_module.answer_confidence

    def rule(best, peak, options, spread=None, unread=False, first_evidence=None, misled=False):
        last_rule.update(best=best, peak=peak, spread=spread, unread=unread, first_evidence=first_evidence)
        last_rule["misled"] = misled
        return original_rule(best, peak, options, spread, unread, first_evidence, misled)

    rows: list[dict] = []
    seen: set[int] = set()
    original_served = evaluation.score_served

    def served(query, ranking, ids, tally):
        original_served(query, ranking, ids, tally)
        if id(query) in seen:  # once per request (it is called per group)
            return
        seen.add(id(query))
        relevant = {tool for group in query.groups for tool in group}
        cut = ids[: ranking.cut]
        rows.append(
            {
                "text": query.text,
                "kind": query.kind,
                "source": query.source,
                "subset": query.subset,
                "relevant": sorted(relevant),
                "confidence": str(ranking.confidence),
                "served": cut[:5],
                "right1": bool(cut) and cut[0] in relevant,
                "ranked_right1": bool(ids) and ids[0] in relevant,
                "terms": list(ranking.query_terms),
                **{f"rule_{k}": v for k, v in last_rule.items()},
                "top": [
                    {
                        "tool": snapshot.docs[c.row].tool_id,
                        "score": c.score,
                        "calibrated": c.calibrated,
                        "evidence": c.evidence,
                        "dense": c.dense_score,
                        "bm25": c.bm25_score,
                        "bm25_rank": c.bm25_rank,
                        "dense_rank": c.dense_rank,
                        "intent": c.intent_part,
                        "name": c.name_part,
                        "server": c.server_part,
                        "cluster": c.cluster_part,
                        "step": c.step,
                    }
                    for c in ranking.candidates[:5]
                ],
            }
        )

    ranking_module.answer_confidence = rule
    evaluation.score_served = served
    try:
        evaluation.evaluate(
            snapshot, queries, query_vectors, cache.vectors, options, modes=("convex",), parts_for=parts_for
        )
    finally:
        ranking_module.answer_confidence = original_rule
        evaluation.score_served = original_served
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(f"{len(rows)} requests -> {args.out}")


if __name__ == "__main__":
    main()
