"""Rerankers sharing one interface: `rerank(query, candidates, top_k) -> RerankOutput`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from retrieval.config import Settings
from retrieval.embedding import Embedder, cached
from retrieval.models import VerbalizedFact
from retrieval.rerank.base import (
    NoRerank,
    Reranker,
    RerankOutput,
    rerank_by_key,
    with_scores,
)
from retrieval.rerank.cross_encoder import CrossEncoderReranker
from retrieval.rerank.graph import GraphReranker, GraphSource, PageRankCache, compute_pagerank
from retrieval.rerank.llm import LLMDiversityReranker
from retrieval.rerank.mmr import MMRReranker, mmr_order

__all__ = [
    "CrossEncoderReranker",
    "GraphReranker",
    "GraphSource",
    "LLMDiversityReranker",
    "MMRReranker",
    "NoRerank",
    "PageRankCache",
    "RerankOutput",
    "Reranker",
    "build_rerankers",
    "compute_pagerank",
    "mmr_order",
    "rerank_by_key",
    "with_scores",
]


def build_rerankers(
    settings: Settings,
    embedder: Embedder,
    graph: GraphSource | None = None,
    fact_vectors: Callable[[Sequence[VerbalizedFact]], np.ndarray] | None = None,
) -> dict[str, Reranker]:
    """Every reranker this configuration can run, by name: none, mmr, graph (with a graph),
    cross_encoder (lazy; may turn out a passthrough), llm (only with GEMINI_API_KEY).
    `fact_vectors` (retriever.kg_fact_vectors) lets MMR use the stored vectors, as search does."""
    vectors = cached(embedder)
    out: dict[str, Reranker] = {"none": NoRerank(), "mmr": MMRReranker(vectors, fact_vectors=fact_vectors)}
    if graph is not None:
        out["graph"] = GraphReranker(graph, vectors)
    out["cross_encoder"] = CrossEncoderReranker.from_settings(settings)
    if settings.gemini_enabled:
        out["llm"] = LLMDiversityReranker(settings)
    return out
