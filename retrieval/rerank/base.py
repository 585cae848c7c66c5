"""The reranker interface shared by the retriever, the Rerank Inspector and evaluation."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from retrieval.config import Settings
from retrieval.embedding import EmbeddingCache
from retrieval.models import VerbalizedFact


@dataclass(frozen=True)
class RerankOutput:
    """New candidate records (inputs are never mutated) in the new order, plus visible warnings."""

    candidates: list[VerbalizedFact]
    warnings: list[str]


class Reranker(Protocol):
    name: str

    def rerank(self, query: str, candidates: Sequence[VerbalizedFact], top_k: int) -> RerankOutput: ...


@dataclass(frozen=True)
class RerankContext:
    """What a reranker may be built from: the settings, an embedding cache, the graph (for PageRank; None when
    there is no graph) and the facts' stored vectors (`retriever.kg_fact_vectors`)."""

    settings: Settings
    vectors: EmbeddingCache
    graph: Any = None
    fact_vectors: Callable[[Sequence[VerbalizedFact]], np.ndarray] | None = None


class RerankerKind(Protocol):
    """A registered reranker class: `build` makes one for a context, or None where it cannot run (the LLM
    reranker without a key, the graph reranker without a graph)."""

    @classmethod
    def build(cls, ctx: RerankContext) -> Reranker | None: ...


def with_scores(fact: VerbalizedFact, scores: Mapping[str, float]) -> VerbalizedFact:
    """A copy of `fact` with `scores` merged into its score dict (a fresh dict: the input stays as it was)."""
    return fact.model_copy(update={"scores": {**fact.scores, **{k: float(v) for k, v in scores.items()}}})


def check_top_k(top_k: int) -> int:
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    return top_k


class NoRerank:
    """The "no rerank" baseline: the retrieval order, truncated to top_k."""

    name = "none"

    @classmethod
    def build(cls, ctx: RerankContext) -> NoRerank:
        return cls()

    def rerank(self, query: str, candidates: Sequence[VerbalizedFact], top_k: int) -> RerankOutput:
        return RerankOutput(list(candidates[: check_top_k(top_k)]), [])


def rerank_by_key(
    candidates: Sequence[VerbalizedFact], key: str, top_k: int | None = None
) -> RerankOutput:
    """Order by `scores[key]` descending (stable); candidates without the key go last, with a warning."""
    missing = sum(1 for c in candidates if key not in c.scores)
    order = sorted(candidates, key=lambda c: -c.scores[key] if key in c.scores else float("inf"))
    warnings = [f"{missing} of {len(candidates)} candidates have no {key!r} score; put last"] if missing else []
    return RerankOutput(order if top_k is None else order[: check_top_k(top_k)], warnings)


def query_similarity(vectors: EmbeddingCache, query: str, texts: Sequence[str]) -> np.ndarray:
    """Cosine similarity of each text to the query (vectors are normalised, so a dot product)."""
    if not texts:
        return np.zeros(0, dtype=np.float32)
    q = vectors.embed([query])[0]
    return np.asarray(vectors.embed(texts) @ q, dtype=np.float32)
