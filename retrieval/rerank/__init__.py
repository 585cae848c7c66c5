"""Rerankers sharing one interface: `rerank(query, candidates, top_k) -> RerankOutput`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from retrieval.config import Settings
from retrieval.embedding import Embedder, cached
from retrieval.models import VerbalizedFact
from retrieval.registry import Registry
from retrieval.rerank.base import (
    NoRerank,
    RerankContext,
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
    "RERANKERS",
    "RerankContext",
    "Reranker",
    "build_rerankers",
    "compute_pagerank",
    "mmr_order",
    "rerank_by_key",
    "with_scores",
]


# Every reranker, in the order the pages offer them; each class builds itself from a RerankContext.
RERANKERS = Registry("reranker", {
    "none": "retrieval.rerank.base:NoRerank",
    "mmr": "retrieval.rerank.mmr:MMRReranker",
    "graph": "retrieval.rerank.graph:GraphReranker",
    "cross_encoder": "retrieval.rerank.cross_encoder:CrossEncoderReranker",
    "llm": "retrieval.rerank.llm:LLMDiversityReranker",
}, ("build", "rerank"))


def build_rerankers(
    settings: Settings,
    embedder: Embedder,
    graph: GraphSource | None = None,
    fact_vectors: Callable[[Sequence[VerbalizedFact]], np.ndarray] | None = None,
) -> dict[str, Reranker]:
    """Every reranker this configuration can run, by name: none, mmr, graph (with a graph),
    cross_encoder (lazy; may turn out a passthrough), llm (only with GEMINI_API_KEY).
    `fact_vectors` (retriever.kg_fact_vectors) lets MMR use the stored vectors, as search does."""
    ctx = RerankContext(settings, cached(embedder), graph, fact_vectors)
    built = {name: RERANKERS.load(name).build(ctx) for name in RERANKERS}
    return {name: reranker for name, reranker in built.items() if reranker is not None}
