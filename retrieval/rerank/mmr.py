"""Maximal Marginal Relevance diversity reranking on fact embeddings (offline)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from retrieval.embedding import Embedder, cached
from retrieval.models import VerbalizedFact
from retrieval.rerank.base import RerankContext, RerankOutput, check_top_k, with_scores


def mmr_order(relevance: np.ndarray, vectors: np.ndarray, lambda_: float, top_k: int) -> tuple[list[int], list[float]]:
    """Greedy MMR (Carbonell & Goldstein, SIGIR 1998): argmax λ·rel(d) − (1−λ)·max_{s∈S} sim(d, s).

    `vectors` are L2-normalised rows, so sim is the cosine. Ties go to the earlier candidate, which
    makes λ = 1 exactly a stable sort by relevance. Returns (picked indexes, their MMR scores).
    """
    n = len(relevance)
    k = min(top_k, n)
    rel = np.asarray(relevance, dtype=np.float64)
    vecs = np.asarray(vectors, dtype=np.float32)
    max_sim = np.zeros(n)  # the redundancy term is 0 until something is selected
    taken = np.zeros(n, dtype=bool)
    picked: list[int] = []
    scores: list[float] = []
    for _ in range(k):
        mmr = lambda_ * rel - (1.0 - lambda_) * max_sim
        mmr[taken] = -np.inf
        i = int(np.argmax(mmr))
        picked.append(i)
        scores.append(float(mmr[i]))
        taken[i] = True
        sim_i = (vecs @ vecs[i]).astype(np.float64)  # one column per pick: O(n·d·k), not the n×n matrix
        max_sim = sim_i if len(picked) == 1 else np.maximum(max_sim, sim_i)
    return picked, scores


class MMRReranker:
    """Offline diversity reranker: MMR over fact embeddings; adds `mmr_rank` (1-based) and `mmr_score`.

    Relevance is the cosine between query and fact embeddings, or, with `relevance_key`, the
    candidates' own score under that key min-max scaled to [0, 1] (missing = 0). `fact_vectors` gives
    the facts' vectors (e.g. verbalize.fact_vectors from the stored relation vectors); by default each
    fact's text is embedded.
    """

    name = "mmr"

    @classmethod
    def build(cls, ctx: RerankContext) -> MMRReranker:
        return cls(ctx.vectors, fact_vectors=ctx.fact_vectors)

    def __init__(
        self,
        embedder: Embedder,
        lambda_: float = 0.7,
        relevance_key: str | None = None,
        fact_vectors: Callable[[Sequence[VerbalizedFact]], np.ndarray] | None = None,
    ) -> None:
        if not 0.0 <= lambda_ <= 1.0:
            raise ValueError(f"MMR lambda must be in [0, 1], got {lambda_}")
        self.vectors = cached(embedder)
        self.lambda_ = lambda_
        self.relevance_key = relevance_key
        self.fact_vectors = fact_vectors

    def with_lambda(self, lambda_: float) -> MMRReranker:
        """The same reranker (sharing its embedding cache) with another λ."""
        return MMRReranker(self.vectors, lambda_, self.relevance_key, self.fact_vectors)

    def _relevance(self, query: str, candidates: Sequence[VerbalizedFact], vecs: np.ndarray) -> np.ndarray:
        if self.relevance_key is None:
            q = self.vectors.embed([query])[0]
            return np.asarray(vecs @ q, dtype=np.float64)
        raw = np.array([c.scores.get(self.relevance_key, np.nan) for c in candidates], dtype=np.float64)
        known = raw[~np.isnan(raw)]
        if not len(known):
            return np.zeros(len(raw))
        lo, hi = float(known.min()), float(known.max())
        scaled = (raw - lo) / (hi - lo) if hi > lo else np.where(np.isnan(raw), np.nan, 1.0)
        return np.nan_to_num(scaled, nan=0.0)

    def rerank(self, query: str, candidates: Sequence[VerbalizedFact], top_k: int) -> RerankOutput:
        check_top_k(top_k)
        if not candidates:
            return RerankOutput([], [])
        if self.fact_vectors is None:
            vecs = self.vectors.embed([c.text for c in candidates])
        else:
            vecs = np.asarray(self.fact_vectors(candidates), dtype=np.float32)
        picked, scores = mmr_order(self._relevance(query, candidates, vecs), vecs, self.lambda_, top_k)
        out = [
            with_scores(candidates[i], {"mmr_rank": rank, "mmr_score": score})
            for rank, (i, score) in enumerate(zip(picked, scores, strict=True), start=1)
        ]
        return RerankOutput(out, [])
