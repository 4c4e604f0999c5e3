"""The MiniLM weights run by ONNX Runtime: exported here, from the local weights, never downloaded.

``onnx_model_file`` exports the sentence-transformers model (transformer, mean pooling, L2 normalisation:
one graph whose output is the sentence vector) with torch's exporter the first time it is needed, and
keeps the file under SCOUT_SEARCH_ENCODER_CACHE_DIR keyed by a hash of the weights, the precision and this
exporter's version. Later loads read the file and never import torch. ``int8`` is the fp32 graph with
ONNX Runtime's dynamic int8 quantisation of its weights.

``OnnxRunner.encode`` gives the vectors sentence-transformers gives for the same texts (same tokenizer
file, same truncation, same pooling): within 1e-6 for fp32 (tests/search/test_onnx_encoder.py). The graph
also outputs the token embeddings: ``OnnxRunner.encode_requests`` pools a multi-step request's parts from
its one pass (SCOUT_SEARCH_ONE_PASS_PARTS; tests/search/test_one_pass_parts.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .engine.decompose import Part

logger = logging.getLogger(__name__)
# Bump when the exported graph changes (inputs, pooling, opset): old cached files are then not reused.
EXPORT_VERSION = "2"  # 2: the token embeddings are a second output (one-pass part vectors)
PRECISIONS = ("fp32", "int8")
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "config.json", "tokenizer.json", "modules.json")


def weights_digest(model_path: str) -> str:
    """A hash of the files that decide the vectors (weights, config, tokenizer, module list)."""
    digest = hashlib.sha256(EXPORT_VERSION.encode())
    for name in _WEIGHT_FILES:
        path = Path(model_path) / name
        if not path.is_file():
            continue
        digest.update(name.encode())
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:24]


def onnx_model_file(model_path: str, precision: str, cache_dir: str) -> Path:
    """The exported model file for ``model_path`` at ``precision``, exported (and quantised) when absent."""
    if precision not in PRECISIONS:
        raise ValueError(f"ONNX precision must be one of {', '.join(PRECISIONS)}")
    directory = Path(cache_dir)
    directory.mkdir(parents=True, exist_ok=True)
    digest = weights_digest(model_path)
    target = directory / f"minilm-{digest}-{precision}.onnx"
    if target.is_file():
        return target
    fp32 = directory / f"minilm-{digest}-fp32.onnx"
    if not fp32.is_file():
        _atomic_write(fp32, lambda tmp: _export(model_path, tmp))
    if precision == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        _atomic_write(target, lambda tmp: quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8))
    return target


def _atomic_write(target: Path, write) -> None:
    """Write through a temporary file in the same directory and rename: two processes exporting at once
    each produce a whole file, and a reader never sees half of one."""
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}-", suffix=".onnx")
    os.close(handle)
    try:
        write(Path(name))
        os.chmod(name, 0o644)  # mkstemp's 0600 would hide it from another service user sharing var/
        os.replace(name, target)
    finally:
        if os.path.exists(name):
            os.unlink(name)


def _export(model_path: str, out: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer

    logger.info("search: exporting the embedding model to ONNX (%s)", out.name)
    model = SentenceTransformer(model_path, device="cpu", local_files_only=True)
    transformer = model[0].auto_model

    class SentenceVector(torch.nn.Module):
        """Transformer, mean pooling over real tokens, L2 normalisation: the model's three modules. The
        transformer's token embeddings are a second output (``OnnxRunner.encode_requests`` pools spans of them)."""

        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1), hidden

    _check_modules(model)
    examples = ["an example request", "a second, longer example request"]
    sample = model.tokenizer(examples, padding=True, return_tensors="pt")
    # The tracer warns about Python-level branches in the transformer's masking code; the graph is checked
    # against the torch model's vectors (tests/search/test_onnx_encoder.py), so the warnings are noise here.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            SentenceVector().eval(),
            tuple(sample[name] for name in _INPUTS),
            str(out),
            input_names=list(_INPUTS),
            output_names=["sentence_embedding", "token_embeddings"],
            dynamic_axes={
                **{name: {0: "batch", 1: "tokens"} for name in _INPUTS},
                "sentence_embedding": {0: "batch"},
                "token_embeddings": {0: "batch", 1: "tokens"},
            },
            opset_version=17,
            dynamo=False,  # the TorchScript exporter: no onnxscript dependency, stable for BERT graphs
        )


def _check_modules(model) -> None:
    """The graph above hard-codes mean pooling and normalisation: refuse a model built otherwise."""
    names = [type(module).__name__ for module in model]
    pooling = model[1] if len(names) > 1 else None
    mode = getattr(pooling, "pooling_mode", None)
    if names[:1] != ["Transformer"] or mode != "mean" or names[2:] != ["Normalize"]:
        raise ValueError(f"ONNX export supports Transformer + mean Pooling + Normalize models, not {names}")


