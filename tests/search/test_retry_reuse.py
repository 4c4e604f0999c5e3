"""A withheld answer is asked again only for what its first search had from the request's one pass: the pooled
part vectors. The request's vector and its implied steps' (``decompose.implied_steps``) were encoded alone
already, in the request's one model call, and the retry reuses them: a request without parts is never searched
again (it would be searched with the very vectors it was), and a request with parts encodes only its parts.
Served answers are those of the old path (every step encoded alone again, then searched again)."""

import pytest

from search.backends import SearchRequest, backend_get
from search.encoder import query_cache
from search.engine.decompose import WRITE_STEP, implied_steps, request_part_spans
from search.engine.ranking import Confidence
from search.services import index_rebuild, tool_search

pytestmark = pytest.mark.slow

# Over the small catalog without its file tools: nothing fits, and each request names a text file to save to.
ONE_STEP = "paint the garden fence blue with the notes saved to ./fence.md"
THREE_STEPS = "paint the garden fence blue, then feed the goldfish twice, and save the notes to ./chores.md"


@pytest.fixture
def model_calls(encoder, settings, monkeypatch):
    """The real encoder with one-pass parts and an empty request cache; counts its request-path model calls
    (the micro-batcher's, each run through to the model) and the backend's searches."""
    settings.SCOUT_SEARCH_ONE_PASS_PARTS = True
    query_cache().clear()
    seen = {"model": 0, "searches": 0}
    model = encoder.batcher._encode
    backend = backend_get()
    search = type(backend).search

    def counted_model(items):
        seen["model"] += 1
        return model(items)

    def counted_search(self, request):
        seen["searches"] += 1
        return search(self, request)

    monkeypatch.setattr(encoder.batcher, "_encode", counted_model)
    monkeypatch.setattr(type(backend), "search", counted_search)
    yield seen
    query_cache().clear()


def _answer(result):
    return result.confidence, [
        (m.tool_id, round(m.score, 5), m.fused_rank, m.bm25_rank, m.dense_rank, m.why_matched) for m in result.matches
    ]


def _old_path(encoder, query, visible):
    """The answer as the old path served it: a first search with the one-pass vectors, and, withheld, a second
    with every step (the implied ones too) encoded alone again."""
    parts = request_part_spans(query)
    texts = [part.text for part in parts] or [query]
    texts += implied_steps(query)
    vectors = encoder.encode_request(query, parts)
    first_steps = [*zip([p.text for p in parts], vectors[1:], strict=True)] or [(query, vectors[0])]
    first_steps += [(text, encoder.encode([text])[0]) for text in implied_steps(query)]
    request = SearchRequest(
        query=query,
        visible=visible,
        top_k=5,
        fusion="convex",
        query_vector=vectors[0],
        parts=tuple(first_steps),
        enforce_abstention=False,
    )
    first = backend_get().search(request)
    assert first.confidence is Confidence.NONE  # so the old path searched again
    again = tuple(zip(texts, encoder.encode(texts), strict=True))
    return backend_get().search(SearchRequest(**{**request.__dict__, "parts": again}))


@pytest.mark.parametrize(
    ("query", "parts", "counts"),
    [
        # The request and its implied step in one model call (two before: the request, then the step), and no
        # second search (before: searched again with the same vectors, both encoded alone already).
        (ONE_STEP, 0, {"model": 1, "searches": 1}),
        # The request's pass with its implied step, then its parts alone: two model calls (three before).
        (THREE_STEPS, 3, {"model": 2, "searches": 2}),
    ],
)
def test_a_withheld_request_encodes_again_only_its_pooled_parts(
    encoder, small_catalog, reindex, model_calls, query, parts, counts
):
    reindex(index_rebuild)
    visible = frozenset(t.pk for t in small_catalog.values() if t.server.slug != "files")
    assert len(request_part_spans(query)) == parts and implied_steps(query) == [WRITE_STEP]
    served = tool_search(query=query, visible=visible, top_k=5)
    assert served.confidence is Confidence.NONE
    assert model_calls == counts
    query_cache().clear()
    assert _answer(tool_search(query=query, visible=visible, top_k=5, enforce_abstention=False)) == _answer(
        _old_path(encoder, query, visible)
    )
