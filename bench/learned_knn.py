"""Learned evidence as a per-tool nearest-neighbour score blended with the tool's dense score (bench/NOTES-learn15.md).

    DEBUG=1 SCOUT_SEARCH_EVAL_CACHE_DIR=... .venv/bin/python bench/learned_knn.py \
        --catalog ../shared/eval/catalog-metatool.jsonl --learn-from ../shared/eval/queries-metatool-learn.jsonl \
        --queries ../shared/eval/queries-metatool-test.jsonl --variant 0,0,0 --variant 3,0.3,0.4 ...

Replays --learn-from once as scout_eval does (``learn_replay``), then evaluates --queries (convex, as served) once
per ``--variant K,BETA,TAU``: each taught tool's dense score gains ``BETA * max(0, knn - TAU)``, where ``knn`` is the
mean of its ``K`` closest learned requests' cosines to the request (a tool with fewer than K learned requests counts
the missing ones as 0, so a tool taught by few principals gains less; each teacher counts once, by its closest
request). ``K`` = 0 is the ranking as served (no bonus). One principal fills at most one of the K places: it moves
a tool by at most ``BETA / K``. ``--centroid``: ``knn`` is the cosine to the teachers' mean vector instead, times
``min(1, teachers / K)``. A tool's bonus reads only its own learned requests, so a hidden tool changes nothing.
"""

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
django.setup()

import numpy as np  # noqa: E402
from served import served_setup  # noqa: E402

from search.documents import teachers_mean  # noqa: E402
from search.engine.snapshot import IndexSnapshot  # noqa: E402
from search.evaluation import evaluate  # noqa: E402


class Learned:
    """Every taught tool's learned request vectors (unit), its row and each request's first teacher."""

    def __init__(self, snapshot: IndexSnapshot, vectors_for) -> None:
        rows, texts, teachers = [], [], []
        self.centroids: dict[int, tuple[np.ndarray, int]] = {}
        for row, doc in enumerate(snapshot.docs):
            if not doc.learned:
                continue
            who = doc.teachers()
            texts += [text for text, _ in doc.learned]
            rows += [row] * len(doc.learned)
            teachers += [f"{row}:{ts[0]}" for ts in who]
            own = vectors_for([text for text, _ in doc.learned])
            mean = teachers_mean(own, who)
            self.centroids[row] = (mean / max(np.linalg.norm(mean), 1e-12), len({t for ts in who for t in ts}))
        self.vectors = vectors_for(texts) if texts else np.zeros((0, 384), np.float32)
        self.rows = np.asarray(rows, np.int64)
        _, self.teacher = np.unique(np.asarray(teachers), return_inverse=True)
        self.n_docs = len(snapshot.docs)

    def knn(self, query: np.ndarray, k: int) -> np.ndarray:
        """Per row, the mean of its k closest teachers' best cosines (missing places 0)."""
        sims = self.vectors @ query
        # Each teacher's best request: sort by (teacher, -sim), keep the first of each teacher.
        order = np.lexsort((-sims, self.teacher))
        first = np.ones(len(order), bool)
        first[1:] = self.teacher[order][1:] != self.teacher[order][:-1]
        kept = order[first]
        # Then each row's k best teachers.
        rows, values = self.rows[kept], sims[kept]
        order = np.lexsort((-values, rows))
        rows, values = rows[order], values[order]
        start = np.r_[0, np.flatnonzero(rows[1:] != rows[:-1]) + 1]
        place = np.arange(len(rows)) - np.repeat(start, np.diff(np.r_[start, len(rows)]))
        keep = place < k
        result = np.zeros(self.n_docs, np.float64)
        np.add.at(result, rows[keep], np.maximum(values[keep], 0.0))
        return result / k

    def centroid(self, query: np.ndarray, k: int) -> np.ndarray:
        result = np.zeros(self.n_docs, np.float64)
        for row, (vector, teachers) in self.centroids.items():
            result[row] = float(vector @ query) * min(1.0, teachers / k)
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--catalog", type=Path, required=True)
    parser.add_argument("--learn-from", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--variant", action="append", default=[], help="K,BETA,TAU (K 0: as served)")
    parser.add_argument("--centroid", action="store_true")
    args = parser.parse_args()
    snapshot, tests, vectors_for, options, parts_for = served_setup([args.catalog], [args.queries], [args.learn_from])
    evidence = Learned(snapshot, vectors_for)
    taught = {d.tool_id for d in snapshot.docs if d.learned}
    singles = [q for q in tests if q.kind == "single"]
    print(
        f"taught tools {len(taught)} of {len(snapshot.docs)}; single-tool test requests {len(singles)}, "
        f"on a taught tool {sum(q.groups[0][0] in taught for q in singles)}",
        flush=True,
    )
    query_vectors = vectors_for([q.text for q in tests])
    plain = snapshot.branches
    for variant in args.variant or ["0,0,0"]:
        k, beta, tau = (float(x) for x in variant.split(","))
        k = int(k)

        def branches(query, vector, visible, k=k, beta=beta, tau=tau):
            found = plain(query, vector, visible)
            if not k or vector is None or found.dense is None:
                return found
            knn = evidence.centroid(vector, k) if args.centroid else evidence.knn(vector, k)
            bonus = beta * np.maximum(0.0, knn - tau)
            scores = (found.dense.scores + bonus).astype(np.float32)
            return replace(found, dense=replace(found.dense, scores=scores))

        snapshot.branches = branches
        result = evaluate(snapshot, tests, query_vectors, vectors_for, options, modes=["convex"], parts_for=parts_for)
        served = result["all"]["convex"]["served"]
        single = result["all"]["convex"]
        print(
            f"variant k={k} beta={beta} tau={tau}{' centroid' if args.centroid else ''}: served hit@1 "
            f"{served['hit@1']:.3f} hit@5 {served['hit@5']:.3f} mrr@10 {served['mrr@10']:.3f} "
            f"slot@10 {served.get('slot_recall@10', 0):.3f} false abstention {served['false_abstention']:.3f}; "
            f"ranking hit@1 {single['hit@1']:.3f} hit@5 {single['hit@5']:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