class OnnxRunner:
    """Tokenizer (the model's tokenizer.json) and an ONNX Runtime session with one intra-op thread."""

    def __init__(self, model_path: str, model_file: Path, threads: int) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        config = json.loads((Path(model_path) / "sentence_bert_config.json").read_text())
        self.max_tokens = int(config.get("max_seq_length") or 256)
        self.tokenizer = Tokenizer.from_file(str(Path(model_path) / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_tokens)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        self.dim = int(self.session.get_outputs()[0].shape[-1])
        self.runs = 0  # model calls (session runs): tests count them

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """Unit vectors; texts are sorted by token count and run up to ``batch_size`` at a time, each batch
        padded to its longest text (see ``padded_batches``). Padding never changes a vector (the attention
        mask hides it); it only costs time."""
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        result = np.zeros((len(texts), self.dim), np.float32)
        for rows in padded_batches(order, [len(encodings[i].ids) for i in order], batch_size):
            result[rows] = self._run([encodings[i] for i in rows], ["sentence_embedding"])[0]
        return result

    def encode_requests(self, requests: Sequence[tuple[str, Sequence[Part]]], batch_size: int) -> list[np.ndarray]:
        """For each (request, parts): the request's vector (row 0, as ``encode`` gives it) and each part's
        vector (rows 1..), from one model pass over the request: the mean of the request's token embeddings
        over the part's spans, L2-normalised as the sentence vector is, less PART_REQUEST_SHARE of the
        request's vector. A part the truncation cut off (the request is longer than the model's max length)
        is encoded alone, as ``encode`` would."""
        encodings = self.tokenizer.encode_batch([text for text, _ in requests])
        order = sorted(range(len(requests)), key=lambda i: -len(encodings[i].ids))
        result = [np.zeros((1 + len(parts), self.dim), np.float32) for _, parts in requests]
        alone: list[tuple[int, int, str]] = []  # (request, row, text) of the parts the truncation cut off
        for rows in padded_batches(order, [len(encodings[i].ids) for i in order], batch_size):
            sentences, tokens = self._run([encodings[i] for i in rows], ["sentence_embedding", "token_embeddings"])
            for row, i in enumerate(rows):
                result[i][0] = sentences[row]
                truncated = len(encodings[i].ids) >= self.max_tokens
                for j, part in enumerate(requests[i][1], start=1):
                    members = span_tokens(encodings[i].offsets, encodings[i].special_tokens_mask, part.spans, truncated)
                    if members:
                        pooled = _unit(tokens[row, members].mean(axis=0))
                        result[i][j] = _unit(pooled - PART_REQUEST_SHARE * sentences[row])
                    else:
                        alone.append((i, j, part.text))
        if alone:
            for (i, j, _), vector in zip(alone, self.encode([text for *_, text in alone], batch_size), strict=True):
                result[i][j] = vector
        return result

    def _run(self, encodings: list, outputs: list[str]) -> list[np.ndarray]:
        """One model call on ``encodings`` (longest first), padded to the first one's length."""
        width = len(encodings[0].ids)
        ids = np.zeros((len(encodings), width), np.int64)
        mask = np.zeros((len(encodings), width), np.int64)
        types = np.zeros((len(encodings), width), np.int64)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            ids[row, :n] = encoding.ids
            mask[row, :n] = encoding.attention_mask
            types[row, :n] = encoding.type_ids
        self.runs += 1
        return self.session.run(outputs, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})


def span_tokens(
    offsets: Sequence[tuple[int, int]], special: Sequence[int], spans: Sequence[tuple[int, int]], truncated: bool
) -> list[int]:
    """The tokens (by position) whose characters fall in ``spans``; [] when the truncation cut off any of
    a span's text (the part must then be encoded alone). Special tokens ([CLS], [SEP]) are never in a span."""
    words = [(t, start, end) for t, ((start, end), flag) in enumerate(zip(offsets, special, strict=True)) if not flag]
    if truncated and any(end > max((e for _, _, e in words), default=0) for _, end in spans):
        return []
    return [t for t, start, end in words if any(start < stop and end > begin for begin, stop in spans)]


def _unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` scaled to unit length as torch's normalize does (its norm floored at 1e-12)."""
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


# Tokens embedded in their request carry the whole request: a part's pooled vector, less this share of the
# request's vector, is told apart from its neighbours better (ToolBench, MetaTool: the sets it was chosen on;
# figures in the commit that made SCOUT_SEARCH_ONE_PASS_PARTS the default).
PART_REQUEST_SHARE = 0.35

# What one model call costs beyond its tokens, in tokens: a run of MiniLM on this machine's CPUs takes about
# 2.6 ms plus 0.14 ms per token it is given, padding included (one to six texts of 4 to 96 tokens).
RUN_COST_TOKENS = 20


def padded_batches(order: list[int], lengths: list[int], batch_size: int) -> list[list[int]]:
    """``order`` (longest first, ``lengths`` their token counts) cut into batches of at most ``batch_size``
    texts, each padded to its first (longest) text's length, so that the model's estimated work is least: a
    batch costs RUN_COST_TOKENS plus its texts times its width. Consecutive texts only (the order is by
    length), chosen exactly (a shortest path over the cut points; a few dozen texts per call).

    Texts of very different lengths run apart (a request and its far shorter parts: padded together most of
    the work was padding, 50.8 ms of CPU per request against 31.2 ms one text at a time); short texts of
    unlike lengths run together, a model call costing more than their padding (a request's parts encoded
    alone, 10.0 -> 8.6 ms of CPU per retried request on the HTTP bench's mix)."""
    count = len(order)
    cost = [0] + [0] * count  # cost[j]: the least work for the first j texts; cut[j]: where its last batch starts
    cut = [0] * (count + 1)
    for end in range(1, count + 1):
        options = (
            (cost[s] + RUN_COST_TOKENS + (end - s) * lengths[s], s) for s in range(max(0, end - batch_size), end)
        )
        cost[end], cut[end] = min(options)
    batches: list[list[int]] = []
    end = count
    while end:
        batches.append(list(order[cut[end] : end]))
        end = cut[end]
    return batches[::-1]
