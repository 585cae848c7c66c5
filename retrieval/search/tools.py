"""Search tools of the seed specification: vector, hybrid (BM25 + vector), graph and comprehensive.

Every tool validates its parameters with a pydantic model and returns a SearchResult whose `mode`
names the tool; each item is a VerbalizedFact carrying its component scores and sources.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from retrieval.errors import RetrievalError
from retrieval.graph.runtime import KG
from retrieval.graph.traverse import chunk_record
from retrieval.items import chunk_item_id
from retrieval.models import MAX_QUERY_CHARS, SearchParams, SearchResult, SourceMetadata, StageTiming, VerbalizedFact
from retrieval.stores.base import CHUNKS, VectorHit


class ToolParams(BaseModel):
    """Shared bounds: a non-empty query of at most 2,000 characters and 1 <= limit <= 50."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str
    limit: int = Field(10, ge=1, le=50)

    @field_validator("query")
    @classmethod
    def _query_ok(cls, value: str) -> str:
        if not value or not value.strip():
            raise ValueError("query must not be empty")
        if len(value) > MAX_QUERY_CHARS:
            raise ValueError(f"query is {len(value)} characters; the limit is {MAX_QUERY_CHARS}")
        return value


class HybridParams(ToolParams):
    text_weight: float = Field(0.3, ge=0.0, le=1.0)


class ComprehensiveParams(ToolParams):
    use_vector: bool = True
    use_graph: bool = True


def chunk_fact(chunk_id: str, payload: dict[str, Any], scores: dict[str, float]) -> VerbalizedFact:
    """A document chunk as a candidate record, with its book/chapter/author source."""
    source = SourceMetadata(
        source=str(payload.get("source") or chunk_id),
        original_document=str(payload.get("original_document", "")),
        chapter=str(payload.get("chapter", "")),
        author=str(payload.get("author", "")),
        chunk_id=chunk_id,
    )
    return VerbalizedFact(
        id=chunk_item_id(chunk_id),
        type="document",
        text=str(payload.get("text", "")),
        scores=scores,
        sources=(source,),
        chunk_ids=(chunk_id,),
        channel="document",
    )


