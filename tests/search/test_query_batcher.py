"""The micro-batcher: requests waiting at the same moment share one model call, each gets its own vectors."""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from search.encoder import QueryBatcher, query_cache

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def no_cached_vectors():
    query_cache().clear()
    yield
    query_cache().clear()


class HeldModel:
    """The real encoder's ``encode``, held at its first call until released, recording each call's texts:
    requests made meanwhile queue up behind it, deterministically."""

    def __init__(self, encoder) -> None:
        self.encoder = encoder
        self.calls: list[list[str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if len(self.calls) == 1:
            self.entered.set()
            assert self.release.wait(60)
        return self.encoder.encode(texts)


def test_waiting_requests_share_one_call_and_each_gets_its_own_vectors(encoder):
    model = HeldModel(encoder)
    batcher = QueryBatcher(model)
    first = ["list my open tickets"]
    waiting = [["send an invoice"], ["read a file", "then email it to Bob"], ["weather in Oslo"], ["close issue 7"]]
    with ThreadPoolExecutor(8) as pool:
        head = pool.submit(batcher.encode, first)
        assert model.entered.wait(60)
        futures = [pool.submit(batcher.encode, texts) for texts in waiting]
        while batcher.waiting() < len(waiting):  # all queued behind the held call
            threading.Event().wait(0.01)
        model.release.set()
        answers = [future.result(60) for future in futures]
        np.testing.assert_allclose(head.result(60), encoder.encode(first), atol=1e-5)
    assert len(model.calls) == 2  # the held call, then every waiting request in one call
    assert sorted(model.calls[1]) == sorted(text for texts in waiting for text in texts)
    for texts, vectors in zip(waiting, answers, strict=True):
        assert vectors.shape == (len(texts), encoder.dim)
        np.testing.assert_allclose(vectors, encoder.encode(texts), atol=1e-5)  # its own rows, in its order


def test_a_lone_request_runs_the_model_in_its_own_thread(encoder):
    """No hand-off to another thread when nobody else is encoding (issue 9: it cost latency at c=1)."""
    threads = []

    def model(texts: list[str]) -> np.ndarray:
        threads.append(threading.current_thread())
        return encoder.encode(texts)

    batcher = QueryBatcher(model)
    np.testing.assert_allclose(batcher.encode(["list files"]), encoder.encode(["list files"]), atol=1e-5)
    assert threads == [threading.current_thread()]
    assert (batcher.batches, batcher.requests, batcher.waiting()) == (1, 1, 0)


def test_a_model_error_reaches_every_request_of_its_batch_and_the_next_batch_runs(encoder):
    calls = []

    def flaky(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        if len(calls) == 1:
            raise RuntimeError("model failed")
        return encoder.encode(texts)

    batcher = QueryBatcher(flaky)
    with pytest.raises(RuntimeError, match="model failed"):
        batcher.encode(["anything"])
    np.testing.assert_allclose(batcher.encode(["list files"]), encoder.encode(["list files"]), atol=1e-5)


def test_concurrent_searches_through_the_encoder_get_their_own_vectors(encoder):
    texts = [f"find the {noun} report for team {i}" for i, noun in enumerate(["sales", "ops", "hr", "it"] * 6)]
    expected = encoder.encode(texts)
    before = encoder.batcher.requests
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda text: encoder.encode_queries([text])[0], texts))
    np.testing.assert_allclose(np.stack(answers), expected, atol=1e-5)
    assert encoder.batcher.requests - before == len(texts)  # every request went through the batcher
