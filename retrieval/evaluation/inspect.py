"""Rerank inspection: retrieve a candidate pool once, then re-rank it under every reranker (UI-free).

The Rerank Inspector caches `candidate_pool` per (graph version, query, kind) and calls the cheap
functions below on every what-if change, so moving a slider never retrieves again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
from cachetools import LRUCache

from retrieval.embedding import cached
from retrieval.graph.ppr import personalized_pagerank
from retrieval.graph.runtime import KG
from retrieval.items import CHUNK_PREFIX, ENTITY_PREFIX, entity_item_id
from retrieval.models import Record, SearchParams, VerbalizedFact
from retrieval.rerank.base import Reranker, RerankOutput, query_similarity, with_scores
from retrieval.search.tools import ToolParams, fuse_weighted, hybrid_search
from retrieval.stores.base import ENTITIES

PoolKind = Literal["facts", "chunks", "entities"]
POOL_KINDS: tuple[PoolKind, ...] = get_args(PoolKind)
ENTITY_PPR_DAMPING = 0.5  # HippoRAG's restart setting, as in the KG retriever


class Pool(Record):
    """One retrieval's candidates in retrieval order (the "none" ranking), before any reranking."""

    query: str
    kind: PoolKind
    graph_version: str
    candidates: tuple[VerbalizedFact, ...] = ()
    warnings: tuple[str, ...] = ()
    ms: float = 0.0


def pool_kind_of(item_id: str) -> PoolKind:
    """Which pool an item id belongs to (labels of one query may span pools)."""
    if item_id.startswith(ENTITY_PREFIX):
        return "entities"
    if item_id.startswith(CHUNK_PREFIX):
        return "chunks"
    return "facts"


def _with_similarity(kg: KG, query: str, facts: Sequence[VerbalizedFact]) -> list[VerbalizedFact]:
    """Add the query-candidate cosine as `similarity` where the retriever gave none (shown for every pool)."""
    missing = [i for i, f in enumerate(facts) if "similarity" not in f.scores]
    if not missing:
        return list(facts)
    sims = query_similarity(cached(kg.embedder), query, [facts[i].text for i in missing])
    out = list(facts)
    for i, sim in zip(missing, sims, strict=True):
        out[i] = with_scores(out[i], {"similarity": float(sim)})
    return out


def entity_pool(kg: KG, query: str, size: int) -> list[VerbalizedFact]:
    """Entities by vector similarity (name: description), each with the PPR mass of a walk seeded on all hits.

    PPR (HippoRAG, arXiv:2405.14831) restarts at the hits weighted by their similarity, so an entity
    close to several other hits gains over an isolated one.
    """
    hits = kg.vectors.search(ENTITIES, kg.embedder.embed([query]), size)[0]
    index = kg.index
    seeds = {index.id_to_idx[h.id]: max(h.score, 0.0) for h in hits if h.id in index.id_to_idx}
    ppr = np.zeros(index.n_nodes)
    if seeds and sum(seeds.values()) > 0:
        ppr = personalized_pagerank(index.und_csr, seeds, ENTITY_PPR_DAMPING)
    out = []
    for h in hits:
        idx = index.id_to_idx.get(h.id)
        scores = {"similarity": h.score, "vector": h.score, "ppr": float(ppr[idx]) if idx is not None else 0.0}
        text = str(h.payload.get("text") or h.payload.get("name") or h.id)
        out.append(VerbalizedFact(id=entity_item_id(h.id), type="entity", text=text, scores=scores,
                                  entity_ids=(h.id,)))
    return out


def candidate_pool(kg: KG, query: str, kind: PoolKind, size: int = 40) -> Pool:
    """Retrieve `size` candidates of one kind, unreranked.

    facts: the KG retriever with rerank="none"; chunks: hybrid BM25 + vector search (each candidate
    keeps its bm25/vector parts); entities: `entity_pool`. Every candidate carries `similarity`.
    """
    params = ToolParams(query=query, limit=size)
    start = time.perf_counter()
    warnings: tuple[str, ...] = ()
    if kind == "facts":
        from retrieval.search.retriever import search

        result = search(kg, params.query, SearchParams.model_validate({"max_results": params.limit, "rerank": "none"}))
        facts, warnings = list(result.facts), result.warnings
    elif kind == "chunks":
        result = hybrid_search(kg, params.query, limit=params.limit)
        facts, warnings = list(result.facts), result.warnings
    elif kind == "entities":
        facts = entity_pool(kg, params.query, params.limit)
    else:
        raise ValueError(f"unknown pool kind {kind!r}; valid: {', '.join(POOL_KINDS)}")
    facts = _with_similarity(kg, params.query, facts)
    return Pool(
        query=params.query, kind=kind, graph_version=kg.version, candidates=tuple(facts), warnings=tuple(warnings),
        ms=(time.perf_counter() - start) * 1000,
    )


