"""The upper bound of learning on a labelled traffic file, and what causes each served miss (bench/NOTES-learn16.md).

    DEBUG=1 SCOUT_SEARCH_EVAL_CACHE_DIR=... .venv/bin/python bench/learned_oracle.py \
        --catalog ../shared/eval/catalog-metatool.jsonl --learn-from ../shared/eval/queries-metatool-learn.jsonl \
        --queries ../shared/eval/queries-metatool-test.jsonl [--dump misses.jsonl]

Replays --learn-from as scout_eval does (``served.served_setup``), then reads every single-tool request of --queries:

- Oracles (no ranking, no cap, no withholding): a tool ranks by its nearest learned request's cosine (1-NN), or by the
  sum of its requests among the request's k nearest (k-NN vote); over the requests the replay learned, and over every
  learn query (the gate off). "served or 1-NN" counts a request hit when either is (the best any mix could do).
- Label noise: test requests with a learn query at cosine >= .9 (a near copy), and how often its label differs.
- Each served miss (Hit@1 and Hit@5) by cause, first match wins: the right tool learned nothing (cold); withheld;
  the served-first tool holds a learned request at cosine >= .85 the right one does not (the traffic labels this
  wording with the other tool: label noise / overlap); the right tool's nearest learned request is closer than the
  first tool's, and the miss is fixed by the dense branch alone (BM25), by learned requests weighed as curated text
  (the cap / example weight), or neither; the first tool's nearest learned request is closer (the evidence points
  wrong; 1-NN misses it too). With each cause, which part of the fused score gives the first tool most of its lead.
"""

import json
import os
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
django.setup()

import numpy as np  # noqa: E402
from served import learning_parser, places, served_rankings, served_setup  # noqa: E402

from search.engine.snapshot import IndexSnapshot  # noqa: E402
from search.evaluation import _with, doc_vectors, load_queries  # noqa: E402

NEAR_COPY = 0.9  # a learn query this close to a test request is the same request
TAUGHT_ELSEWHERE = 0.85  # a learned request this close, of the first tool only: the traffic's label for this wording


def tool_scores(sims: np.ndarray, owners: np.ndarray, tools: list[str], k: int | None) -> dict[str, float]:
    """Per tool, its nearest neighbour's cosine (k None) or the sum of its cosines among the k nearest."""
    if k is None:
        best: dict[str, float] = {}
        for j in np.argsort(-sims):
            best.setdefault(str(owners[j]), float(sims[j]))
        return best
    votes: Counter = Counter()
    for j in np.argsort(-sims)[:k]:
        votes[str(owners[j])] += float(sims[j])
    return dict(votes)


def place(scores: dict[str, float], right: str) -> int | None:
    order = sorted(scores, key=lambda t: -scores[t])
    return order.index(right) + 1 if right in order else None


PARTS = ("bm25", "dense", "intent", "server", "name", "deprecated", "cluster")


def lead_by(snapshot, ranking, right: str) -> str:
    """Which part of the fused score (``Candidate.*_part``) gives the first candidate most of its lead over the
    right tool's ("unranked": the right tool is not a candidate)."""
    first = ranking.candidates[0]
    theirs = next((c for c in ranking.candidates if snapshot.docs[c.row].tool_id == right), None)
    if theirs is None:
        return "unranked"
    return max(PARTS, key=lambda p: getattr(first, f"{p}_part") - getattr(theirs, f"{p}_part"))


