"""The rankings scout_eval serves, for the bench scripts that read them request by request."""

from collections.abc import Iterator

from search.engine.decompose import request_parts
from search.engine.ranking import Calibration, Ranking
from search.evaluation import DEPTH, _part_vectors, _rank_served, _with, served_parts


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
