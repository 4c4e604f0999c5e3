"""Where ETOM level-2 requests that are not served their tool first have it, and what wins (bench/NOTES-etom8.md).

    DEBUG=1 SCOUT_SEARCH_EVAL_CACHE_DIR=... .venv/bin/python bench/etom_misses.py \
        --catalog ../shared/eval/catalog-etom.jsonl --queries ../shared/eval/queries-etom.jsonl [--dump misses.jsonl]

Ranks each single-slot request of --subset as scout_eval serves it (convex, top_k 10) and, for each not served a
relevant tool first, reads: the relevant tool's place, how the first tool relates to it (same server, same name
on another server, other), the part that decides (the largest of the first tool's lead per part), whether the
request names the relevant tool's server. Prints the tallies; ``--dump`` writes one JSON line per miss.

Also (bench/NOTES-rank19.md) the groups of an error analysis: whether the first tool is in the labelled tool's
equivalence set (``--equivalence``) or has the same name once its server's words are taken out; which tool BM25
alone and dense alone put first; whether the request was split into parts, has words only in quotes
(``text.quoted_only_terms``; and whether the winner has such a word the labelled tool lacks) or a negation. Each
group is tallied over every request of the subset too (served first / requests): a group that fails more often
than the rest shows.
"""

import argparse
import json
import os
import re
import sys
from collections import Counter
from functools import partial
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
django.setup()

from django.conf import settings  # noqa: E402
from served import places, served_rankings  # noqa: E402

from search.backends.ranked import ranking_options  # noqa: E402
from search.encoder import encoder_get, model_key  # noqa: E402
from search.engine.decompose import request_parts  # noqa: E402
from search.engine.snapshot import IndexSnapshot  # noqa: E402
from search.evaluation import (  # noqa: E402
    EmbeddingCache,
    doc_vectors,
    load_catalogs,
    load_equivalence,
    load_queries,
    one_pass_parts,
)
from search.text import name_words, quoted_only_terms, tokenize  # noqa: E402