def refuse(candidates: Sequence[VerbalizedFact], text_weight: float) -> list[VerbalizedFact]:
    """Re-fuse hybrid candidates at another BM25 share from their stored `bm25_norm`/`vector_norm` parts.

    The parts were min-max scaled over the full retrieved lists; anchoring 0 and 1 makes
    `fuse_weighted`'s own min-max the identity, so the new `hybrid` score is exactly what
    hybrid_search gives at this weight. Candidates without both parts keep their place at the end.
    """
    if not 0.0 <= text_weight <= 1.0:
        raise ValueError(f"text_weight must be in [0, 1], got {text_weight}")
    parts = [c for c in candidates if "bm25_norm" in c.scores and "vector_norm" in c.scores]
    if not parts:
        return list(candidates)
    anchors = [("\x00lo", 0.0), ("\x00hi", 1.0)]
    fused = fuse_weighted(
        anchors + [(c.id, c.scores["bm25_norm"]) for c in parts],
        anchors + [(c.id, c.scores["vector_norm"]) for c in parts],
        text_weight,
    )
    by_id = {c.id: c for c in parts}
    out = [
        with_scores(by_id[cid], {"hybrid": score, "text_weight": text_weight})
        for cid, score, _, _ in fused if cid in by_id
    ]
    return out + [c for c in candidates if c.id not in by_id]


def pool_order(pool: Pool, text_weight: float) -> list[VerbalizedFact]:
    """A pool's "none" order at a what-if BM25 share: chunk pools are re-fused, the others keep theirs."""
    return refuse(pool.candidates, text_weight) if pool.kind == "chunks" else list(pool.candidates)


@dataclass(frozen=True)
class Inspection:
    """A pool ranked by every reranker: the candidates (input order unless re-listed with `in_order`)
    carrying every reranker's scores."""

    query: str
    candidates: tuple[VerbalizedFact, ...]
    orders: dict[str, list[str]]  # reranker -> candidate ids, best first
    warnings: dict[str, list[str]] = field(default_factory=dict)
    ms: dict[str, float] = field(default_factory=dict)

    def ranks(self) -> dict[str, dict[str, int]]:
        """reranker -> candidate id -> 1-based rank (absent: the reranker dropped it)."""
        return {name: {cid: r for r, cid in enumerate(order, start=1)} for name, order in self.orders.items()}

    def in_order(self, ids: Sequence[str]) -> Inspection:
        """The same inspection listing its candidates in `ids` order (e.g. the retrieval order, which the
        labeling grid keeps while what-if knobs move the "none" order of a chunk pool)."""
        where = {cid: i for i, cid in enumerate(ids)}
        ordered = sorted(self.candidates, key=lambda c: where.get(c.id, len(where)))
        return Inspection(self.query, tuple(ordered), self.orders, self.warnings, self.ms)

    def runs(self) -> dict[str, dict[str, list[str]]]:
        """reranker -> {query: ranked ids}: the shape `retrieval.evaluation.evaluate.evaluate` scores."""
        return {name: {self.query: list(order)} for name, order in self.orders.items()}


def apply_rerankers(
    query: str, candidates: Sequence[VerbalizedFact], rerankers: Mapping[str, Reranker]
) -> Inspection:
    """Rank the whole pool under each reranker (top_k = pool size) and merge every added score.

    Only keys a reranker adds are merged: an input score (e.g. `hybrid`) is never replaced by a
    stale copy from a memoised output.
    """
    pool = list(candidates)
    given = {c.id: c.scores for c in pool}
    merged: dict[str, dict[str, float]] = {c.id: dict(c.scores) for c in pool}
    orders: dict[str, list[str]] = {}
    warnings: dict[str, list[str]] = {}
    ms: dict[str, float] = {}
    for name, reranker in rerankers.items():
        start = time.perf_counter()
        out = reranker.rerank(query, pool, max(1, len(pool))) if pool else RerankOutput([], [])
        ms[name] = (time.perf_counter() - start) * 1000
        orders[name] = [c.id for c in out.candidates]
        warnings[name] = list(out.warnings)
        for c in out.candidates:
            if c.id in merged:
                merged[c.id].update({k: v for k, v in c.scores.items() if k not in given[c.id]})
    return Inspection(
        query=query,
        candidates=tuple(c.model_copy(update={"scores": merged[c.id]}) for c in pool),
        orders=orders,
        warnings={k: v for k, v in warnings.items() if v},
        ms=ms,
    )


class Memo:
    """A reranker whose outputs are kept per (query, candidate ids, top_k): what-if reruns of a pool
    never pay a cross-encoder pass or a Gemini call twice."""

    def __init__(self, reranker: Reranker, maxsize: int = 256) -> None:
        self.inner = reranker
        self.name = reranker.name
        self._cache: LRUCache[tuple[str, tuple[str, ...], int], RerankOutput] = LRUCache(maxsize=maxsize)
        self._lock = threading.Lock()

    def rerank(self, query: str, candidates: Sequence[VerbalizedFact], top_k: int) -> RerankOutput:
        key = (query, tuple(c.id for c in candidates), top_k)
        with self._lock:
            found = self._cache.get(key)
        if found is None:  # computed outside the lock: a slow Gemini call must not block other sessions
            found = self.inner.rerank(query, candidates, top_k)
            with self._lock:
                self._cache[key] = found
        return found
