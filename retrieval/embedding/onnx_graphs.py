"""ONNX graphs of the packaged MiniLM, each built once from the installed weights and kept in the virtualenv: the
fp32 graph with fused kernels (the default) and its int8 variants; and the execution providers to run them on.

The export writes BERT's attention in its classic form (scores + additive mask, softmax), which ONNX Runtime's
transformer optimiser fuses into one Attention kernel per layer (plus EmbedLayerNormalization, SkipLayerNormalization
and BiasGelu); the SDPA form transformers exports by default fuses only the layer norms and GELU.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ONNX_OPSET = 17
GRAPH_FORMAT = 2  # 2: classic attention exported and fused (1 was the plain SDPA export)
MAX_TOKENS = 256  # the packaged model's max_seq_length (sentence-transformers truncates there too)

# KG_EMBED_MODEL value -> what the graph is (README, Settings). Vectors of the fp32 graphs equal
# sentence-transformers' (cosine >= 0.9999, tested); the int8 ones differ and carry their own embedder name.
VARIANTS: dict[str, str] = {
    "minilm": "fp32, kernels fused (the default)",
    "minilm-plain": "fp32 as exported, nothing fused (the reference for benchmarks)",
    "minilm-int8": "dynamic int8: every MatMul and attention, weights per output channel",
    "minilm-int8-partial": "dynamic int8 as minilm-int8 except each layer's FFN output projection (whose input, "
    "GELU's output, has the widest range)",
    "minilm-int8-static": "static int8 (QDQ) of every MatMul, activations calibrated on the demo library's texts",
}
CALIBRATION_DIR = Path(__file__).resolve().parents[2] / "data" / "demo"  # texts written for this project


def onnx_cache_dir() -> Path:
    """Where exported ONNX graphs are kept: inside the virtualenv, next to the packages they derive from."""
    return Path(sys.prefix) / "share" / "kg-lens" / "onnx"


def _model_key(model_dir: Path) -> str:
    h = hashlib.sha256()
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        f = model_dir / name
        h.update(f"{name}:{f.stat().st_size}:".encode())
    h.update((model_dir / "config.json").read_bytes())
    return h.hexdigest()[:16]


def graph_path(model_dir: Path, variant: str = "minilm") -> Path:
    """The cached graph file of `variant` for the model at `model_dir`."""
    suffix = "" if variant == "minilm" else "-" + variant.removeprefix("minilm-")
    return onnx_cache_dir() / (f"{model_dir.parent.name}-{_model_key(model_dir)}-opset{ONNX_OPSET}"
                               f"-g{GRAPH_FORMAT}{suffix}.onnx")


def _atomic(out: Path, write: Callable[[str], None]) -> None:
    """`write(tmp)` then rename onto `out`: a killed build leaves no half graph under the real name."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".export-", suffix=".partial")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)


def export_plain(model_dir: Path, out: Path) -> None:
    """Export the transformer (token embeddings) to ONNX with torch, locally, with classic BERT attention."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    heads = int(model.config.num_attention_heads)
    width = int(model.config.hidden_size) // heads

    class _Encoder(torch.nn.Module):
        """BertModel's forward written out: the additive mask and scaled scores the optimiser recognises."""

        def __init__(self, bert: Any) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            h = self.bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
            mask = (1.0 - attention_mask.unsqueeze(1).unsqueeze(2).to(h.dtype)) * -10000.0
            batch, seq = h.shape[0], h.shape[1]
            for layer in self.bert.encoder.layer:
                att = layer.attention.self

                def split(x: Any, b: Any = batch, s: Any = seq) -> Any:
                    return x.view(b, s, heads, width).permute(0, 2, 1, 3)

                q, k, v = split(att.query(h)), split(att.key(h)), split(att.value(h))
                scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(width) + mask
                ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).reshape(batch, seq, -1)
                h1 = layer.attention.output.LayerNorm(layer.attention.output.dense(ctx) + h)
                h = layer.output.LayerNorm(layer.output.dense(layer.intermediate(h1)) + h1)
            return h

    names = ["input_ids", "attention_mask", "token_type_ids"]
    dummy = tuple(torch.ones((2, 8), dtype=torch.long) for _ in names)

    def write(tmp: str) -> None:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes about shape-dependent branches
            torch.onnx.export(
                _Encoder(model), dummy, tmp, input_names=names, output_names=["tokens"],
                dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "tokens"]},
                opset_version=ONNX_OPSET, dynamo=False,
            )

    _atomic(out, write)


