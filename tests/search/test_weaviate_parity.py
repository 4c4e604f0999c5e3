"""Both backends give the same answer to the same request, on a public eval catalog.

The embedded backend ranks its in-process snapshot. The Weaviate backend is the real backend talking to
the real weaviate client, whose server is tests/search/fake_weaviate.py: the collection is written by the
backend's own build (batch inserts over gRPC) and every dense head and fetch is a real gRPC Search. The
requests: LiveMCPBench's (mostly multi-step) and one-line requests made of each tool's own words, with all
tools visible and with a third of them hidden, both fusions, plus nonsense (abstention). Answers must be
identical: ids, order, scores, ranks, cut, confidence and why_matched.
"""

import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from django.test import override_settings

from search.backends import IndexedTool, SearchRequest
from search.backends.embedded import EmbeddedBackend
from search.backends.ranked import rank_request
from search.backends.weaviate import WeaviateBackend
from search.encoder import encoder_get, model_key
from search.engine.decompose import request_parts
from search.engine.ranking import Confidence
from search.engine.snapshot import IndexSnapshot
from search.evaluation import EmbeddingCache, doc_vectors, load_catalogs, read_jsonl
from search.selectors import generation_token_keep

from .fake_weaviate import FakeWeaviate

pytestmark = [pytest.mark.eval_data, pytest.mark.slow]
GENERATION = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
NONSENSE = ["qzxv plorkt wembly", "zzyzx frobnicate the quuxes", "blorft snargle"]


@pytest.fixture(scope="module")
def catalog(eval_dir):
    """LiveMCPBench's catalog with vectors from the real model, encoded once for the module."""
    docs = load_catalogs([eval_dir / "catalog-livemcpbench.jsonl"])
    # Learned requests on a few tools (each wording its own vector, and their centroid): other requests of
    # the same set, so they are near what is asked.
    later = [row["query"] for row in read_jsonl(eval_dir / "queries-livemcpbench.jsonl")][60:78]
    for i, row in enumerate(random.Random(3).sample(range(len(docs)), 6)):
        learned = tuple((text, 0.6) for text in later[3 * i : 3 * i + 3])
        docs[row] = replace(docs[row], learned=learned, learned_centroid=0.8)
    encoder = encoder_get()
    # The eval commands' on-disk vector cache: encoded on the first run only.
    vectors_for = EmbeddingCache(Path(settings.SCOUT_SEARCH_EVAL_CACHE_DIR), model_key(), encoder.encode).vectors
    vectors = doc_vectors(docs, vectors_for)
    queries = [row["query"] for row in read_jsonl(eval_dir / "queries-livemcpbench.jsonl")][:60]
    rng = random.Random(15)
    sampled = rng.sample(docs, 40)
    queries += [f"{doc.name.replace('_', ' ')} {doc.description.split('.')[0][:80]}" for doc in sampled]
    queries += NONSENSE
    texts = [q for query in queries for q in (query, *request_parts(query))]
    encoded = dict(zip(texts, encoder.encode_queries(texts), strict=True))
    return docs, vectors, queries, encoded


@pytest.fixture(scope="module")
def fake():
    server = FakeWeaviate().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def backends(catalog, fake):
    """(embedded, weaviate), both at GENERATION over the same tools and vectors."""
    docs, vectors, _, _ = catalog
    embedded = EmbeddedBackend()
    embedded._snapshot = IndexSnapshot(docs, vectors, generation=GENERATION)
    with override_settings(
        WEAVIATE_URL=fake.url,
        WEAVIATE_GRPC_URL=fake.grpc_url,
        SCOUT_WEAVIATE_DROP_GRACE_SECONDS=0,
        SCOUT_WEAVIATE_TIMEOUT=30.0,  # about answers, not time: the fake is Python on a shared machine
    ):
        weaviate = WeaviateBackend()
        client = weaviate.connect()
        weaviate.local_refresh(GENERATION, docs)
        weaviate.build(client, GENERATION, [IndexedTool(doc, vectors.get(doc.pk)) for doc in docs])
        weaviate.refresh_target()
        yield embedded, weaviate
        weaviate.reset()


@pytest.fixture
def current(backends, fake):
    generation_token_keep(GENERATION, seconds=3600)
    # A generous deadline: this suite is about answers; the fake server is Python on a shared machine.
    with override_settings(WEAVIATE_URL=fake.url, WEAVIATE_GRPC_URL=fake.grpc_url, SCOUT_WEAVIATE_TIMEOUT=30.0):
        yield backends


def answer(result):
    return (
        result.index_ready,
        result.degraded,
        result.confidence,
        [
            (m.tool_id, m.score, m.fused_rank, m.bm25_rank, m.dense_rank, repr(sorted(m.why_matched.items())))
            for m in result.matches
        ],
    )


