"""Which matches of a high-confidence answer would carry their inputSchema under a lead rule, and what a model loses
(bench/NOTES-agentux16.md): a match shows its schema only when its fused score is at least SHARE of the best of its
step, beside the dynamic cut's floor. Counts, per share, over the served answers at the default top_k (5):

- schemas shown (each costs 40-300 tokens of an answer);
- answers whose first relevant tool is served but shown without its schema (one tool_inspect call more).

    DEBUG=1 SCOUT_SEARCH_EVAL_CACHE_DIR=... .venv/bin/python bench/schemas_shown.py \
        --catalog ../shared/eval/catalog-livemcpbench.jsonl --queries ../shared/eval/queries-livemcpbench.jsonl
"""

import argparse
import os
import sys
from collections import Counter
from functools import partial
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
django.setup()

from django.conf import settings  # noqa: E402
from served import served_rankings  # noqa: E402

from search.backends.ranked import ranking_options  # noqa: E402
from search.encoder import encoder_get, model_key  # noqa: E402
from search.engine.ranking import Confidence  # noqa: E402
from search.engine.snapshot import IndexSnapshot  # noqa: E402
from search.evaluation import EmbeddingCache, doc_vectors, load_catalogs, load_queries, one_pass_parts  # noqa: E402
from search.services import TOP_K_DEFAULT  # noqa: E402

SHARES = (0.0, 0.3, 0.4, 0.5, 0.6)


def _shown(candidate, floors: dict[int, float], best: dict[int, float], share: float) -> bool:
    """The dynamic cut's floor of its step, and ``share`` of its step's best fused score (0: the floor alone)."""
    lead = best[candidate.step]
    if lead > 0 and candidate.score < share * lead:
        return False
    return candidate.calibrated >= floors.get(candidate.step, float("-inf"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--catalog", type=Path, action="append", required=True)
    parser.add_argument("--queries", type=Path, action="append", required=True)
    args = parser.parse_args()
    docs = load_catalogs(args.catalog)
    queries, _ = load_queries(args.queries, {d.tool_id for d in docs})
    encoder = encoder_get()
    cache = EmbeddingCache(Path(settings.SCOUT_SEARCH_EVAL_CACHE_DIR), model_key(), encoder.encode)
    parts_for = partial(one_pass_parts, encoder) if encoder.one_pass else None
    snapshot = IndexSnapshot(docs, doc_vectors(docs, cache.vectors), generation="eval")
    options = ranking_options("convex")
    tally: Counter = Counter()
    for query, ranking in zip(
        queries, served_rankings(snapshot, queries, cache.vectors, options, parts_for, top_k=TOP_K_DEFAULT), strict=True
    ):
        if ranking.confidence is not Confidence.HIGH:
            continue
        served = ranking.candidates[: ranking.cut]
        best: dict[int, float] = {}
        for candidate in ranking.candidates:  # as the dynamic cut's floors: every candidate its step scored
            best[candidate.step] = max(best.get(candidate.step, float("-inf")), candidate.score)
        tally["high answers"] += 1
        firsts = [next((c for c in served if snapshot.docs[c.row].tool_id in set(g)), None) for g in query.groups]
        tally["slots served"] += sum(first is not None for first in firsts)
        for share in SHARES:
            shown = [c for c in served if _shown(c, ranking.floors, best, share)]
            tally[share, "schemas"] += len(shown)
            tally[share, "slot without schema"] += sum(first is not None and first not in shown for first in firsts)
    print(f"high answers {tally['high answers']}, slots with a relevant tool served {tally['slots served']}")
    for share in SHARES:
        print(
            f"share {share}: schemas shown {tally[share, 'schemas']}, "
            f"relevant tool served without its schema {tally[share, 'slot without schema']}"
        )


if __name__ == "__main__":
    main()