def fuse(plain: Path, out: Path, heads: int, hidden: int) -> None:
    """ONNX Runtime's BERT optimiser: Attention, EmbedLayerNormalization, SkipLayerNormalization, BiasGelu."""
    from onnxruntime.transformers.optimizer import optimize_model

    model = optimize_model(str(plain), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=0,
                           use_gpu=False)
    _atomic(out, model.save_model_to_file)


def _ffn_outputs(path: Path) -> list[str]:
    """Names of the MatMuls that project a layer's FFN back to the hidden size (weight intermediate x hidden)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    shapes = {init.name: tuple(init.dims) for init in model.graph.initializer}
    return [n.name for n in model.graph.node
            if n.op_type == "MatMul" and any(len(shapes.get(i, ())) == 2 and shapes[i][0] > shapes[i][1]
                                             for i in n.input)]


def calibration_texts(root: Path = CALIBRATION_DIR, limit: int = 150) -> list[str]:
    """Entity, relation and chunk texts of the demo library (written for this project), for static int8."""
    texts: list[str] = []
    for name, fields in (("entities.jsonl", ("name", "description")), ("relations.jsonl", ("description",)),
                         ("chunks.jsonl", ("text",))):
        with open(root / name, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()][:limit]
        texts += [": ".join(str(r.get(k, "")) for k in fields if r.get(k)) for r in rows]
    return [t for t in texts if t]


def batches(encodings: Sequence[Any], size: int) -> Iterator[tuple[list[int], dict[str, np.ndarray]]]:
    """(rows, feed) per batch of `size` encodings, similar lengths together (padding is computed, so it costs)."""
    order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
    for start in range(0, len(order), size):
        rows = order[start : start + size]
        width = max(len(encodings[i].ids) for i in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for r, i in enumerate(rows):
            n = len(encodings[i].ids)
            ids[r, :n] = encodings[i].ids
            mask[r, :n] = 1
        yield rows, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def quantize(fused: Path, plain: Path, out: Path, variant: str, tokenizer: Any) -> None:
    """Write the int8 `variant` (see VARIANTS) of the fp32 graphs."""
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    # The fused graph's contrib ops have no ONNX shape inference: their outputs are float.
    extra = {"DefaultTensorType": onnx.TensorProto.FLOAT}
    if variant in ("minilm-int8", "minilm-int8-partial"):
        skip = _ffn_outputs(fused) if variant == "minilm-int8-partial" else []
        _atomic(out, lambda tmp: quantize_dynamic(str(fused), tmp, weight_type=QuantType.QInt8, per_channel=True,
                                                  nodes_to_exclude=skip, extra_options=extra))
        return
    if variant != "minilm-int8-static":
        raise ValueError(f"unknown int8 variant {variant!r}")
    feeds = [feed for _, feed in batches(tokenizer.encode_batch(calibration_texts()), 32)]

    class _Demo(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

    # On the plain graph: the calibrator runs it in fp32 and the QDQ pairs land around each MatMul; MinMax is the
    # method that takes batches of different lengths (Percentile and Entropy stack them).
    _atomic(out, lambda tmp: quantize_static(
        str(plain), tmp, _Demo(), quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul"], calibrate_method=CalibrationMethod.MinMax,
        extra_options={"ActivationSymmetric": True}))


def ensure_graph(model_dir: Path, variant: str, tokenizer: Any) -> Path:
    """The graph file of `variant`, built (export, fuse, quantise) the first time it is asked for."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown ONNX variant {variant!r}; valid: {', '.join(VARIANTS)}")
    path = graph_path(model_dir, variant)
    if path.exists():
        return path
    plain = graph_path(model_dir, "minilm-plain")
    if not plain.exists():
        export_plain(model_dir, plain)
    if variant == "minilm-plain":
        return plain
    fused = graph_path(model_dir, "minilm")
    if not fused.exists():
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        fuse(plain, fused, int(config["num_attention_heads"]), int(config["hidden_size"]))
    if variant != "minilm":
        quantize(fused, plain, path, variant, tokenizer)
    return path


def providers(available: Sequence[str]) -> list[str]:
    """Execution providers to ask for, best first: CUDA where this ONNX Runtime has it (a GPU build on a machine
    with a GPU), then the CPU, which every build has and which takes any node CUDA cannot run."""
    chosen = [p for p in ("CUDAExecutionProvider",) if p in available]
    return [*chosen, "CPUExecutionProvider"]