def main() -> None:
    parser = learning_parser()
    args = parser.parse_args()
    snapshot, tests, vectors_for, options, parts_for = served_setup([args.catalog], [args.queries], [args.learn_from])
    docs = snapshot.docs
    tools = [d.tool_id for d in docs]
    learn, _ = load_queries([args.learn_from], set(tools))
    learn = [q for q in learn if q.kind == "single"]
    singles = [q for q in tests if q.kind == "single"]

    owners = np.asarray([d.tool_id for d in docs for _ in d.learned])
    learned_vectors = vectors_for([text for d in docs for text, _ in d.learned])
    all_owners = np.asarray([q.groups[0][0] for q in learn])
    all_vectors = vectors_for([q.text for q in learn])
    test_vectors = vectors_for([q.text for q in singles])
    doc_vecs = dict(zip(tools, vectors_for([d.document_text() for d in docs]), strict=True))
    print(f"learned {len(owners)} requests for {len(set(owners))} of {len(docs)} tools; {len(singles)} test requests")

    # Counterfactual rankings: as served; dense branch alone; learned requests weighed 1.0 (no cap).
    uncapped = [
        replace(d, learned=tuple((t, 1.0) for t, _ in d.learned), learned_centroid=1.0 if d.learned_centroid else 0.0)
        for d in docs
    ]
    uncapped_snapshot = IndexSnapshot(uncapped, doc_vectors(uncapped, vectors_for), generation="uncapped")
    runs = {
        "served": served_rankings(snapshot, singles, vectors_for, options, parts_for),
        "dense": served_rankings(snapshot, singles, vectors_for, _with(options, bm25_weight=0.0), parts_for),
        "uncapped": served_rankings(uncapped_snapshot, singles, vectors_for, options, parts_for),
    }
    tally: Counter = Counter()
    dumps = []
    for i, (query, *rankings) in enumerate(zip(singles, *runs.values(), strict=True)):
        right = query.groups[0][0]
        wanted = {right}
        served = {name: places(snapshot, r, wanted) for name, r in zip(runs, rankings, strict=True)}
        ids, rank, served_rank = served["served"]
        vector = test_vectors[i]
        sims, all_sims = learned_vectors @ vector, all_vectors @ vector
        hit = {"served": served_rank}
        for name, (s, o) in {"learned": (sims, owners), "all": (all_sims, all_owners)}.items():
            for k in (None, 5, 10):
                hit[f"{name} {'1-NN' if k is None else f'{k}-NN vote'}"] = place(tool_scores(s, o, tools, k), right)
        for name, r in hit.items():
            tally[f"{name} hit1"] += r == 1
            tally[f"{name} hit5"] += r is not None and r <= 5
        for a, b in (("served", "learned 1-NN"), ("served", "all 1-NN")):
            tally[f"{a} or {b} hit1"] += hit[a] == 1 or hit[b] == 1
            tally[f"{a} or {b} hit5"] += any(hit[x] is not None and hit[x] <= 5 for x in (a, b))
        nearest = int(np.argmax(all_sims))
        if all_sims[nearest] >= NEAR_COPY:
            tally["near copy"] += 1
            tally["near copy labelled otherwise"] += all_owners[nearest] != right
        tally["taught"] += right in owners
        if served_rank == 1:
            continue
        miss = "2-5" if served_rank is not None and served_rank <= 5 else "miss5"
        ranking = rankings[0]
        first = next((t for t in ids if t != right), None)
        own = float(sims[owners == right].max()) if right in owners else None
        theirs = float(sims[owners == first].max()) if first in owners else None
        fixed = {name: served[name][2] == 1 if miss == "2-5" else (served[name][2] or 99) <= 5 for name in runs}
        if own is None:
            cause = "cold: the right tool learned nothing"
        elif ranking.abstained:
            cause = "withheld"
        elif theirs is not None and theirs >= TAUGHT_ELSEWHERE and own < TAUGHT_ELSEWHERE:
            cause = "label: this wording was taught to the first tool"
        elif theirs is None or own > theirs:
            cause = (
                "right nearer: BM25"
                if fixed["dense"]
                else ("right nearer: cap / example weight" if fixed["uncapped"] else "right nearer: other")
            )
        else:
            cause = "first nearer: the evidence points wrong"
        tally[f"{miss} {cause}"] += 1
        lead = lead_by(snapshot, ranking, right)
        tally[f"{miss} {cause}, the first tool's lead mostly {lead}"] += 1
        tally[f"{miss} right nearer"] += own is not None and (theirs is None or own > theirs)
        tally[f"{miss} documents >= .6"] += first is not None and float(doc_vecs[right] @ doc_vecs[first]) >= 0.6
        for name in ("dense", "uncapped"):
            tally[f"{miss} fixed by {name}"] += fixed[name]
        dumps.append(
            {
                "query": query.text,
                "right": right,
                "first": first,
                "miss": miss,
                "cause": cause,
                "lead": lead,
                "rank": rank,
                "right_learned_cos": own,
                "first_learned_cos": theirs,
                "documents_cos": float(doc_vecs[right] @ doc_vecs[first]) if first else None,
                "nearest_learn": [str(all_owners[nearest]), round(float(all_sims[nearest]), 3)],
                **{f"{k} place": v for k, v in hit.items()},
            }
        )
    n = len(singles)
    print(f"test requests on a taught tool: {tally['taught']} of {n}")
    for name in ["served", *[k[: -len(" hit1")] for k in tally if k.endswith(" hit1") and k != "served hit1"]]:
        print(f"{name:38s} Hit@1 {tally[name + ' hit1'] / n:.3f}  Hit@5 {tally[name + ' hit5'] / n:.3f}")
    copies, other = tally["near copy"], tally["near copy labelled otherwise"]
    print(f"near copies (cosine >= {NEAR_COPY}) {copies}, labelled otherwise {other}")
    for key in sorted(k for k in tally if k.startswith(("2-5 ", "miss5 "))):
        print(f"{key}: {tally[key]}")
    if args.dump:
        args.dump.write_text("".join(json.dumps(d) + "\n" for d in dumps))


if __name__ == "__main__":
    main()
