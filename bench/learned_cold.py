"""Why test requests miss on tools that learned nothing (bench/NOTES-learn13.md).

    DEBUG=1 SCOUT_SEARCH_EVAL_CACHE_DIR=... .venv/bin/python bench/learned_cold.py \
        --catalog ../shared/eval/catalog-metatool.jsonl --learn-from ../shared/eval/queries-metatool-learn.jsonl \
        --queries ../shared/eval/queries-metatool-test.jsonl [--dump cold.jsonl]

Replays --learn-from as scout_eval does (``learn_replay``), ranks each single-tool request of --queries as served
(the Hit@5 misses: its tool not in the served top 5), and for the misses whose tool learned nothing, reads why its
learn queries were not learned: where the replay ranked the tool (the whole ranking, no cut, never withheld) and
whether the served answer (``TOP_K_DEFAULT`` tools, the dynamic cut, withholding) left out a tool the ranking had in
its first five. So: the link rule (the tool not returned) or the cut / withholding; weights and the cap act only on
requests that were learned, which these tools have none of. Prints the tallies; ``--dump`` one JSON line per such
learn query.
"""

import json
import os
import sys
from collections import Counter
from dataclasses import replace
from functools import partial
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
django.setup()

from django.conf import settings  # noqa: E402
from served import learning_parser, places, served_rankings  # noqa: E402

from search.backends.ranked import ranking_options  # noqa: E402
from search.encoder import encoder_get, model_key  # noqa: E402
from search.engine.snapshot import IndexSnapshot  # noqa: E402
from search.evaluation import (  # noqa: E402
    EmbeddingCache,
    _with,
    doc_vectors,
    learn_replay,
    load_catalogs,
    load_queries,
    one_pass_parts,
)
from search.services import TOP_K_DEFAULT  # noqa: E402

WHOLE = 30  # how deep the unserved ranking is read


def bucket(rank: int | None) -> str:
    if rank is None or rank > WHOLE:
        return f">{WHOLE}"
    return "1-5" if rank <= 5 else ("6-10" if rank <= 10 else "11-30")


def main() -> None:
    parser = learning_parser()
    args = parser.parse_args()
    docs = load_catalogs([args.catalog])
    known = {d.tool_id for d in docs}
    learn, _ = load_queries([args.learn_from], known)
    tests, _ = load_queries([args.queries], known)
    encoder = encoder_get()
    cache = EmbeddingCache(Path(settings.SCOUT_SEARCH_EVAL_CACHE_DIR), model_key(), encoder.encode)
    parts_for = partial(one_pass_parts, encoder) if encoder.one_pass else None
    options = ranking_options("convex")
    base = IndexSnapshot(docs, doc_vectors(docs, cache.vectors), generation="eval")
    learned = learn_replay(base, learn, cache.vectors, options, parts_for=parts_for)
    taught = {d.tool_id for d in docs if d.pk in learned}
    taught_docs = [replace(d, **learned.get(d.pk, {})) for d in docs]
    snapshot = IndexSnapshot(taught_docs, doc_vectors(taught_docs, cache.vectors), generation="eval+learned")

    singles = [q for q in tests if q.kind == "single"]
    misses: Counter = Counter()
    rankings = served_rankings(snapshot, singles, cache.vectors, options, parts_for)
    for query, ranking in zip(singles, rankings, strict=True):
        _, _, served_rank = places(snapshot, ranking, set(query.groups[0]))
        if served_rank is None or served_rank > 5:
            misses[query.groups[0][0]] += 1
    cold_misses = {tool: n for tool, n in misses.items() if tool not in taught}
    print(f"Hit@5 misses {sum(misses.values())}, on tools that learned nothing {sum(cold_misses.values())} "
          f"({len(cold_misses)} tools)")  # fmt: skip

    # The cold tools' learn queries at replay: the answer served (what the link rule reads) and the whole ranking.
    replayed = [q for q in learn if q.kind == "single" and q.groups[0][0] in cold_misses]
    served = served_rankings(base, replayed, cache.vectors, options, parts_for, top_k=TOP_K_DEFAULT)
    whole_options = _with(options, dynamic_cut=False, enforce_abstention=False)
    whole = served_rankings(base, replayed, cache.vectors, whole_options, parts_for, top_k=WHOLE)
    tally: Counter = Counter()
    firsts: Counter = Counter()
    rows = []
    for query, answer, ranking in zip(replayed, served, whole, strict=True):
        tool = query.groups[0][0]
        ids = [base.docs[c.row].tool_id for c in ranking.candidates]
        rank = next((k for k, t in enumerate(ids, 1) if t == tool), None)
        shown = [] if answer.abstained else [base.docs[c.row].tool_id for c in answer.candidates][: answer.cut]
        if rank is not None and rank <= 5:
            why = "withheld" if answer.abstained else ("cut" if tool not in shown else "served (learned?)")
        else:
            why = f"not in the ranking's top 5: {bucket(rank)}"
        tally[why] += 1
        first = ids[0] if ids else None
        firsts["first is a tool that learned" if first in taught else "first learned nothing"] += 1
        rows.append({"tool": tool, "text": query.text, "rank": rank, "why": why, "first": first})
    print(f"their learn queries: {len(replayed)}")
    for key, n in sorted(tally.items()):
        print(f"  {key}: {n}")
    for key, n in sorted(firsts.items()):
        print(f"  {key}: {n}")
    per_tool = Counter(r["tool"] for r in rows)
    print("per tool (misses / learn queries / best replay rank):")
    for tool, n in sorted(cold_misses.items(), key=lambda item: -item[1]):
        ranks = [r["rank"] for r in rows if r["tool"] == tool and r["rank"] is not None]
        print(f"  {tool}: {n} / {per_tool[tool]} / {min(ranks) if ranks else None}")
    if args.dump:
        with args.dump.open("w") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
