"""The model's vector of each document text, kept for the test session.

Every transactional test ends with its database emptied (tests/dbreset.py), stored vectors (ToolEmbedding) with
it, so each test's index build encoded again the same tools' texts the tests before it had encoded: the demo's,
calc's and time's, LiveMCPBench's catalog in several modules. The encoder (``search.encoder.Encoder``) still
counts, chunks and reports progress as before; only its model pass for a text the session's encoder already
encoded as a document is taken from here: the real model's vector for exactly that text (a text within a chunk of
other texts gives the same vector to within float rounding, as any re-encoding does).

Search requests are not kept: they go through the query-vector cache and the micro-batcher (``encode_requests``),
whose tests count model runs and compare the time of a hit with a miss.
"""

import threading

import numpy as np

_requests = threading.local()  # set while this thread encodes search requests


def install() -> None:
    from search.encoder import Encoder

    model_pass = Encoder._encode
    encode_requests = Encoder.encode_requests

    def requests_not_kept(self: Encoder, requests):
        _requests.active = True
        try:
            return encode_requests(self, requests)
        finally:
            _requests.active = False

    def kept_model_pass(self: Encoder, texts: list[str], batch_size: int) -> np.ndarray:
        if getattr(_requests, "active", False):
            return model_pass(self, texts, batch_size)
        kept: dict[str, np.ndarray] = self.__dict__.setdefault("_session_vectors", {})
        missing = [text for text in dict.fromkeys(texts) if text not in kept]
        if missing:
            kept.update(zip(missing, model_pass(self, missing, batch_size), strict=True))
        return np.stack([kept[text] for text in texts])

    Encoder._encode = kept_model_pass
    Encoder.encode_requests = requests_not_kept