PARTS = ("bm25", "dense", "server", "intent", "name", "cluster")
NEGATION = re.compile(r"(?i)\b(?:not|no|without|except|excluding|don't|doesn't|never)\b")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--catalog", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--subset", default="level_2")
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--equivalence", type=Path, action="append", default=[])
    args = parser.parse_args()
    docs = load_catalogs([args.catalog])
    known = {d.tool_id for d in docs}
    queries, _ = load_queries([args.queries], known)
    queries = [q for q in queries if q.kind == "single" and q.subset.endswith(args.subset)]
    encoder = encoder_get()
    cache = EmbeddingCache(Path(settings.SCOUT_SEARCH_EVAL_CACHE_DIR), model_key(), encoder.encode)
    parts_for = partial(one_pass_parts, encoder) if encoder.one_pass else None
    options = ranking_options("convex")
    snapshot = IndexSnapshot(docs, doc_vectors(docs, cache.vectors), generation="eval")
    equivalents = load_equivalence(args.equivalence)
    visible = snapshot.visible_mask(None)
    tally: Counter = Counter()
    groups: Counter = Counter()  # (group, served first) over every request
    dumps = []
    rankings = served_rankings(snapshot, queries, cache.vectors, options, parts_for)
    for query, ranking in zip(queries, rankings, strict=True):
        wanted = set(query.groups[0])
        ids, rank, served_rank = places(snapshot, ranking, wanted)
        tally["requests"] += 1
        tally["served first"] += served_rank == 1
        quoted = quoted_only_terms(query.text)
        for group, member in (
            ("split into parts", bool(request_parts(query.text))),
            ("words only in quotes", bool(quoted)),
            ("negation", bool(NEGATION.search(query.text))),
            ("labelled with a group of tools", len(wanted) > 1),
        ):
            groups[(group, member, served_rank == 1)] += 1
        if served_rank == 1:
            continue
        where = (
            "withheld"
            if ranking.abstained
            else "2"
            if served_rank == 2
            else "3-5"
            if served_rank and served_rank <= 5
            else "6-10"
            if served_rank
            else "cut"
            if rank and rank <= 10
            else "11-30"
            if rank
            else ">30"
        )
        tally[f"where: {where}"] += 1
        first = ranking.candidates[0] if ranking.candidates else None
        first_id = ids[0] if ids else None
        right_c = next((c for c in ranking.candidates if snapshot.docs[c.row].tool_id in wanted), None)
        right_id = snapshot.docs[right_c.row].tool_id if right_c else query.groups[0][0]
        r_server, r_name = right_id.split("::", 1)
        f_server, f_name = first_id.split("::", 1) if first_id else ("", "")
        relation = (
            "sibling on the same server"
            if f_server == r_server
            else "same name, another server"
            if f_name == r_name
            else "another server's tool"
        )
        tally[f"winner: {relation}"] += 1
        decided = None
        if first is not None and right_c is not None:
            leads = {p: getattr(first, f"{p}_part") - getattr(right_c, f"{p}_part") for p in PARTS}
            decided = max(leads, key=leads.get)
            tally[f"largest lead of the winner: {decided}"] += 1
        by_bm25 = next((c for c in ranking.candidates if c.bm25_rank == 1), None)
        by_dense = next((c for c in ranking.candidates if c.dense_rank == 1), None)
        bm25_first = snapshot.docs[by_bm25.row].tool_id if by_bm25 else None
        dense_first = snapshot.docs[by_dense.row].tool_id if by_dense else None
        equivalent = first_id is not None and first_id in equivalents.get(right_id, ())
        same_base = first_id is not None and _base_name(first_id) == _base_name(right_id)
        quoted_lead = []
        if first is not None and right_c is not None and quoted:
            sparse = snapshot.branches(query.text, None, visible).sparse
            for term, rows in zip(sparse.query_terms, sparse.term_rows, strict=True):
                winner_has = rows is not None and (rows == first.row).any()
                if term in quoted and winner_has and not (rows == right_c.row).any():
                    quoted_lead.append(term)
        lowered = query.text.lower()
        server_named = any(w in lowered for w in r_server.lower().replace("-", " ").split() if len(w) > 3)
        tally[f"request says a word of the right server's name: {server_named}"] += 1
        dumps.append(
            {
                "query": query.text,
                "right": right_id,
                "labels": len(wanted),
                "where": where,
                "rank": rank,
                "first": first_id,
                "relation": relation,
                "decided": decided,
                "first_parts": _parts(first),
                "right_parts": _parts(right_c),
                "confidence": str(ranking.confidence),
                "equivalent": equivalent,
                "same_base_name": same_base,
                "bm25_first": bm25_first,
                "dense_first": dense_first,
                "right_bm25_rank": right_c.bm25_rank if right_c else None,
                "right_dense_rank": right_c.dense_rank if right_c else None,
                "parts": len(request_parts(query.text)),
                "first_step": first.step if first else None,
                "quoted": sorted(quoted),
                "quoted_lead": quoted_lead,
                "negation": bool(NEGATION.search(query.text)),
            }
        )
    n = tally["requests"]
    first = tally["served first"]
    print(f"{args.subset} single-slot requests {n}: served first {first} ({first / n:.3f})")
    for key, value in sorted(tally.items()):
        if ":" in key:
            print(f"  {key:<70}{value}")
    print("groups over every request (served first / requests):")
    for group in dict.fromkeys(g for g, _, _ in groups):
        cells = []
        for member in (True, False):
            hit, miss = groups[(group, member, True)], groups[(group, member, False)]
            cells.append(f"{'yes' if member else 'no'} {hit}/{hit + miss} ({hit / max(hit + miss, 1):.3f})")
        print(f"  {group:<40}" + "   ".join(cells))
    for key in ("equivalent", "same_base_name", "quoted_lead"):
        print(f"  misses with {key}: {sum(bool(d[key]) for d in dumps)}")
    print(
        f"  misses won by BM25's first: {sum(d['first'] == d['bm25_first'] for d in dumps)}, by dense's first: "
        f"{sum(d['first'] == d['dense_first'] for d in dumps)}, label BM25's first: "
        f"{sum(d['right'] == d['bm25_first'] for d in dumps)}, label dense's first: "
        f"{sum(d['right'] == d['dense_first'] for d in dumps)}"
    )
    if args.dump:
        args.dump.write_text("".join(json.dumps(d) + "\n" for d in dumps))


def _base_name(tool_id: str) -> frozenset[str]:
    """A tool's name words less its server's words (``todoist_delete_task`` on Todoist: delete, task)."""
    server, name = tool_id.split("::", 1)
    return name_words(name) - set(tokenize(server))


def _parts(candidate) -> dict | None:
    if candidate is None:
        return None
    return {p: round(getattr(candidate, f"{p}_part"), 3) for p in PARTS} | {"score": round(candidate.score, 3)}


if __name__ == "__main__":
    main()
