"""Per-candidate features of the served rankings, for a learned linear re-ranker (bench/NOTES-rank17.md).

    DEBUG=1 SCOUT_SEARCH_EVAL_CACHE_DIR=... .venv/bin/python bench/rerank_features.py \
        --catalog ../shared/eval/catalog-etom.jsonl --queries ../shared/eval/queries-etom.jsonl --out etom.pkl

Ranks every request once as scout_eval serves it (``served.served_rankings``: withholding, the parts' retry, the
dynamic cut) and writes, per request, its labels and its second stage's candidates in served order with the
values the ranking already computed (``FEATURES``), the withholding decision and the cut. ``rerank_fit.py``
re-orders those candidates and scores them as served. ``--learn-from`` replays a file as traffic first, as
scout_eval does.
"""

import argparse
import os
import pickle
import sys
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from served import served_rankings, served_setup  # noqa: E402

FEATURES = (
    "bm25_part",
    "dense_part",
    "intent_part",
    "server_part",
    "name_part",
    "cluster_part",
    "deprecated_part",
    "calibrated",
    "evidence",
    "dense_score",
    "bm25_norm",
    "bm25_rr",
    "dense_rr",
    "position_rr",
    "later_step",
    "score",
)


def features(candidates) -> np.ndarray:
    top_bm25 = max((c.bm25_score for c in candidates), default=0.0) or 1.0
    rows = []
    for position, c in enumerate(candidates, 1):
        rows.append(
            [
                c.bm25_part,
                c.dense_part,
                c.intent_part,
                c.server_part,
                c.name_part,
                c.cluster_part,
                c.deprecated_part,
                c.calibrated,
                c.evidence or 0.0,
                c.dense_score or 0.0,
                c.bm25_score / top_bm25,
                1.0 / c.bm25_rank if c.bm25_rank else 0.0,
                1.0 / c.dense_rank if c.dense_rank else 0.0,
                1.0 / position,
                float(c.step > 0),
                c.score,
            ]
        )
    return np.asarray(rows, np.float64).reshape(len(candidates), len(FEATURES))


p = argparse.ArgumentParser()
p.add_argument("--catalog", type=Path, action="append")
p.add_argument("--queries", type=Path, action="append")
p.add_argument("--learn-from", type=Path, action="append")
p.add_argument("--out", type=Path)
a = p.parse_args()

snapshot, queries, vectors_for, options, parts_for = served_setup(a.catalog, a.queries, a.learn_from)
records = []
for query, ranking in zip(queries, served_rankings(snapshot, queries, vectors_for, options, parts_for), strict=True):
    candidates = ranking.candidates
    records.append(
        {
            "source": query.source,
            "subset": query.subset,
            "kind": query.kind,
            "groups": [list(g) for g in query.groups],
            "ids": [snapshot.docs[c.row].tool_id for c in candidates],
            "x": features(candidates),
            "step": [c.step for c in candidates],
            "demoted": [c.demoted for c in candidates],
            "abstained": ranking.abstained,
            "cut": ranking.cut,
        }
    )
a.out.write_bytes(
    pickle.dumps({"features": FEATURES, "cut_drop": options.cut_drop, "cut_keep": options.cut_keep, "records": records})
)
print("done", len(records))
