"""What separates wrong first tools served high from right ones, from ``bench/confidence_dump.py``'s dumps: per feature,
its AUC between right and wrong highs, and for candidate rules (a high answer served low when the rule fires) the
precision and recall of high before and after on each set (bench/NOTES-agentux25.md).

    .venv/bin/python bench/confidence_rules.py /tmp/agentux25/{lmb,etom,apify,metatool,toolbench}.jsonl

Precision of high: right first tool among the single-tool and no-tool requests served high (a no-tool request's first
tool is never right); recall of high: served high among the single-tool requests served with the right first tool.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def features(row: dict) -> dict[str, float]:
    top = row["top"]
    first = top[0] if top else {}
    second = top[1] if len(top) > 1 else None
    score = first.get("score", 0.0)
    return {
        "best": row.get("rule_best") or 0.0,
        "evidence": row.get("rule_first_evidence") or 0.0,
        "cosine": first.get("dense") or 0.0,
        "calibrated1": first.get("calibrated", 0.0),
        "peak": row.get("rule_peak") or 0.0,
        "spread": row.get("rule_spread") or 0.0,
        "score1": score,
        "gap": score - second["score"] if second else 1.0,
        "ratio": second["score"] / score if second and score > 0 else 0.0,
        "step_gap": score - max((c["score"] for c in top[1:] if c["step"] == first.get("step")), default=0.0),
        "cos_gap": (first.get("dense") or 0.0) - (second.get("dense") or 0.0) if second else 1.0,
        "cal_gap": first.get("calibrated", 0.0) - second["calibrated"] if second else 1.0,
        "ev_gap": (first.get("evidence") or 0.0) - (second.get("evidence") or 0.0) if second else 1.0,
        "bm25_rank1": first.get("bm25_rank") or 99,
        "dense_rank1": first.get("dense_rank") or 99,
        "bonus1": first.get("intent", 0.0)
        + first.get("name", 0.0)
        + first.get("server", 0.0)
        + first.get("cluster", 0.0),
        "step1": first.get("step", 0),
        "terms": len(row.get("terms", [])),
        "words": len(row["text"].split()),
    }


def auc(right: list[float], wrong: list[float]) -> float:
    """P(a right high's value > a wrong high's), ties half."""
    if not right or not wrong:
        return float("nan")
    wins = 0.0
    ordered = sorted(wrong)
    import bisect

    for value in right:
        lo = bisect.bisect_left(ordered, value)
        hi = bisect.bisect_right(ordered, value)
        wins += lo + (hi - lo) / 2
    return wins / (len(right) * len(wrong))


def trade_off(rows: list[dict], demote: Callable[[dict], bool] | None) -> tuple[float, float, int, int]:
    """(precision of high, recall of high, answers high, multi-step answers high) with ``demote``'s highs low."""
    high = right_high = right = multi = 0
    for row in rows:
        if row["confidence"] == "none":
            continue
        if row["kind"] == "multi":
            multi += row["confidence"] == "high" and not (demote and demote(row))
            continue
        is_high = row["confidence"] == "high" and not (demote and demote(row))
        good = row["kind"] == "single" and row["right1"]
        high += is_high
        right_high += is_high and good
        right += good
    return (right_high / high if high else float("nan"), right_high / right if right else float("nan"), high, multi)


def main() -> None:
    sets = {Path(p).stem: load(Path(p)) for p in sys.argv[1:]}
    for rows in sets.values():
        for row in rows:
            row["f"] = features(row)
    print("AUC of each feature, right highs against wrong highs (>.5: right highs higher)")
    names = list(next(iter(sets.values()))[0]["f"])
    print(f"{'feature':<12}" + "".join(f"{n:>11}" for n in sets))
    for feature in names:
        cells = []
        for rows in sets.values():
            highs = [r for r in rows if r["confidence"] == "high" and r["kind"] != "multi"]
            right = [r["f"][feature] for r in highs if r["kind"] == "single" and r["right1"]]
            wrong = [r["f"][feature] for r in highs if not (r["kind"] == "single" and r["right1"])]
            cells.append(f"{auc(right, wrong):>11.3f}")
        print(f"{feature:<12}" + "".join(cells))
    print()
    print("precision / recall of high (answers high, multi-step answers high), before and with each rule")
    print(f"{'rule':<28}" + "".join(f"{n:>24}" for n in sets))
    for label, rule in [("before", None), *RULES]:
        cells = []
        for rows in sets.values():
            p, r, h, m = trade_off(rows, rule)
            cells.append(f"{p:.3f} / {r:.3f} ({h}, {m})".rjust(24))
        removed = []
        for rows in sets.values():
            demoted = [
                row for row in rows if rule and row["confidence"] == "high" and row["kind"] != "multi" and rule(row)
            ]
            right = sum(row["kind"] == "single" and row["right1"] for row in demoted)
            removed.append(f"-{len(demoted) - right}W/-{right}R".rjust(24))
        if rule:
            cells.append("\n" + " " * 28 + "".join(removed))
        print(f"{label:<28}" + "".join(cells))


def _below(feature: str, value: float) -> Callable[[dict], bool]:
    return lambda row: row["f"][feature] < value


def _above(feature: str, value: float) -> Callable[[dict], bool]:
    return lambda row: row["f"][feature] > value


def _both(one: Callable[[dict], bool], other: Callable[[dict], bool]) -> Callable[[dict], bool]:
    return lambda row: one(row) and other(row)


RULES: list[tuple[str, Callable[[dict], bool]]] = [
    # ``ranking.undecided``: the first's lead over the next candidate of its step (of the five dumped).
    *[(f"step lead < {g}", _below("step_gap", g)) for g in (0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.03)],
    *[(f"lead < {g}", _below("gap", g)) for g in (0.01, 0.02)],
    *[(f"second/first > {r}", _above("ratio", r)) for r in (0.98, 0.97)],
    *[
        (f"lead < {g} and evidence < {e}", _both(_below("gap", g), _below("evidence", e)))
        for g in (0.02, 0.05)
        for e in (0.5, 0.6)
    ],
]

if __name__ == "__main__":
    main()