def _timed(timings: list[StageTiming], stage: str, fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    try:
        return fn()
    finally:
        timings.append(StageTiming(stage=stage, ms=(time.perf_counter() - start) * 1000))


def embed_query(kg: KG, query: str) -> np.ndarray:
    """The query's vector as a (1, dim) float32 array, for the vector searches of one request."""
    return np.asarray(kg.embedder.embed([query]), dtype=np.float32)


def _vector_hits(kg: KG, query: str, limit: int, qvec: np.ndarray | None = None) -> list[VectorHit]:
    vec = embed_query(kg, query) if qvec is None else qvec
    return kg.vectors.search(CHUNKS, vec, limit)[0]


def vector_search(kg: KG, query: str, limit: int = 10, *, qvec: np.ndarray | None = None) -> SearchResult:
    """Chunk similarity over DocumentChunks (cosine on the packaged MiniLM); `qvec`: the query already embedded."""
    p = ToolParams.model_validate({"query": query, "limit": limit})
    timings: list[StageTiming] = []
    hits = _timed(timings, "vector", lambda: _vector_hits(kg, p.query, p.limit, qvec))
    facts = tuple(chunk_fact(h.id, h.payload, {"vector": h.score, "similarity": h.score}) for h in hits)
    return SearchResult(
        query=p.query, mode="vector", facts=facts, timings=tuple(timings),
        counts={"vector": len(facts)}, graph_version=kg.version,
        chunks={h.id: chunk_record(h.id, h.payload) for h in hits},
    )


def minmax(values: np.ndarray) -> np.ndarray:
    """Scale to [0, 1]; a constant vector maps to 1 (all equally good) unless empty."""
    if values.size == 0:
        return values
    lo, hi = float(values.min()), float(values.max())
    return np.ones_like(values) if hi - lo < 1e-12 else (values - lo) / (hi - lo)


def fuse_weighted(
    bm25: Sequence[tuple[str, float]], vector: Sequence[tuple[str, float]], text_weight: float
) -> list[tuple[str, float, float, float]]:
    """Normalised weighted fusion: text_weight * minmax(BM25) + (1 - text_weight) * minmax(cosine).

    An item absent from one list gets 0 for that component (below every retrieved item).
    Returns (id, fused, bm25_norm, vector_norm), best first; ties broken by id for determinism.
    """
    b = dict(zip([i for i, _ in bm25], minmax(np.array([s for _, s in bm25], dtype=float)), strict=True))
    v = dict(zip([i for i, _ in vector], minmax(np.array([s for _, s in vector], dtype=float)), strict=True))
    rows = [
        (i, text_weight * b.get(i, 0.0) + (1 - text_weight) * v.get(i, 0.0), b.get(i, 0.0), v.get(i, 0.0))
        for i in set(b) | set(v)
    ]
    return sorted(rows, key=lambda r: (-r[1], r[0]))


def hybrid_search(kg: KG, query: str, limit: int = 10, text_weight: float = 0.3) -> SearchResult:
    """BM25 (bm25s, built at ingest) fused with vector scores; text-only with a warning if embedding fails."""
    from retrieval.graph.bm25 import search as bm25_search

    p = HybridParams.model_validate({"query": query, "limit": limit, "text_weight": text_weight})
    pool = max(50, 5 * p.limit)
    timings: list[StageTiming] = []
    warnings: list[str] = []
    bm25_hits = _timed(timings, "bm25", lambda: bm25_search(kg.bm25, p.query, pool))
    vec_hits: list[VectorHit] = []
    weight = p.text_weight
    try:
        vec_hits = _timed(timings, "vector", lambda: _vector_hits(kg, p.query, pool))
    except RetrievalError as exc:
        warnings.append(f"embedding/vector search failed ({exc}); text-only BM25 results")
        weight = 1.0
    fused = _timed(
        timings, "fuse",
        lambda: fuse_weighted(bm25_hits, [(h.id, h.score) for h in vec_hits], weight)[: p.limit],
    )
    raw_bm25 = dict(bm25_hits)
    raw_vec = {h.id: h.score for h in vec_hits}
    payloads = {h.id: h.payload for h in vec_hits}
    missing = [cid for cid, *_ in fused if cid not in payloads]
    if missing:
        for row in _timed(timings, "fetch", lambda: kg.vectors.get(CHUNKS, missing)):
            payloads[str(row["id"])] = row
    facts = tuple(
        chunk_fact(cid, payloads.get(cid, {}), {
            "hybrid": score, "bm25": raw_bm25.get(cid, 0.0), "bm25_norm": bn,
            "vector": raw_vec.get(cid, 0.0), "vector_norm": vn, "text_weight": weight,
        })
        for cid, score, bn, vn in fused
    )
    return SearchResult(
        query=p.query, mode="hybrid", facts=facts, timings=tuple(timings), warnings=tuple(warnings),
        counts={"bm25": len(bm25_hits), "vector": len(vec_hits)}, graph_version=kg.version,
        chunks={cid: chunk_record(cid, payloads[cid]) for cid, *_ in fused if cid in payloads},
    )


def graph_search(kg: KG, query: str, limit: int = 10) -> SearchResult:
    """Facts and relationships from the graph (the KG retriever), each with ids, validity and chunks."""
    from retrieval.search.retriever import search

    p = ToolParams.model_validate({"query": query, "limit": limit})
    result = search(kg, p.query, SearchParams.model_validate({"max_results": p.limit}))
    return result.model_copy(update={"mode": "graph", "counts": {"graph": len(result.facts)}})


def comprehensive_search(
    kg: KG, query: str, limit: int = 10, use_vector: bool = True, use_graph: bool = True
) -> SearchResult:
    """Vector and graph in parallel; a failure in one still returns the other, named in the warnings."""
    p = ComprehensiveParams.model_validate(
        {"query": query, "limit": limit, "use_vector": use_vector, "use_graph": use_graph}
    )
    channels: dict[str, Callable[[], SearchResult]] = {}
    if p.use_vector:
        channels["vector"] = lambda: vector_search(kg, p.query, p.limit)
    if p.use_graph:
        channels["graph"] = lambda: graph_search(kg, p.query, p.limit)
    if not channels:
        raise ValueError("comprehensive_search needs use_vector or use_graph")
    start = time.perf_counter()
    results: dict[str, SearchResult] = {}
    warnings: list[str] = []
    with ThreadPoolExecutor(max_workers=len(channels)) as pool:
        futures = {name: pool.submit(fn) for name, fn in channels.items()}
        for name, fut in futures.items():
            try:
                results[name] = fut.result()
            except Exception as exc:  # any channel failure is reported, the other channel still answers
                warnings.append(f"{name} search failed: {type(exc).__name__}: {exc}")
    facts = tuple(f for r in results.values() for f in r.facts)
    timings = [StageTiming(stage=f"{name}:{t.stage}", ms=t.ms) for name, r in results.items() for t in r.timings]
    timings.append(StageTiming(stage="total", ms=(time.perf_counter() - start) * 1000))
    graph = results.get("graph")
    return SearchResult(
        query=p.query, mode="comprehensive", facts=facts, timings=tuple(timings),
        warnings=tuple(warnings) + tuple(w for r in results.values() for w in r.warnings),
        counts={name: len(r.facts) for name, r in results.items()} | {"total": len(facts)},
        subgraph=graph.subgraph if graph else SearchResult(query=p.query).subgraph,
        seed_ids=graph.seed_ids if graph else (), destination_ids=graph.destination_ids if graph else (),
        graph_version=kg.version,
        evidence_strength=graph.evidence_strength if graph else None,  # the graph channel measured it already
        chunks={c: chunk for r in results.values() for c, chunk in r.chunks.items()},
    )
