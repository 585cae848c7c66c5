"""The default embedder (packaged MiniLM on ONNX Runtime) gives sentence-transformers' vectors."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from retrieval.embedding import Embedder, OnnxEmbedder, SentenceTransformerEmbedder, load_embedder
from retrieval.embedding.onnx_graphs import providers
from retrieval.errors import ConfigError

TEXTS = [
    "",
    "x",
    "Ulysses S. Grant was elected President of the United States.",
    "price elasticity " * 400,  # past the 256-token limit: both truncate the same way
    "日本語のテキストと emoji 🚀",
    "<script>alert(1)</script> ' OR 1=1 --",
    *[f"entity {i} relates to item {i * 7}" for i in range(40)],
]


def test_onnx_vectors_equal_sentence_transformers(embedder: Embedder) -> None:
    assert isinstance(embedder, OnnxEmbedder)
    reference = SentenceTransformerEmbedder().embed(TEXTS)
    got = embedder.embed(TEXTS)
    assert got.shape == reference.shape == (len(TEXTS), 384)
    assert np.min(np.sum(got * reference, axis=1)) > 0.9999
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert embedder.name == "all-MiniLM-L6-v2"  # same vectors, same name: existing graph versions stay valid
    assert embedder.embed([]).shape == (0, 384)


def test_export_is_cached_and_reused(embedder: Embedder) -> None:
    assert isinstance(embedder, OnnxEmbedder)
    path = embedder.path
    assert path.is_file()
    before = path.stat().st_mtime_ns
    again = OnnxEmbedder()
    assert path.stat().st_mtime_ns == before  # loaded, not exported again
    assert np.allclose(again.embed(["same text"]), embedder.embed(["same text"]))
    assert not list(path.parent.glob(".export-*"))  # no half-written export left behind


def test_batches_keep_input_order(embedder: Embedder) -> None:
    texts = ["a much longer sentence about knowledge graphs and retrieval", "short", "medium length text here"]
    together = embedder.embed(texts)
    alone = np.vstack([embedder.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_default_graph_runs_fused_kernels(embedder: Embedder) -> None:
    import onnx

    assert isinstance(embedder, OnnxEmbedder)
    ops = Counter(n.op_type for n in onnx.load(str(embedder.path), load_external_data=False).graph.node)
    # one fused attention per layer, embeddings and layer norms fused: the optimiser took the whole graph
    assert ops["Attention"] == 6 and ops["EmbedLayerNormalization"] == 1 and ops["SkipLayerNormalization"] == 12
    plain = OnnxEmbedder(variant="minilm-plain")
    assert plain.path != embedder.path and plain.name == embedder.name
    assert np.min(np.sum(plain.embed(TEXTS) * embedder.embed(TEXTS), axis=1)) > 0.9999


def test_providers_prefer_cuda_and_fall_back_to_the_cpu(embedder: Embedder) -> None:
    assert providers(["CUDAExecutionProvider", "CPUExecutionProvider"]) == ["CUDAExecutionProvider",
                                                                             "CPUExecutionProvider"]
    assert providers(["AzureExecutionProvider", "CPUExecutionProvider"]) == ["CPUExecutionProvider"]
    assert isinstance(embedder, OnnxEmbedder)
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():  # this machine: the CPU path is the one run
        assert embedder.providers == ("CPUExecutionProvider",)


def test_int8_variant_is_named_apart(embedder: Embedder) -> None:
    int8 = load_embedder("minilm-int8")
    assert isinstance(int8, OnnxEmbedder) and int8.name == "all-MiniLM-L6-v2-int8" != embedder.name
    got, ref = int8.embed(TEXTS), embedder.embed(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert np.mean(np.sum(got * ref, axis=1)) > 0.97  # close, not equal: its recall is measured (README)
    with pytest.raises(ConfigError, match="unknown ONNX variant"):
        OnnxEmbedder(variant="minilm-int4")
