"""The rankings scout_eval serves, for the bench scripts that read them request by request."""

import argparse
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path

from django.conf import settings

from search.backends.ranked import ranking_options
from search.encoder import encoder_get, model_key
from search.engine.decompose import request_parts
from search.engine.ranking import Calibration, Ranking
from search.engine.snapshot import IndexSnapshot
from search.evaluation import (
    DEPTH,
    EmbeddingCache,
    _part_vectors,
    _rank_served,
    _with,
    doc_vectors,
    learn_replay,
    load_catalogs,
    load_queries,
    one_pass_parts,
    served_parts,
)


def learning_parser() -> argparse.ArgumentParser:
    """The learning scripts' arguments: a catalog, a labelled traffic file replayed first, the requests to read,
    and where to write each miss's facts (``--dump``, one JSON line each)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--catalog", type=Path, required=True)
    parser.add_argument("--learn-from", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--dump", type=Path)
    return parser


def served_setup(catalogs: list[Path], query_files: list[Path], learn_from: list[Path] | None = None):
    """What ``served_rankings`` takes, as scout_eval builds it: (snapshot, queries, vectors_for, options,
    parts_for); ``learn_from`` replayed as traffic first (``learn_replay``), as scout_eval --learn-from does."""
    docs = load_catalogs(catalogs)
    queries, _ = load_queries(query_files, {d.tool_id for d in docs})
    encoder = encoder_get()
    cache = EmbeddingCache(Path(settings.SCOUT_SEARCH_EVAL_CACHE_DIR), model_key(), encoder.encode)
    options = ranking_options("convex")
    parts_for = partial(one_pass_parts, encoder) if encoder.one_pass else None
    snapshot = IndexSnapshot(docs, doc_vectors(docs, cache.vectors), generation="eval")
    if learn_from:
        learn_queries, _ = load_queries(learn_from, {d.tool_id for d in docs})
        learned = learn_replay(snapshot, learn_queries, cache.vectors, options, parts_for=parts_for)
        docs = [replace(doc, **learned.get(doc.pk, {})) for doc in docs]
        snapshot = IndexSnapshot(docs, doc_vectors(docs, cache.vectors), generation="eval+learned")
    return snapshot, queries, cache.vectors, options, parts_for


def served_rankings(snapshot, queries, vectors_for, options, parts_for, top_k=DEPTH) -> Iterator[Ranking]:
    """Each query's ranking as scout_eval serves it for ``top_k`` (dynamic cut, abstention, the parts' retry)."""
    texts = [q.text for q in queries]
    vectors = vectors_for(texts)
    all_parts = [request_parts(t) for t in texts]
    part_vectors = _part_vectors(texts, all_parts, vectors_for, parts_for)
    alone = _part_vectors(texts, all_parts, vectors_for, None) if parts_for is not None else None
    visible = snapshot.visible_mask(None)
    for i, text in enumerate(texts):
        own = part_vectors[i] if part_vectors else None
        parts, retry = served_parts(text, vectors[i], all_parts[i], own, alone, i, vectors_for)
        yield _rank_served(
            snapshot,
            snapshot.branches(text, vectors[i], visible),
            text,
            vectors[i],
            _with(options, dynamic_cut=True, enforce_abstention=True),
            Calibration(),
            parts,
            retry,
            top_k=top_k,
        )


def places(snapshot, ranking: Ranking, wanted: set[str]) -> tuple[list[str], int | None, int | None]:
    """The ranking's tool ids, and the 1-based place of the first wanted tool in it and in the served top 10
    (None: not there; a withheld answer serves nothing)."""
    ids = [snapshot.docs[c.row].tool_id for c in ranking.candidates]
    served = [] if ranking.abstained else ids[: ranking.cut]
    rank = next((k for k, t in enumerate(ids, 1) if t in wanted), None)
    served_rank = next((k for k, t in enumerate(served[:DEPTH], 1) if t in wanted), None)
    return ids, rank, served_rank
