"""scout_eval's vector cache shared by several runs: each write is whole and atomic, so a run reading the directory
never pairs one run's keys with another's vectors, and no run's vectors are lost to another's write."""

import hashlib
import multiprocessing
from pathlib import Path

import numpy as np

from search.evaluation import EmbeddingCache


def _encode(texts: list[str]) -> np.ndarray:
    """A vector that only its own text gives: a wrong pairing of keys and vectors shows."""
    return np.asarray(
        [np.frombuffer(hashlib.sha256(text.encode()).digest(), np.uint8)[:8].astype(np.float32) for text in texts]
    )


def _build(directory: str, label: str, start, done) -> None:
    """One run: many small batches, each saved, some texts shared with the other run."""
    start.wait()
    cache = EmbeddingCache(Path(directory), "model", _encode)
    for batch in range(40):
        cache.vectors([f"{label} {batch}", f"shared {batch}", f"{label} {batch} again"])
    done.put(cache.encoded)


def test_two_runs_sharing_a_cache_directory_keep_it_whole(tmp_path):
    context = multiprocessing.get_context("fork")
    start, done = context.Barrier(2), context.Queue()
    runs = [context.Process(target=_build, args=(str(tmp_path), label, start, done)) for label in ("a", "b")]
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=120)
        assert run.exitcode == 0
    assert sorted(done.get(timeout=5) for _ in runs)[0] >= 80  # each encoded its own texts at least

    texts = [f"{label} {batch}{again}" for label in "ab" for batch in range(40) for again in ("", " again")]
    texts += [f"shared {batch}" for batch in range(40)]
    reader = EmbeddingCache(tmp_path, "model", lambda texts: (_ for _ in ()).throw(AssertionError("re-encoded")))
    assert np.array_equal(reader.vectors(texts), _encode(texts))  # every text saved, each with its own vector
    assert [p.name for p in (tmp_path / "model").iterdir() if p.name != ".lock"] == [EmbeddingCache.CACHE_FILE]
