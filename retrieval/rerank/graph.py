"""Graph reranker (seed 004): final = α·similarity + β·PageRank, PageRank over the whole graph."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import scipy.sparse as sp
from cachetools import TTLCache

from retrieval.embedding import Embedder, EmbeddingCache, cached
from retrieval.graph.index import GraphIndex
from retrieval.graph.ppr import personalized_pagerank
from retrieval.models import VerbalizedFact
from retrieval.rerank.base import RerankContext, RerankOutput, check_top_k, query_similarity, with_scores
from retrieval.stores.base import EdgeArrays


def _adjacency(graph: GraphIndex | EdgeArrays | sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    if isinstance(graph, GraphIndex):
        return graph.out_csr
    if isinstance(graph, EdgeArrays):
        n = len(graph.node_ids)
        w = np.asarray(graph.weight, dtype=np.float64)
        if len(w) != len(graph.src):  # an export without weights: every edge counts once
            w = np.ones(len(graph.src))
        return sp.csr_matrix((w, (graph.src, graph.dst)), shape=(n, n))
    return sp.csr_matrix(graph)


def compute_pagerank(
    graph: GraphIndex | EdgeArrays | sp.spmatrix | sp.sparray,
    damping: float = 0.85,
    max_iter: int = 100,
    tol: float = 1e-6,
) -> np.ndarray:
    """Weighted PageRank (Page et al. 1999) by sparse power iteration over the whole directed graph.

    It is personalised PageRank with a uniform restart, so dangling nodes spread their mass
    uniformly, as in networkx. Negative weights are clipped to 0. `tol` bounds the L1 change
    (not scaled by N). Returns one score per node (sum 1), in node-index order.
    """
    adj = _adjacency(graph).astype(np.float64)
    n = adj.shape[0]
    if n == 0:
        return np.zeros(0)
    adj.data = np.clip(adj.data, 0.0, None)
    pr = personalized_pagerank(adj, dict.fromkeys(range(n), 1.0), damping, tol=tol, max_iter=max_iter)
    return np.asarray(pr / pr.sum())


class GraphSource(Protocol):
    """What the graph reranker needs of an opened graph (runtime.KG fits)."""

    @property
    def version(self) -> str: ...
    @property
    def index(self) -> GraphIndex: ...


class PageRankCache:
    """PageRank vectors per (graph name, version, damping, max_iter, tol), each kept for `ttl_s` seconds."""

    def __init__(self, ttl_s: float = 600.0, maxsize: int = 4, timer: Callable[[], float] = time.monotonic) -> None:
        self._cache: TTLCache[tuple[str, str, float, int, float], np.ndarray] = TTLCache(maxsize, ttl_s, timer=timer)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, graph: GraphSource, damping: float, max_iter: int, tol: float) -> np.ndarray:
        # the revision changes with every curation of the graph (runtime.KG); a plain source has only a version
        key = (str(getattr(graph, "name", "")), str(getattr(graph, "revision", graph.version)), damping, max_iter, tol)
        with self._lock:  # one computation per key even when several sessions ask at once
            found = self._cache.get(key)
            if found is not None:
                self.hits += 1
                return found
            self.misses += 1
            pr = compute_pagerank(graph.index, damping, max_iter, tol)
            pr.setflags(write=False)
            self._cache[key] = pr
            return pr


class GraphReranker:
    """Seed-004 graph reranker: `graph_score = α·similarity + β·PageRank_norm`, with α + β = 1.

    similarity: the candidate's `scores["similarity"]`, else the query-fact cosine from the embedder.
    PageRank of a candidate: the mean PageRank of its entities (for a chunk-only candidate, of the
    entities its chunks mention); 0 when none is in the graph. PageRank_norm divides by the maximum
    over the candidates, so the best-connected candidate gets 1 and zero stays zero.
    Adds `pagerank`, `pagerank_norm`, `graph_alpha_term`, `graph_beta_term`, `graph_score`.
    """

    name = "graph"

    @classmethod
    def build(cls, ctx: RerankContext) -> GraphReranker | None:
        return cls(ctx.graph, ctx.vectors) if ctx.graph is not None else None

    def __init__(
        self,
        graph: GraphSource,
        embedder: Embedder | None = None,
        alpha: float = 0.7,
        beta: float = 0.3,
        *,
        damping: float = 0.85,
        max_iter: int = 100,
        tol: float = 1e-6,
        cache: PageRankCache | None = None,
    ) -> None:
        if abs(alpha + beta - 1.0) > 1e-6 or alpha < 0 or beta < 0:
            raise ValueError(f"alpha and beta must be >= 0 and sum to 1, got alpha={alpha}, beta={beta}")
        self.graph = graph
        self.vectors: EmbeddingCache | None = cached(embedder) if embedder is not None else None
        self.alpha, self.beta = alpha, beta
        self.damping, self.max_iter, self.tol = damping, max_iter, tol
        self.cache = cache or PageRankCache()

    def with_weights(self, alpha: float, beta: float) -> GraphReranker:
        """The same reranker (sharing PageRank and embedding caches) with other α/β."""
        return GraphReranker(
            self.graph, self.vectors, alpha, beta,
            damping=self.damping, max_iter=self.max_iter, tol=self.tol, cache=self.cache,
        )

    def pagerank(self) -> np.ndarray:
        """The whole graph's PageRank (cached per graph version with a TTL)."""
        return self.cache.get(self.graph, self.damping, self.max_iter, self.tol)

    def candidate_pagerank(self, candidates: Sequence[VerbalizedFact]) -> np.ndarray:
        pr = self.pagerank()
        index = self.graph.index
        node_chunk_t: sp.csr_matrix | None = None
        out = np.zeros(len(candidates))
        for row, cand in enumerate(candidates):
            idx = [index.id_to_idx[e] for e in cand.entity_ids if e in index.id_to_idx]
            if not idx and cand.chunk_ids:
                if node_chunk_t is None:
                    node_chunk_t = index.node_chunk.T.tocsr()
                cols = [index.chunk_to_idx[c] for c in cand.chunk_ids if c in index.chunk_to_idx]
                idx = sorted({int(n) for c in cols for n in node_chunk_t[c].indices})
            out[row] = float(pr[idx].mean()) if idx else 0.0
        return out

    def _similarity(self, query: str, candidates: Sequence[VerbalizedFact], warnings: list[str]) -> np.ndarray:
        sim = np.array([c.scores.get("similarity", np.nan) for c in candidates], dtype=np.float64)
        missing = np.flatnonzero(np.isnan(sim))
        if len(missing) and self.vectors is not None:
            sim[missing] = query_similarity(self.vectors, query, [candidates[int(i)].text for i in missing])
        elif len(missing):
            warnings.append(f"graph rerank: {len(missing)} candidates lack a similarity score and no embedder; used 0")
            sim[missing] = 0.0
        return sim

    def rerank(self, query: str, candidates: Sequence[VerbalizedFact], top_k: int) -> RerankOutput:
        check_top_k(top_k)
        if not candidates:
            return RerankOutput([], [])
        warnings: list[str] = []
        sim = self._similarity(query, candidates, warnings)
        pr = self.candidate_pagerank(candidates)
        top = pr.max()
        pr_norm = pr / top if top > 0 else np.zeros_like(pr)
        a_term, b_term = self.alpha * sim, self.beta * pr_norm
        final = a_term + b_term
        order = [int(i) for i in np.argsort(-final, kind="stable")[:top_k]]
        out = [
            with_scores(candidates[i], {
                "pagerank": pr[i], "pagerank_norm": pr_norm[i],
                "graph_alpha_term": a_term[i], "graph_beta_term": b_term[i], "graph_score": final[i],
            })
            for i in order
        ]
        return RerankOutput(out, warnings)
