"""Where the test requests that learning misses have their tool (bench/NOTES-rank8.md).

    DEBUG=1 SCOUT_SEARCH_EVAL_CACHE_DIR=... .venv/bin/python bench/learned_misses.py \
        --catalog ../shared/eval/catalog-metatool.jsonl --learn-from ../shared/eval/queries-metatool-learn.jsonl \
        --queries ../shared/eval/queries-metatool-test.jsonl [--dump misses.jsonl]

Replays --learn-from as scout_eval does (``learn_replay``), then ranks each single-tool request of --queries as
served (convex, top_k 10) and, for each request not served its tool first, reads: the right tool's place in the
ranking, its fused parts against the first tool's, which vector gave its dense score (curated or learned), its
learned requests and distinct teachers, and the labels of the request's nearest learned requests and nearest
--learn-from requests, learned or not (cosine of the served model's vectors). Prints the tallies, with each Hit@5 miss's
class (``classify``, bench/NOTES-learn11.md); ``--dump`` writes one JSON line per miss (``reason``: ``2-5`` served
in the top 5 but not first, else where it is; ``class`` and the facts it was read from).
Experiments (none kept: bench/NOTES-rank8.md): ``--contest T``, learned requests with more close (cosine >= T)
learned requests of other tools than of their own weigh ``--contest-factor`` times as much; ``--mix-when T``, the
BM25 share is ``--mix-weight`` for a request with a learned request within cosine T; ``--passed-over S``, a tool
served above the one a replayed request then called loses S times how far that request's cosine to the new one
is above ``--passed-threshold`` (scaled to 0..1).
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

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from served import learning_parser, places, served_rankings  # noqa: E402

from search.backends.ranked import ranking_options  # noqa: E402
from search.documents import LEARNED_OVER_CURATED  # noqa: E402
from search.encoder import encoder_get, model_key  # noqa: E402
from search.engine.decompose import request_parts  # noqa: E402
from search.engine.ranking import Calibration  # noqa: E402
from search.engine.snapshot import IndexSnapshot  # noqa: E402
from search.evaluation import (  # noqa: E402
    EmbeddingCache,
    _part_vectors,
    _rank_served,
    _with,
    doc_vectors,
    learn_replay,
    load_catalogs,
    load_queries,
    one_pass_parts,
)
from search.usage import learned_key, learned_normalise  # noqa: E402


def main() -> None:
    parser = learning_parser()
    parser.add_argument("--contest", type=float, default=None, help="experiment: see ``contested``")
    parser.add_argument("--contest-factor", type=float, default=0.5)
    parser.add_argument("--mix-when", type=float, default=None, help="experiment: BM25 share --mix-weight when ...")
    parser.add_argument("--mix-weight", type=float, default=0.2)
    parser.add_argument("--passed-over", type=float, default=0.0, help="experiment: see ``passed_over``")
    parser.add_argument("--passed-threshold", type=float, default=0.6)
    args = parser.parse_args()
    docs = load_catalogs([args.catalog])
    known = {d.tool_id for d in docs}
    learn, _ = load_queries([args.learn_from], known)
    tests, _ = load_queries([args.queries], known)
    encoder = encoder_get()
    cache = EmbeddingCache(Path(settings.SCOUT_SEARCH_EVAL_CACHE_DIR), model_key(), encoder.encode)
    parts_for = partial(one_pass_parts, encoder) if encoder.one_pass else None
    options = ranking_options("convex")  # the settings' options, as scout_eval's
    base = IndexSnapshot(docs, doc_vectors(docs, cache.vectors), generation="eval")
    learned = learn_replay(base, learn, cache.vectors, options, parts_for=parts_for)
    negatives = passed_over(base, learn, cache, options, parts_for) if args.passed_over else {}
    if args.contest is not None:
        learned = contested(learned, cache, args.contest, args.contest_factor)
    docs = [replace(d, **learned.get(d.pk, {})) for d in docs]
    snapshot = IndexSnapshot(docs, doc_vectors(docs, cache.vectors), generation="eval+learned")
    by_id = {d.tool_id: d for d in docs}

    # Every learned request's vector and tool, for the nearest-neighbour reading.
    owners, texts = [], []
    for d in docs:
        for text, _ in d.learned:
            owners.append(d.tool_id)
            texts.append(text)
    learned_vectors = cache.vectors(texts)
    owners = np.asarray(owners)

    replayed = [q for q in learn if q.kind == "single"]
    replayed_vectors = cache.vectors([q.text for q in replayed])
    replayed_tools = np.asarray([q.groups[0][0] for q in replayed])

    singles = [q for q in tests if q.kind == "single"]
    q_texts = [q.text for q in singles]
    q_vectors = cache.vectors(q_texts)
    all_parts = [request_parts(t) for t in q_texts]
    part_vectors = _part_vectors(q_texts, all_parts, cache.vectors, parts_for)
    alone = _part_vectors(q_texts, all_parts, cache.vectors, None) if parts_for is not None else None
    visible = snapshot.visible_mask(None)
    kinds = snapshot.dense.kinds
    doc_vectors_by_id = dict(zip(by_id, cache.vectors([d.document_text() for d in by_id.values()]), strict=True))
    tally: Counter = Counter()
    dumps = []
    for i, query in enumerate(singles):
        vector = q_vectors[i]
        parts = [(t, part_vectors[i][j] if part_vectors else None) for j, t in enumerate(all_parts[i])]
        retry = [(t, alone[i][j]) for j, t in enumerate(all_parts[i])] if alone else None
        branches = snapshot.branches(query.text, vector, visible)
        mix = options
        if (
            args.mix_when is not None
            and len(learned_vectors)
            and float((learned_vectors @ vector).max()) >= args.mix_when
        ):
            mix = _with(options, bm25_weight=args.mix_weight)
            tally["mixed"] += 1
        ranking = _rank_served(
            snapshot,
            branches,
            query.text,
            vector,
            _with(mix, fusion="convex", dynamic_cut=True, enforce_abstention=True),
            Calibration(),
            parts,
            retry,
        )
        if negatives:
            demote(ranking, snapshot, vector, negatives, args.passed_over, args.passed_threshold)
        wanted = set(query.groups[0])
        ids, rank, served_rank = places(snapshot, ranking, wanted)
        tally["single"] += 1
        tally["hit1"] += served_rank == 1
        tally["hit5"] += served_rank is not None and served_rank <= 5
        if served_rank == 1:
            continue
        right = query.groups[0][0]
        doc = by_id[right]
        sims = learned_vectors @ vector if len(learned_vectors) else np.zeros(0)
        order = np.argsort(-sims)
        near = [(str(owners[j]), round(float(sims[j]), 3)) for j in order[:10]]
        own = sims[owners == right]
        first = ranking.candidates[0] if ranking.candidates else None
        right_c = next((c for c in ranking.candidates if snapshot.docs[c.row].tool_id in wanted), None)
        dense_right = float(branches.dense.scores[_row(snapshot, right)])
        best_vec = int(branches.dense.best_of(np.asarray([_row(snapshot, right)]))[0])
        best_kind = kinds[best_vec] if best_vec >= 0 else "?"
        # Curated-only cosine of the right tool: its vectors not of kind learned.
        lo, hi = (
            int(branches.dense.offsets[_row(snapshot, right)]),
            int(branches.dense.offsets[_row(snapshot, right) + 1]),
        )
        curated = [k for k in range(lo, hi) if kinds[k] != "learned"]
        curated_cos = float(branches.dense.sims[curated].max()) if curated else None
        replayed_near = replayed_tools[np.argsort(-(replayed_vectors @ vector))[:5]].tolist()
        near5_right = right in {o for o, _ in near[:5]}
        reason = (
            "2-5"
            if served_rank is not None and served_rank <= 5
            else "withheld"
            if ranking.abstained
            else (
                "cut"
                if rank is not None and rank <= 5
                else ("6-10" if rank and rank <= 10 else ("11-30" if rank else ">30"))
            )
        )
        first_id = snapshot.docs[first.row].tool_id if first else None
        first_curated = _curated_cos(branches, kinds, snapshot, first_id) if first_id else None
        first_own = sims[owners == first_id] if first_id else np.zeros(0)
        near_learn = replayed_vectors @ vector
        learn_order = np.argsort(-near_learn)[:5]
        ceiling = _ceiling_facts(near_learn, replayed_tools, replayed, right, doc)
        facts = {
            "right_curated": curated_cos,
            "first_curated": first_curated,
            "documents_cos": float(doc_vectors_by_id[right] @ doc_vectors_by_id[first_id]) if first_id else None,
            "first_taught_near": any(
                replayed_tools[j] == first_id and near_learn[j] >= AMBIGUOUS_LEARN_COS for j in learn_order
            ),
            "right_learned_cos": float(own.max()) if len(own) else None,
            "first_learned_cos": float(first_own.max()) if len(first_own) else None,
        }
        klass, by = classify(reason, facts, first, right_c, dense_right, options)
        if reason != "2-5":
            tally[f"not in the top 5: class {klass}" + (f" (by {by})" if by else "")] += 1
        if not doc.learned:
            kind = "A the tool learned nothing"
        elif near5_right:
            kind = "C one of its learned requests among the 5 nearest"
        elif first_id in {o for o, _ in near[:3]}:
            kind = "B the nearest learned requests are the first tool's"
        else:
            kind = "D the nearest learned requests are other tools'"
        group = "top 5, not first" if reason == "2-5" else "not in the top 5"
        tally[f"{group}: {reason}"] += 1
        tally[f"{group}: {kind}"] += 1
        tally[f"{group}: best vector learned"] += best_kind == "learned"
        tally[f"{group}: its tool among the 5 nearest replayed"] += right in replayed_near
        if reason == "2-5" and right_c is not None:
            tally[f"{group}: first tool has the best BM25"] += (
                first.bm25_part >= right_c.bm25_part and first.bm25_part >= 0.999 * options.bm25_weight
            )
            tally[f"{group}: its dense part above the first's"] += right_c.dense_part > first.dense_part
        dumps.append(
            {
                "query": query.text,
                "right": right,
                "reason": reason,
                "rank": rank,
                "first": snapshot.docs[first.row].tool_id if first else None,
                "first_parts": _parts(first),
                "right_parts": _parts(right_c),
                "right_dense": round(dense_right, 3),
                "right_curated_cos": round(curated_cos, 3) if curated_cos is not None else None,
                "right_best_kind": best_kind,
                "right_learned": len(doc.learned),
                "right_teachers": len({t for ts in doc.teachers() for t in ts}) if doc.learned else 0,
                "right_best_learned_cos": round(float(own.max()), 3) if len(own) else None,
                "first_learned": len(by_id[first_id].learned) if first_id else 0,
                "nearest_learned": near[:5],
                "nearest_replayed": replayed_near,
                "confidence": str(ranking.confidence),
                "class": klass,
                "outweighed_by": by,
                **{k: round(v, 3) if isinstance(v, float) else v for k, v in facts.items()},
                **ceiling,
            }
        )
    n = tally["single"]
    print(f"single-tool requests {n}: served hit@1 {tally['hit1'] / n:.3f} hit@5 {tally['hit5'] / n:.3f}")
    for key, value in sorted(tally.items()):
        if ":" in key:
            print(f"  {key:<68}{value}")
    pairs = Counter((d["right"], d["first"]) for d in dumps)
    both = Counter(frozenset(p) for p in pairs.elements() if pairs[p[::-1]])
    top = [d for d in dumps if d["reason"] == "2-5" and pairs[(d["first"], d["right"])]]
    print(f"  top 5, not first, on a pair of tools confused both ways: {len(top)}")
    for pair, count in both.most_common(8):
        print(f"    {' / '.join(sorted(t.split('::')[-1] for t in pair))}: {count} misses")
    print_ceiling([d for d in dumps if d["reason"] != "2-5"], "Hit@5 misses")
    print_ceiling(dumps, "Hit@1 misses")
    if args.dump:
        args.dump.write_text("".join(json.dumps(d) + "\n" for d in dumps))


# Step 1 of bench/NOTES-learn11.md: a Hit@5 miss's class. The first tool's description "covers" the request when
# its curated text is at least as close as the right tool's and either the two tools' documents are near-copies or
# the learn file itself labels one of the request's 5 nearest wordings (cosine >= .6) with the first tool.
AMBIGUOUS_DOCUMENTS_COS = 0.6
AMBIGUOUS_LEARN_COS = 0.6
# Learned evidence "points right" when the right tool's closest learned request is this close and closer than
# any learned request of the first tool.
POINTING_COS = 0.5


def classify(reason: str, facts: dict, first, right, right_dense: float, options) -> tuple[str, str | None]:
    """(class, what outweighed it) of a miss: ``d`` withheld or cut; ``a`` label ambiguity; ``c`` learned
    evidence near and pointing right but outweighed (``cap``: with its learned requests weighted as curated text,
    1.0 instead of their weight, the right tool would have come first; else ``bm25`` or ``dense``, whichever part
    of the first tool's lead over it is larger); ``b`` no learned request of the right tool near the request."""
    if reason in ("withheld", "cut"):
        return "d withheld/cut", None
    right_cur, first_cur = facts["right_curated"] or 0.0, facts["first_curated"] or 0.0
    if first_cur >= right_cur and (
        (facts["documents_cos"] or 0.0) >= AMBIGUOUS_DOCUMENTS_COS or facts["first_taught_near"]
    ):
        return "a label ambiguity", None
    own, theirs = facts["right_learned_cos"], facts["first_learned_cos"]
    if own is None or own < POINTING_COS or (theirs is not None and theirs >= own):
        return "b no learned request of its tool near", None
    dense_share = 1 - options.bm25_weight
    # Its learned requests at weight 1.0: the best request's cosine, or the sum row .4 c + l (documents.learned_sums).
    unweighted = max(right_dense, own, (1 - LEARNED_OVER_CURATED) * right_cur + own)
    right_score = right.score if right is not None else dense_share * right_dense
    if right_score + dense_share * (unweighted - right_dense) > first.score:
        return "c outweighed", "cap"
    if right is None:
        return "c outweighed", "beyond the 30 candidates"
    bm25_gap, dense_gap = first.bm25_part - right.bm25_part, first.dense_part - right.dense_part
    return "c outweighed", "bm25" if bm25_gap >= dense_gap else "dense"


def _curated_cos(branches, kinds, snapshot, tool_id: str) -> float | None:
    """The tool's best cosine to the request over its curated vectors (not its learned ones)."""
    row = _row(snapshot, tool_id)
    lo, hi = int(branches.dense.offsets[row]), int(branches.dense.offsets[row + 1])
    curated = [k for k in range(lo, hi) if kinds[k] != "learned"]
    return float(branches.dense.sims[curated].max()) if curated else None


def contested(learned: dict, cache, threshold: float, factor: float) -> dict:
    """Experiment: a learned request with more close learned requests (cosine >= threshold) of other tools
    than of its own has its weight times ``factor``."""
    items = [(pk, i, text) for pk, fields in learned.items() for i, (text, _) in enumerate(fields["learned"])]
    vectors = cache.vectors([t for _, _, t in items])
    tools = np.asarray([pk for pk, _, _ in items])
    sims = vectors @ vectors.T
    result = {pk: {**fields, "learned": list(fields["learned"])} for pk, fields in learned.items()}
    changed = 0
    for k, (pk, i, _) in enumerate(items):
        close = sims[k] >= threshold
        close[k] = False
        own, other = int((close & (tools == pk)).sum()), int((close & (tools != pk)).sum())
        if other > own:
            text, weight = result[pk]["learned"][i]
            result[pk]["learned"][i] = (text, weight * factor)
            changed += 1
    print(f"contested: {changed} of {len(items)} learned requests weighted x{factor}")
    return {pk: {**fields, "learned": tuple(fields["learned"])} for pk, fields in result.items()}


def passed_over(snapshot, queries, cache, options, parts_for) -> dict:
    """Experiment: per tool id, the vectors of the replayed requests whose served answer (top 5) had that tool
    above the tool then called (the request's label): tools the caller passed over."""
    from search.services import TOP_K_DEFAULT

    singles = [q for q in queries if q.kind == "single"]
    vectors = cache.vectors([q.text for q in singles])
    found: dict[str, list[np.ndarray]] = {}
    rankings = served_rankings(snapshot, singles, cache.vectors, options, parts_for, top_k=TOP_K_DEFAULT)
    for i, (query, ranking) in enumerate(zip(singles, rankings, strict=True)):
        served = [] if ranking.abstained else [snapshot.docs[c.row].tool_id for c in ranking.candidates][: ranking.cut]
        label = query.groups[0][0]
        if label in served:
            for tool_id in served[: served.index(label)]:
                found.setdefault(tool_id, []).append(vectors[i])
    print(f"passed over: {sum(map(len, found.values()))} (request, tool) pairs for {len(found)} tools")
    return {tool_id: np.stack(rows) for tool_id, rows in found.items()}


def demote(ranking, snapshot, vector, negatives, share: float, threshold: float) -> None:
    """Experiment: each candidate loses ``share`` times how far its closest passed-over request's cosine to this
    request is above ``threshold`` (scaled to 0..1), then the candidates are sorted again."""
    for candidate in ranking.candidates:
        rows = negatives.get(snapshot.docs[candidate.row].tool_id)
        if rows is not None:
            cosine = float((rows @ vector).max())
            candidate.score -= share * max(0.0, (cosine - threshold) / (1 - threshold))
    ranking.candidates.sort(key=lambda c: (c.demoted, -c.score, snapshot.tie_keys[c.row]))


# The ceiling (bench/NOTES-learn12.md): a test request "has a near paraphrase" in the learn file when a learn
# query labelled with its tool is at least this close (cosine of the served model); the sensitivity is printed.
PARAPHRASE_COS = (0.9, 0.8, 0.7, 0.6)


def _ceiling_facts(near_learn, replayed_tools, replayed, right: str, doc) -> dict:
    """What the learn file holds for a missed request's tool: how many learn queries it labels with it, the
    closest one's cosine and whether it was learned (its served answer held the tool at replay), and the closest
    learn query labelled with any other tool (its cosine and label)."""
    own = replayed_tools == right
    facts = {"learn_count": int(own.sum()), "learn_best_cos": None, "learn_best_learned": None}
    if own.any():
        j = int(np.flatnonzero(own)[np.argmax(near_learn[own])])
        learned_keys = {learned_key(text) for text, _ in doc.learned}
        facts["learn_best_cos"] = round(float(near_learn[j]), 3)
        facts["learn_best_learned"] = learned_key(learned_normalise(replayed[j].text)) in learned_keys
    if (~own).any():
        j = int(np.flatnonzero(~own)[np.argmax(near_learn[~own])])
        facts["other_best_cos"], facts["other_best_label"] = round(float(near_learn[j]), 3), str(replayed_tools[j])
    return facts


def print_ceiling(misses: list[dict], title: str) -> None:
    """How many of the misses have a near paraphrase of their tool in the learn file, at each PARAPHRASE_COS;
    of those, how many were learned, and how many have a learn query of another tool closer still."""
    print(f"ceiling, {title} ({len(misses)}):")
    print(f"  its tool has no learn query at all{'':<28}{sum(d['learn_count'] == 0 for d in misses)}")
    for bound in PARAPHRASE_COS:
        near = [d for d in misses if (d["learn_best_cos"] or 0.0) >= bound]
        learned = sum(bool(d["learn_best_learned"]) for d in near)
        sibling = sum(d.get("other_best_cos", 0.0) > d["learn_best_cos"] for d in near)
        print(
            f"  a learn query of its tool at cosine >= {bound}: {len(near)} ({len(near) / max(1, len(misses)):.0%});"
            f" that one learned {learned}; another tool's learn query closer {sibling}"
        )


def _row(snapshot: IndexSnapshot, tool_id: str) -> int:
    return next(r for r, d in enumerate(snapshot.docs) if d.tool_id == tool_id)


def _parts(candidate) -> dict | None:
    if candidate is None:
        return None
    return {
        "score": round(candidate.score, 3),
        "bm25": round(candidate.bm25_part, 3),
        "dense": round(candidate.dense_part, 3),
        "server": round(candidate.server_part, 3),
        "intent": round(candidate.intent_part, 3),
        "name": round(candidate.name_part, 3),
        "calibrated": round(candidate.calibrated, 3),
    }


if __name__ == "__main__":
    main()
