"""The summary vector with or without the server's name, and the withholding thresholds (bench/NOTES-rank16.md).

    DEBUG=1 SCOUT_SEARCH_EVAL_CACHE_DIR=... .venv/bin/python bench/summary_variants.py --variant mix:0.5 \
        --catalog ../shared/eval/catalog-etom.jsonl --queries ../shared/eval/queries-etom.jsonl --out etom.json

Variants: ``main`` (the summary as served: ``label (server): first sentence``), ``bare`` (``label: first
sentence``) and ``mix:a`` (the unit mean of a * bare + (1 - a) * main's summary vector). Ranks every request once
as scout_eval serves it but never withheld, then applies the withholding rule per (peak, spread, flat threshold)
of a grid, and writes the served figures per group (``bench``-only: ``documents.ToolDoc`` is patched in this
process). Exact for every served figure except a withheld multi-step request's retry with its parts encoded alone,
which is not run (main's thresholds: LiveMCPBench+MCPVerse equal to scout_eval's; ETOM level 5 .813 against .802).
"""

import argparse
import itertools
import json
import os
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.conf import settings  # noqa: E402
from served import served_rankings  # noqa: E402

from search.backends.ranked import ranking_options  # noqa: E402
from search.documents import ToolDoc  # noqa: E402
from search.encoder import encoder_get, model_key  # noqa: E402
from search.engine.snapshot import IndexSnapshot  # noqa: E402
from search.evaluation import (  # noqa: E402
    DEPTH,
    EmbeddingCache,
    _slots_found,
    doc_vectors,
    load_catalogs,
    load_queries,
    one_pass_parts,
)
from search.text import first_sentence, split_identifier  # noqa: E402


def bare_summary(self) -> str:
    label = self.title or split_identifier(self.name)
    sentence = first_sentence(self.purpose) or first_sentence(self.description)
    return f"{label}: {sentence}".strip()


p = argparse.ArgumentParser()
p.add_argument("--catalog", type=Path, action="append")
p.add_argument("--queries", type=Path, action="append")
p.add_argument("--variant", default="main")
p.add_argument("--out", type=Path)
a = p.parse_args()

docs = load_catalogs(a.catalog)
queries, _ = load_queries(a.queries, {d.tool_id for d in docs})
encoder = encoder_get()
cache = EmbeddingCache(Path(settings.SCOUT_SEARCH_EVAL_CACHE_DIR), model_key(), encoder.encode)
ORIGINAL_ROWS, ORIGINAL_TEXTS = ToolDoc.vector_rows, ToolDoc.dense_texts
if a.variant.startswith("mix:"):
    alpha = float(a.variant[4:])
    bare = dict(zip([d.pk for d in docs], cache.vectors([bare_summary(d) for d in docs]), strict=True))

    def vector_rows(self, vectors):
        mixed = alpha * bare[self.pk] + (1 - alpha) * vectors[1]
        vectors = vectors.copy()
        vectors[1] = mixed / np.linalg.norm(mixed)
        return ORIGINAL_ROWS(self, vectors)

    ToolDoc.vector_rows = vector_rows
elif a.variant == "bare":

    def dense_texts(self):
        texts = ORIGINAL_TEXTS(self)
        texts[1] = ("summary", bare_summary(self))
        return texts

    ToolDoc.dense_texts = dense_texts

snapshot = IndexSnapshot(docs, doc_vectors(docs, cache.vectors), generation="eval")
options = replace(ranking_options("convex"), withhold_threshold=-1.0, withhold_flat_threshold=-1.0, dynamic_cut=True)
parts_for = partial(one_pass_parts, encoder) if encoder.one_pass else None
records = []
for query, ranking in zip(queries, served_rankings(snapshot, queries, cache.vectors, options, parts_for), strict=True):
    ids = [snapshot.docs[c.row].tool_id for c in ranking.candidates][: ranking.cut][:DEPTH]
    best = max((c.calibrated for c in ranking.candidates), default=-1.0)
    records.append((query, ids, best, ranking.peak, ranking.spread, ranking.unread))


def figures(peak_t, spread_t, flat_t, base_t=0.3):
    groups: dict[str, dict[str, list[float]]] = {}
    for query, ids, best, peak, spread, unread in records:
        stands = (peak is not None and peak >= peak_t) or (spread is not None and spread >= spread_t)
        withheld = best < (base_t if spread is None else flat_t) and not stands and not unread
        top = [] if withheld else ids
        for group in ("all", query.source, f"{query.source}/{query.subset}"):
            g = groups.setdefault(group, {})
            if query.kind == "none":
                g.setdefault("abstention", []).append(float(withheld))
                continue
            g.setdefault("false_abstention", []).append(float(withheld))
            if query.kind == "single":
                wanted = set(query.groups[0])
                rank = next((k for k, t in enumerate(top, 1) if t in wanted), None)
                for k in (1, 5):
                    g.setdefault(f"hit@{k}", []).append(float(rank is not None and rank <= k))
                g.setdefault("mrr@10", []).append(1.0 / rank if rank else 0.0)
            else:
                found = _slots_found(query, top)
                g.setdefault("slot_recall@10", []).append(sum(found) / len(found))
    return {g: {k: float(np.mean(v)) for k, v in m.items()} for g, m in groups.items()}


rows = []
for peak_t, spread_t, flat_t in itertools.product(
    (0.145, 0.15, 0.155, 0.16, 0.17), (0.065, 0.068, 0.07, 0.075, 0.08), (0.4, 0.42, 0.45)
):
    rows.append(
        {
            "variant": a.variant,
            "centre": 0.48,
            "peak": peak_t,
            "spread": spread_t,
            "flat": flat_t,
            "groups": {g: {"convex": {"served": f}} for g, f in figures(peak_t, spread_t, flat_t).items()},
        }
    )
a.out.write_text(json.dumps(rows))
print("done", a.variant, len(records))
