"""Where the slots of multi-step requests that the served top 10 misses are (bench/NOTES-rank9.md).

    DEBUG=1 SCOUT_SEARCH_EVAL_CACHE_DIR=... .venv/bin/python bench/slot_misses.py \
        --catalog ../shared/eval/catalog-livemcpbench.jsonl \
        --queries ../shared/eval/queries-livemcpbench.jsonl --queries ../shared/eval/queries-mcpverse.jsonl

Ranks each multi-step request as scout_eval serves it (convex, top_k 10) and reads, for each slot: whether the
served top 10 holds it, or the ranking's top 10 (cut), places 11-30 (the second stage's candidates), beyond, or
the answer was withheld; for a slot at 11-30, whether its server has a tool in the top 10. Prints the tallies,
the served slot recall@10, the ranking's, and the most any reordering of the candidates could serve (each slot
found among the candidates, at most 10 per request): the bound of a second-stage change such as diversifying
the top 10.
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
from search.engine.decompose import request_parts  # noqa: E402
from search.engine.snapshot import IndexSnapshot  # noqa: E402
from search.evaluation import DEPTH, EmbeddingCache, doc_vectors, load_catalogs, load_queries, one_pass_parts  # noqa: E402


def _server(tool_id: str) -> str:
    return tool_id.split("::", 1)[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--catalog", type=Path, required=True)
    parser.add_argument("--queries", type=Path, action="append", required=True)
    args = parser.parse_args()
    docs = load_catalogs([args.catalog])
    known = {d.tool_id for d in docs}
    queries, _ = load_queries(args.queries, known)
    queries = [q for q in queries if q.kind == "multi"]
    encoder = encoder_get()
    cache = EmbeddingCache(Path(settings.SCOUT_SEARCH_EVAL_CACHE_DIR), model_key(), encoder.encode)
    parts_for = partial(one_pass_parts, encoder) if encoder.one_pass else None
    snapshot = IndexSnapshot(docs, doc_vectors(docs, cache.vectors), generation="eval")
    tally: Counter = Counter()
    served_recall, ranking_recall, bound = [], [], []
    rankings = served_rankings(snapshot, queries, cache.vectors, ranking_options("convex"), parts_for)
    for query, ranking in zip(queries, rankings, strict=True):
        ids = [snapshot.docs[c.row].tool_id for c in ranking.candidates]
        served = [] if ranking.abstained else ids[: min(ranking.cut, DEPTH)]
        tally[f"request has parts: {bool(request_parts(query.text))}"] += 1
        top_servers = {_server(i) for i in ids[:DEPTH]}
        found = {"served": 0, "ranking": 0, "candidates": 0}
        for group in query.groups:
            place = next((k for k, i in enumerate(ids, 1) if i in group), None)
            found["served"] += any(i in group for i in served)
            found["ranking"] += place is not None and place <= DEPTH
            found["candidates"] += place is not None
            if ranking.abstained:
                where = "withheld"
            elif place is not None and place <= DEPTH:
                where = "top 10" if any(i in group for i in served) else "cut"
            elif place is not None:
                where = "11-30"
                tally[f"slot at 11-30, its server in the top 10: {_server(ids[place - 1]) in top_servers}"] += 1
            else:
                where = "beyond the candidates"
            tally[f"slot: {where}"] += 1
        slots = len(query.groups)
        served_recall.append(found["served"] / slots)
        ranking_recall.append(found["ranking"] / slots)
        bound.append(min(found["candidates"], DEPTH) / slots)
        tally["top 10: tools of its most frequent server"] += max(
            Counter(map(_server, ids[:DEPTH])).values(), default=0
        )
    n = len(queries)
    print(f"multi-step requests {n}, slots {sum(len(q.groups) for q in queries)}")
    print(
        f"  slot recall@10 served {sum(served_recall) / n:.3f}, ranking {sum(ranking_recall) / n:.3f}, "
        f"any reordering of the candidates at most {sum(bound) / n:.3f}"
    )
    for key, value in sorted(tally.items()):
        shown = f"{value / n:.2f} per request" if key.startswith("top 10") else value
        print(f"  {key:<60}{shown}")


if __name__ == "__main__":
    main()
