"""The default embedder (packaged MiniLM on ONNX Runtime) gives sentence-transformers' vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from retrieval.embedding import Embedder, OnnxEmbedder, SentenceTransformerEmbedder, default_model_path

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
    path = onnx_path(Path(default_model_path()))
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
