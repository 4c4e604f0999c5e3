"""The link rule's gate as a trade-off: what a wider gate teaches against what an unrelated call would teach
(bench/NOTES-learn14.md).

    DEBUG=1 SCOUT_SEARCH_EVAL_CACHE_DIR=... .venv/bin/python bench/learned_gate.py --gate 10 -- \
        --no-progress --catalog ../shared/eval/catalog-metatool.jsonl \
        --learn-from ../shared/eval/queries-metatool-learn.jsonl --queries ../shared/eval/queries-metatool-test.jsonl

The gateway links a call to a search of the same token only when that search returned the tool
(``search.usage._linked_entry``), so the replay (``search.evaluation.learn_replay``) learns a request only when its
tool was in the served answer: ``TOP_K_DEFAULT`` tools, the dynamic cut, withholding. ``--gate N`` (an experiment,
not the gateway's rule) lets the replay learn a request whose tool is within the first N of the ranking without the
cut and never withheld (what the query log would have to keep to link to it); ``--gate 0`` is the gateway's rule,
``--gate 9999`` every labelled call. Then runs ``scout_eval`` with the arguments after ``--``.
It also prints the noise: for every replayed request, the label of another (request ``i + 997``) stands for the
agent's next, unrelated call; how many of those the gate would have let the search teach.
"""

import argparse
import os
import sys
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
django.setup()

from django.core.management import call_command  # noqa: E402

from search import evaluation  # noqa: E402
from search.services import TOP_K_DEFAULT  # noqa: E402

UNRELATED_STEP = 997  # prime, so the paired request is spread over the file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gate", type=int, default=0, help="0: the gateway's rule; N: within the first N, uncut")
    args, rest = parser.parse_known_args()
    rest = [a for a in rest if a != "--"]
    passing: list[list[str]] = []  # the tools each replayed search lets its call teach, in replay order
    served = evaluation._rank_served

    def gated(snapshot, branches, query, vector, options, calibration, parts, retry, top_k=evaluation.DEPTH):
        # The replay ranks for TOP_K_DEFAULT; the evaluation afterwards for DEPTH and is left alone.
        if top_k != TOP_K_DEFAULT:
            return served(snapshot, branches, query, vector, options, calibration, parts, retry, top_k=top_k)
        if args.gate:
            options = evaluation._with(options, dynamic_cut=False, enforce_abstention=False)
            top_k = args.gate
        ranking = served(snapshot, branches, query, vector, options, calibration, parts, retry, top_k=top_k)
        shown = [] if ranking.abstained else ranking.candidates[: ranking.cut]
        passing.append([snapshot.docs[c.row].tool_id for c in shown])
        return ranking

    evaluation._rank_served = gated
    call_command("scout_eval", *rest)
    flags = ("--catalog", "--learn-from")
    given = {flag: [Path(rest[i + 1]) for i, a in enumerate(rest) if a == flag] for flag in flags}
    known = {doc.tool_id for doc in evaluation.load_catalogs(given["--catalog"])}
    learning = [q for q in evaluation.load_queries(given["--learn-from"], known)[0] if q.kind != "none"]
    right = unrelated = pairs = 0
    for i, query in enumerate(learning):
        other = learning[(i + UNRELATED_STEP) % len(learning)].groups[0][0]
        right += query.groups[0][0] in passing[i]
        if other != query.groups[0][0]:
            pairs += 1
            unrelated += other in passing[i]
    print(f"gate {args.gate or 'served'}: labelled calls linked {right} of {len(learning)}; "
          f"unrelated calls linked {unrelated} of {pairs} ({unrelated / max(pairs, 1):.1%})")  # fmt: skip


if __name__ == "__main__":
    main()
