"""The ONNX Runtime encoder: the same weights exported locally, the same vectors and rankings as torch."""

import json
import random

import numpy as np
import pytest
from django.test import override_settings

from search.encoder import Encoder, encoder_get, model_key, model_path
from search.onnx_encoder import onnx_model_file, padded_batches, weights_digest
from search.services import tool_search

pytestmark = pytest.mark.slow

QUERIES = [
    "send an email to my manager about the outage",
    "read the config file",
    "is there a storm warning near me",
    "open a ticket for the login bug, then email the team",
    "rename the folder of last year's reports",
    "what will the weather be tomorrow in Lyon",
    "close issue 42",
    "list what is in my downloads directory",
]


@pytest.fixture(scope="module")
def both():
    """The torch and the ONNX (fp32) encoders of the same weights."""
    with override_settings(SCOUT_SEARCH_ENCODER="torch"):
        torch_encoder = encoder_get()
    with override_settings(SCOUT_SEARCH_ENCODER="onnx"):
        onnx_encoder = encoder_get()
    assert (torch_encoder.runtime, onnx_encoder.runtime) == ("torch", "onnx")
    return torch_encoder, onnx_encoder


def test_the_exported_file_is_cached_by_weights_hash_and_reused(both, settings, tmp_path):
    _, onnx_encoder = both
    path = onnx_model_file(model_path(), "fp32", settings.SCOUT_SEARCH_ENCODER_CACHE_DIR)
    assert weights_digest(model_path()) in path.name and path.stat().st_size > 1_000_000
    modified = path.stat().st_mtime_ns
    assert onnx_model_file(model_path(), "fp32", settings.SCOUT_SEARCH_ENCODER_CACHE_DIR) == path
    assert path.stat().st_mtime_ns == modified  # found, not exported again


def test_onnx_vectors_equal_torch_vectors(both):
    torch_encoder, onnx_encoder = both
    texts = [*QUERIES, "x", "word " * 400]  # one past the 256-token truncation
    np.testing.assert_allclose(onnx_encoder.encode(texts), torch_encoder.encode(texts), atol=2e-6)


def test_a_batch_pads_only_texts_of_similar_length():
    """A request and its parts (100, 90, 50, 45 and 10 tokens) are not padded to the longest together."""
    lengths = [100, 90, 50, 45, 10]
    assert padded_batches([0, 1, 2, 3, 4], lengths, 16) == [[0, 1], [2, 3], [4]]
    assert padded_batches([0, 1, 2, 3, 4], lengths, 1) == [[0], [1], [2], [3], [4]]
    assert padded_batches([7, 8, 9], [20, 20, 19], 2) == [[7, 8], [9]]


def test_short_texts_of_unlike_lengths_share_a_model_call():
    """A model call costs more than a few tokens of padding: a request's short parts (12, 9, 6 tokens) run
    together; a longer text runs apart from several short ones (22 then three of 8: 22 + 24 padded tokens and
    two calls, against 88 tokens in one)."""
    assert padded_batches([0, 1, 2], [12, 9, 6], 16) == [[0, 1, 2]]
    assert padded_batches([0, 1, 2, 3], [22, 8, 8, 8], 16) == [[0], [1, 2, 3]]
    assert padded_batches([], [], 16) == []


def test_the_batches_chosen_cost_the_least_work():
    """Against every way of cutting the texts into consecutive batches, on random lengths."""
    from itertools import combinations, pairwise

    from search.onnx_encoder import RUN_COST_TOKENS

    def work(batches, width):
        return sum(RUN_COST_TOKENS + len(batch) * width[batch[0]] for batch in batches)

    rng = random.Random(5)
    for _ in range(200):
        lengths = sorted((rng.randint(3, 120) for _ in range(rng.randint(1, 7))), reverse=True)
        order, size = list(range(len(lengths))), rng.randint(1, 4)
        chosen = padded_batches(order, lengths, size)
        assert [row for batch in chosen for row in batch] == order and max(map(len, chosen)) <= size
        every = []
        for cuts in range(len(order)):
            for points in combinations(range(1, len(order)), cuts):
                bounds = [0, *points, len(order)]
                batches = [order[a:b] for a, b in pairwise(bounds)]
                if max(map(len, batches)) <= size:
                    every.append(work(batches, lengths))
        assert work(chosen, lengths) == min(every)


def test_a_requests_texts_get_the_vectors_each_gets_alone(both):
    _, onnx_encoder = both
    texts = [QUERIES[3], "open a ticket for the login bug", "email the team", "x", "word " * 300]
    together = onnx_encoder.runner.encode(texts, 16)
    alone = np.stack([onnx_encoder.runner.encode([text], 1)[0] for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-6)


def test_onnx_gives_the_same_top_10_as_torch_on_a_fixed_catalog(both, eval_dir):
    """Documents encoded once (as the index stores them); each fixed request ranked by each runtime."""
    torch_encoder, onnx_encoder = both
    rng = random.Random(5)
    lines = (eval_dir / "catalog-livemcpbench.jsonl").read_text(encoding="utf-8").splitlines()
    tools = [json.loads(line) for line in rng.sample(lines, 300)]
    docs = torch_encoder.encode([f"{t['name']}: {t.get('description') or ''}" for t in tools])
    queries = [json.loads(line)["query"] for line in (eval_dir / "queries-livemcpbench.jsonl").read_text().splitlines()]
    requests = [*QUERIES, *rng.sample(queries, 40)]
    for query in requests:
        by_torch = np.argsort(-(docs @ torch_encoder.encode([query])[0]), kind="stable")[:10]
        by_onnx = np.argsort(-(docs @ onnx_encoder.encode([query])[0]), kind="stable")[:10]
        assert list(by_onnx) == list(by_torch), query


def test_tool_search_answers_alike_with_either_runtime(small_catalog, reindex, both, settings):
    from search.services import index_rebuild

    # torch encodes each part alone; one-pass parts (ONNX only) are other vectors (test_one_pass_parts.py).
    settings.SCOUT_SEARCH_ONE_PASS_PARTS = False

    visible = {t.pk for t in small_catalog.values()}
    with override_settings(SCOUT_SEARCH_ENCODER="torch"):
        reindex(index_rebuild)
        expected = [tool_search(query=q, visible=visible, top_k=10) for q in QUERIES]
    with override_settings(SCOUT_SEARCH_ENCODER="onnx"):
        got = [tool_search(query=q, visible=visible, top_k=10) for q in QUERIES]
    for query, want, have in zip(QUERIES, expected, got, strict=True):
        assert [m.tool_id for m in have.matches] == [m.tool_id for m in want.matches], query
        assert have.confidence == want.confidence, query


def test_int8_vectors_have_their_own_model_key():
    with override_settings(SCOUT_SEARCH_ENCODER="onnx"):
        fp32_key = model_key()
    with override_settings(SCOUT_SEARCH_ENCODER="torch"):
        assert model_key() == fp32_key  # the same vectors: stored vectors stay valid across the switch
    with override_settings(SCOUT_SEARCH_ENCODER="onnx-int8"):
        assert model_key() != fp32_key


def test_an_unknown_runtime_is_refused(settings):
    from search.encoder import EncoderUnavailable

    with pytest.raises(EncoderUnavailable, match="SCOUT_SEARCH_ENCODER"):
        Encoder(model_path(), "k", runtime="tensorflow")