def requests_for(catalog):
    docs, _, queries, encoded = catalog
    pks = [doc.pk for doc in docs]
    rng = random.Random(7)
    hidden = set(rng.sample(pks, len(pks) // 3))
    partial = frozenset(pk for pk in pks if pk not in hidden)
    for i, query in enumerate(queries):
        parts = tuple((part, encoded[part]) for part in request_parts(query))
        for visible in (frozenset(pks), partial):
            fusion = "rrf" if i % 4 == 3 else "convex"
            top_k = (5, 10, 20)[i % 3]
            yield SearchRequest(
                query=query, visible=visible, top_k=top_k, fusion=fusion, query_vector=encoded[query], parts=parts
            )


def test_both_backends_answer_identically(current, catalog, fake):
    embedded, weaviate = current
    searches_before = fake.searches
    compared, identical, differences = 0, 0, []
    kinds = {"multi_step": 0, "hidden": 0, "abstained": 0, "low": 0, "high": 0}
    for request in requests_for(catalog):
        ours, theirs = embedded.search(request), weaviate.search(request)
        compared += 1
        assert theirs.backend == "weaviate" and not theirs.degraded, theirs.degraded_reason
        if answer(ours) == answer(theirs):
            identical += 1
        else:
            differences.append((request.query, request.fusion, len(request.visible), answer(ours), answer(theirs)))
        kinds["multi_step"] += bool(request.parts)
        kinds["hidden"] += len(request.visible) < len(catalog[0])
        kinds[{Confidence.NONE: "abstained", Confidence.LOW: "low", Confidence.HIGH: "high"}[ours.confidence]] += 1
    calls = (fake.searches - searches_before) / compared
    print(f"parity: {identical} of {compared} requests identical; {kinds}; {calls:.1f} gRPC searches a request")
    assert not differences, differences[:3]
    assert fake.searches > searches_before + compared  # every request went to the server (heads, fetches)
    # The requests cover what the parity must hold for.
    assert kinds["multi_step"] >= 50 and kinds["hidden"] >= compared // 2
    assert kinds["abstained"] >= len(NONSENSE) and kinds["low"] >= 3 and kinds["high"] >= 20


def test_hidden_tools_answer_as_if_they_did_not_exist(current, catalog):
    """The contract on the server-backed path: the answer over a visible subset of a collection is the
    answer of an index holding only that subset (the hidden tools' words and vectors change nothing)."""
    _, weaviate = current
    docs, vectors, queries, encoded = catalog
    rng = random.Random(3)
    shown = sorted(rng.sample(range(len(docs)), len(docs) // 2))
    alone = IndexSnapshot([docs[i] for i in shown], vectors, generation=GENERATION)
    visible = frozenset(docs[i].pk for i in shown)
    for query in queries[::10]:
        parts = tuple((part, encoded[part]) for part in request_parts(query))
        request = SearchRequest(
            query=query, visible=visible, top_k=10, fusion="convex", query_vector=encoded[query], parts=parts
        )
        truth = rank_request(alone, request, EmbeddedBackend.dense_source(alone, request), backend="weaviate")
        assert answer(weaviate.search(request)) == answer(truth)


def test_the_dense_head_alone_is_not_enough_and_fetches_fill_in(current, catalog):
    """Candidates outside the server's dense head (BM25-only matches) are fetched, not guessed."""
    _, weaviate = current
    docs, _, _, encoded = catalog
    doc = docs[11]
    query = f"{doc.name} {doc.name}"
    vector = encoder_get().encode_queries([query])[0]
    request = SearchRequest(
        query=query, visible=frozenset(d.pk for d in docs), top_k=10, fusion="rrf", query_vector=vector
    )
    local = weaviate.local_snapshot()
    dense = weaviate._remote_dense(local, request)
    result = rank_request(local, request, dense, backend="weaviate")
    assert dense.fetched_rows > 0  # BM25 candidates outside the head were fetched
    assert answer(result) == answer(current[0].search(request))
    assert np.isfinite(dense.floors[0])


def test_tools_tied_at_the_end_of_the_dense_head_keep_their_dense_ranks(current, catalog):
    """Tools sharing a vector (desktop-commander's) tie at the end of the server's dense head for this
    request: a tool left out of the head, scored at the head's lowest cosine, would tie the reported ones and
    could precede them by tool id. The head is asked deeper until its lowest cosine is below every reported
    rank's, so the dense ranks served are a full scan's."""
    embedded, weaviate = current
    docs, vectors, queries, encoded = catalog
    query = next(q for q in queries if q.startswith("Create a Next.js middleware"))
    parts = tuple((part, encoded[part]) for part in request_parts(query))
    request = SearchRequest(
        query=query,
        visible=frozenset(d.pk for d in docs),
        top_k=20,
        fusion="convex",
        query_vector=encoded[query],
        parts=parts,
    )
    depth = 64  # RankingOptions.dense_rank_depth
    cosines = np.sort(IndexSnapshot(docs, vectors).dense.score(encoded[query]).scores)[::-1]
    assert cosines[depth - 1] == cosines[depth]  # the case: a tie across the end of the first head
    dense = weaviate._remote_dense(weaviate.local_snapshot(), request)
    assert dense.floors[0] < cosines[depth - 1]
    ours, theirs = embedded.search(request), weaviate.search(request)
    assert any(m.dense_rank and m.dense_rank > depth - 8 for m in ours.matches)  # a served tool near the end
    assert answer(theirs) == answer(ours)
