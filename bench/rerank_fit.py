"""A linear re-ranker over the second stage's own values, fitted on one set and scored as served on the others
(bench/NOTES-rank17.md).

    .venv/bin/python bench/rerank_fit.py --train mtlearn.pkl --eval lmb.pkl --eval etom.pkl ...

Each ``*.pkl`` is ``bench/rerank_features.py``'s output. The re-ranked score is the served score plus ``w . x``
(``x``: the candidate's ``FEATURES``, ``w = 0``: the served order), ``w`` fitted by a pairwise logistic loss
(every relevant candidate of a request against every other, each request weighing one) with an L2 penalty.
Withholding is the served one (the order does not move it); the dynamic cut is applied again to the new order.
"""

import argparse
import json
import pickle
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

DEPTH = 10


def load(path: Path) -> dict:
    return pickle.loads(path.read_bytes())


def relevant(record: dict) -> np.ndarray:
    wanted = {t for g in record["groups"] for t in g}
    return np.asarray([t in wanted for t in record["ids"]], bool)


def served_ids(record: dict, scores: np.ndarray, cut_drop: float, cut_keep: int) -> list[str]:
    """What a caller gets with the candidates ordered by ``scores`` (served order on ties)."""
    if record["abstained"] or not len(record["ids"]):
        return []
    n = len(record["ids"])
    demoted = record["demoted"]
    order = sorted(range(n), key=lambda i: (demoted[i], -scores[i], i))
    calibrated, steps = record["x"][:, 7], record["step"]
    floors: dict[int, float] = {}
    for i in range(n):
        floors[steps[i]] = max(floors.get(steps[i], -np.inf), calibrated[i] - cut_drop)
    cut = 0
    for i in order[:DEPTH]:
        if calibrated[i] < floors[steps[i]] and cut >= cut_keep:
            break
        cut += 1
    return [record["ids"][i] for i in order[:cut]]


def figures(data: dict, w: np.ndarray | None) -> dict[str, dict[str, float]]:
    tallies: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for record in data["records"]:
        x = record["x"]
        scores = x[:, -1] + (x @ w if w is not None and len(x) else 0.0)
        top = served_ids(record, scores, data["cut_drop"], data["cut_keep"])
        if w is None:  # the replay must reproduce the served cut
            assert len(top) == (0 if record["abstained"] else min(record["cut"], DEPTH)), (len(top), record["cut"])
        for group in ("all", record["source"], f"{record['source']}/{record['subset']}"):
            t = tallies[group]
            if record["kind"] == "none":
                t["abstention"].append(float(record["abstained"]))
                continue
            t["false_abstention"].append(float(record["abstained"]))
            if record["kind"] == "single":
                wanted = set(record["groups"][0])
                rank = next((k for k, tid in enumerate(top, 1) if tid in wanted), None)
                t["hit@1"].append(float(rank == 1))
                t["hit@5"].append(float(rank is not None and rank <= 5))
                t["mrr@10"].append(1.0 / rank if rank else 0.0)
            else:
                found = [bool(set(g) & set(top)) for g in record["groups"]]
                t["slot_recall@10"].append(sum(found) / len(found))
    return {g: {k: round(float(np.mean(v)), 3) for k, v in m.items()} for g, m in sorted(tallies.items())}


def pairs(data: dict) -> tuple[np.ndarray, np.ndarray]:
    """Feature differences (relevant - other) and each pair's weight (1 / the request's pairs)."""
    diffs, weights = [], []
    for record in data["records"]:
        if record["kind"] == "none" or record["abstained"] or not len(record["ids"]):
            continue
        rel = relevant(record)
        if not rel.any() or rel.all():
            continue
        x = record["x"]
        d = (x[rel][:, None, :] - x[~rel][None, :, :]).reshape(-1, x.shape[1])
        diffs.append(d)
        weights.append(np.full(len(d), 1.0 / len(d)))
    return np.concatenate(diffs), np.concatenate(weights)


def fit(datasets: list[dict], l2: float, sharp: float, mask: np.ndarray) -> np.ndarray:
    d, wt = zip(*(pairs(data) for data in datasets), strict=True)
    d, wt = np.concatenate(d), np.concatenate(wt)
    wt = wt / wt.sum()
    base = d[:, -1]  # the served score's difference

    def loss(v: np.ndarray) -> tuple[float, np.ndarray]:
        w = np.zeros(d.shape[1])
        w[mask] = v
        margin = sharp * (base + d @ w)
        p = 1.0 / (1.0 + np.exp(margin))  # d loss / d margin = -p
        value = float(wt @ np.logaddexp(0.0, -margin)) + l2 * float(v @ v)
        grad = -sharp * (d[:, mask].T @ (wt * p)) + 2 * l2 * v
        return value, grad

    result = minimize(loss, np.zeros(int(mask.sum())), jac=True, method="L-BFGS-B")
    w = np.zeros(d.shape[1])
    w[mask] = result.x
    return w


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--train", type=Path, action="append", required=True)
    p.add_argument("--eval", type=Path, action="append", default=[])
    p.add_argument("--l2", type=float, nargs="+", default=[1e-4, 1e-3, 1e-2])
    p.add_argument("--sharp", type=float, default=30.0)
    p.add_argument("--drop", nargs="*", default=[], help="features left at weight 0")
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    train = [load(t) for t in a.train]
    names = train[0]["features"]
    mask = np.asarray([n not in a.drop for n in names], bool)
    evals = {str(e): load(e) for e in a.eval}
    out = {"base": {}, "fits": []}
    for name, data in {**{str(t): d for t, d in zip(a.train, train, strict=True)}, **evals}.items():
        out["base"][name] = figures(data, None)
    for l2 in a.l2:
        w = fit(train, l2, a.sharp, mask)
        row = {"l2": l2, "w": dict(zip(names, np.round(w, 4).tolist(), strict=True)), "figures": {}}
        for name, data in {**{str(t): d for t, d in zip(a.train, train, strict=True)}, **evals}.items():
            row["figures"][name] = figures(data, w)
        out["fits"].append(row)
        print(json.dumps({"l2": l2, "w": row["w"]}))
    if a.out:
        a.out.write_text(json.dumps(out, indent=1))
