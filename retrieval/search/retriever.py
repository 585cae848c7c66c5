"""The KG retriever (seed "Task 22: Knowledge Graph Search Tool Integration"): one orchestrator.

decompose -> seeds (one batched vector search per collection) -> local (PPR + paths) in parallel with
global (relation descriptions) -> verbalize -> sources -> rerank. Every stage's wall time goes into
`SearchResult.timings`; every degradation into `SearchResult.warnings`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from retrieval.config import Settings
from retrieval.errors import NotFoundError, RetrievalError, StoreError, ValidationError
from retrieval.graph.index import name_matcher
from retrieval.graph.ppr import ppr
from retrieval.graph.runtime import KG, embedding_cache
from retrieval.models import (
    MAX_QUERY_CHARS,
    Entity,
    GlobalRelation,
    Relation,
    SearchParams,
    SearchResult,
    SemanticPath,
    StageTiming,
    Subgraph,
    VerbalizedFact,
)
from retrieval.search.decompose import EntityMatch, decompose, entity_mentions
from retrieval.search.global_search import best_hits, global_relations
from retrieval.search.local_search import (
    FACT_POOL,
    PASSAGE_POOL,
    Seeds,
    choose_seeds,
    materialise_paths,
    memory_graph,
    neighbourhood_mask,
    personalisation,
    restricted_ppr,
    trace_destinations,
)
from retrieval.search.nomatch import strength
from retrieval.search.verbalize import cited, fact_vectors, global_fact, path_fact, with_sources
from retrieval.stores.base import CHUNKS, ENTITIES, RELATIONS, VectorHit

PPR_MASS_TOP = 2000  # entities of the whole graph a result keeps by PPR mass (the map's heat overlay)


def kg_fact_vectors(kg: KG) -> Callable[[Sequence[VerbalizedFact]], np.ndarray]:
    """Fact vectors of this graph from its stored relation vectors (verbalize.fact_vectors)."""
    return partial(fact_vectors, kg.vectors, embedding_cache(kg))


def mention_cosines(kg: KG, qvec: np.ndarray, ids: Sequence[str]) -> np.ndarray:
    """Cosine of the query with each named entity's stored vector (its `name: description` text)."""
    return kg.vectors.vectors(ENTITIES, ids) @ qvec if ids else np.zeros(0, dtype=np.float32)


def top_mass(scores: np.ndarray, k: int) -> list[int]:
    """The (at most) k entities with the most PPR mass, best first; entities the walk never reached left out."""
    nonzero = np.flatnonzero(scores > 0)
    if len(nonzero) > k:
        nonzero = nonzero[np.argpartition(-scores[nonzero], k - 1)[:k]]
    return nonzero[np.lexsort((nonzero, -scores[nonzero]))].tolist()


def check_query(query: str) -> str:
    """A non-empty query of at most 2,000 characters (ValidationError otherwise)."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("query must be a non-empty string")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError(f"query is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}")
    return query.strip()


@dataclass
class Trace:
    """Per-stage wall times (ms) and warnings, safe to fill from the local and global threads."""

    timings: list[StageTiming] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings.append(StageTiming(stage=name, ms=(time.perf_counter() - start) * 1000))


@dataclass(frozen=True)
class _Local:
    paths: list[SemanticPath]
    entities: dict[str, Entity]
    destinations: list[str]
    scores: np.ndarray | None = None  # PPR of every entity (index order)


def _query_mentions(
    kg: KG, query: str, qvec: np.ndarray, params: SearchParams
) -> tuple[list[EntityMatch], list[VectorHit]]:
    hits = kg.vectors.search(ENTITIES, qvec[None, :], max(params.max_seed_nodes, 10), payload=False)[0]
    return entity_mentions(kg.index, query, hits), hits


def _gemini_mentions(kg: KG, names: Sequence[str], known: list[EntityMatch]) -> list[EntityMatch]:
    """Entities Gemini named that the graph has under the same name (Aho-Corasick on each name)."""
    have = {m.idx for m in known}
    out = list(known)
    matcher = name_matcher(kg.index)
    for name in names:
        for m in matcher.find(name):
            if m.idx not in have:
                have.add(m.idx)
                out.append(EntityMatch(m.idx, kg.index.arrays.node_ids[m.idx], kg.index.arrays.node_names[m.idx],
                                       1.0, "gemini"))
    return out


def _bm25_or_none(kg: KG, trace: Trace) -> object | None:
    try:
        return kg.bm25
    except (NotFoundError, StoreError) as exc:
        trace.warnings.append(f"BM25 index unavailable ({exc}): node specificity from graph links only")
        return None


def _local(kg: KG, seeds: Seeds, mem_reset: np.ndarray, hops: int, params: SearchParams,
           trace: Trace) -> _Local:
    index = kg.index
    mem = memory_graph(index)
    with trace.stage("ppr"):
        if mem_reset.sum() <= 0:
            return _Local([], {}, [])
        if index.n_edges > params.full_graph_max_edges and seeds.entities:
            seed_ids = [index.arrays.node_ids[i] for i in seeds.ranked]
            keep = neighbourhood_mask(index, kg.graph, seed_ids, params, hops)
            scores = restricted_ppr(mem, mem_reset, keep, params.damping)
        else:
            # the paths use the entities' ranking: stop once the order of the top destinations and seeds holds
            # (ppr's docstring). On the 1M scale graph: the same destinations and facts as the exact walk on
            # 20 of 20 queries, with the PPR stage at a third of its time.
            scores = ppr(mem.transition, mem_reset, params.damping, stable_rows=mem.n_entities,
                         stable_top=params.top_k_destinations + params.max_seed_nodes)
        entity_scores = scores[: mem.n_entities]
    with trace.stage("paths"):
        traced = trace_destinations(index, entity_scores, seeds.ranked, hops, params.top_k_destinations,
                                    seeds.named)
        paths, entities = materialise_paths(index, kg.graph, traced, entity_scores,
                                            extra_nodes=[index.arrays.node_ids[i] for i in seeds.ranked])
    return _Local(paths, entities, [index.arrays.node_ids[d] for d in traced.destinations], entity_scores)


def _global(kg: KG, rel_hits: list[list[VectorHit]], params: SearchParams, trace: Trace) -> list[GlobalRelation]:
    with trace.stage("global"):
        return global_relations(kg.index, kg.graph, best_hits(rel_hits, params.top_k_per_query))


def merge_facts(local: Sequence[VerbalizedFact], global_: Sequence[VerbalizedFact]) -> list[VerbalizedFact]:
    """Interleave local and global facts; a global relation that IS a one-hop path joins that path's scores."""
    one_hop = {f.relation_ids[0]: i for i, f in enumerate(local) if len(f.relation_ids) == 1}
    local = list(local)
    rest = []
    for g in global_:
        i = one_hop.get(g.relation_ids[0]) if g.relation_ids else None
        if i is None:
            rest.append(g)
        else:
            local[i] = local[i].model_copy(update={"scores": {**local[i].scores, **g.scores}})
    out: list[VerbalizedFact] = []
    for pair in zip(local, rest, strict=False):
        out.extend(pair)
    longer = local if len(local) > len(rest) else rest
    out.extend(longer[min(len(local), len(rest)):])
    return out


def _rerank(kg: KG, settings: Settings, query: str, facts: list[VerbalizedFact], params: SearchParams,
            trace: Trace, vectors: dict[str, np.ndarray]) -> list[VerbalizedFact]:
    k = params.max_results
    if len(facts) <= k:
        return facts
    if params.rerank == "none":
        return facts[:k]
    from retrieval.rerank import LLMDiversityReranker, MMRReranker

    kind = params.rerank
    if kind == "llm" and not settings.gemini_enabled:
        trace.warnings.append("LLM rerank asked but Gemini is not configured: MMR used")
        kind = "mmr"
    try:
        if kind == "llm":
            out = LLMDiversityReranker(settings).rerank(query, facts, k)
        else:
            reranker = MMRReranker(embedding_cache(kg), fact_vectors=lambda fs: np.stack([vectors[f.id] for f in fs]))
            out = reranker.rerank(query, facts, k)
    except (RetrievalError, ValueError) as exc:
        trace.warnings.append(f"{kind} rerank failed ({exc}): first {k} facts kept")
        return facts[:k]
    trace.warnings.extend(out.warnings)
    return list(out.candidates)


def _subgraph(facts: Sequence[VerbalizedFact], entities: dict[str, Entity], relations: dict[str, Relation],
              seed_ids: Sequence[str]) -> Subgraph:
    node_ids = list(dict.fromkeys([*seed_ids, *(i for f in facts for i in f.entity_ids)]))
    nodes = tuple(entities[i] for i in node_ids if i in entities)
    edge_ids = dict.fromkeys(r for f in facts for r in f.relation_ids)
    edges = tuple(relations[r] for r in edge_ids if r in relations)
    return Subgraph(nodes=nodes, edges=edges, total_nodes=len(nodes))


def search(kg: KG, query: str, params: SearchParams | None = None, *, settings: Settings | None = None) -> SearchResult:
    """Search the knowledge graph: facts with every score, their sources, the subgraph and the trace. It holds the
    graph's read lock throughout, so a curation changeset applied meanwhile is seen whole or not at all."""
    with kg.reading():
        return _search(kg, query, params, settings=settings)


def _search(kg: KG, query: str, params: SearchParams | None, *, settings: Settings | None) -> SearchResult:
    params = params or SearchParams.model_validate({})
    settings = settings or kg.settings
    query = check_query(query)
    trace = Trace()
    start = time.perf_counter()
    index = kg.index

    cache = embedding_cache(kg)
    with trace.stage("decompose"):
        qvec = np.asarray(cache.embed([query])[0], dtype=np.float32)
        mentions, entity_hits = _query_mentions(kg, query, qvec, params)
        decomposition, warns = decompose(query, [m.name for m in mentions], settings=settings,
                                         max_hops=params.max_hops)
        trace.warnings.extend(warns)
        if decomposition.method == "gemini":
            mentions = _gemini_mentions(kg, decomposition.entity_mentions, mentions)

    with trace.stage("seeds"):
        extra_queries = list(decomposition.global_queries[1:])
        vecs = np.asarray(cache.embed(extra_queries), dtype=np.float32) if extra_queries else qvec[None, :0]
        global_vecs = np.vstack([qvec[None, :], vecs.reshape(-1, len(qvec))])
        name_cos = mention_cosines(kg, qvec, [m.id for m in mentions])
        # one Milvus client serialises calls, so these run one after the other
        rel_hits = kg.vectors.search(RELATIONS, global_vecs, max(FACT_POOL, params.top_k_per_query), payload=False)
        chunk_hits = kg.vectors.search(CHUNKS, qvec[None, :], PASSAGE_POOL, payload=False)[0]  # ids + scores
        mem = memory_graph(index, _bm25_or_none(kg, trace))
        seeds = choose_seeds(
            index, mem,
            mentions=[(m.idx, float(c)) for m, c in zip(mentions, name_cos, strict=True)],
            fact_hits=rel_hits[0], chunk_hits=chunk_hits, entity_hits=entity_hits,
            max_seeds=params.max_seed_nodes,
        )
        reset = personalisation(mem, seeds)

    with ThreadPoolExecutor(max_workers=2) as pool:
        local_future = pool.submit(_local, kg, seeds, reset, decomposition.hops, params, trace)
        global_future = pool.submit(_global, kg, rel_hits, params, trace)
        local, globals_ = local_future.result(), global_future.result()

    with trace.stage("verbalize"):
        paths = sorted(local.paths, key=lambda p: -p.ppr_score)
        local_facts = [path_fact(p) for p in paths]
        global_facts = [global_fact(g) for g in globals_]
        # query vs path text, the path read as its edges' stored description vectors: nothing re-embedded
        vecs = kg_fact_vectors(kg)(local_facts + global_facts)
        fact_vecs = {f.id: v for f, v in zip(local_facts + global_facts, vecs, strict=True)}
        sims = vecs[: len(local_facts)] @ qvec
        paths = [p.model_copy(update={"path_semantic_score": float(s)}) for p, s in zip(paths, sims, strict=False)]
        local_facts = [
            f.model_copy(update={"scores": {**f.scores, "path_semantic": float(s)}})
            for f, s in zip(local_facts, sims, strict=False)
        ]
        facts = merge_facts(local_facts, global_facts)
    with trace.stage("sources"):
        facts, chunks = with_sources(facts, kg.vectors)
    with trace.stage("rerank"):
        facts = _rerank(kg, settings, query, facts, params, trace, fact_vecs)

    entities = dict(local.entities)
    relations: dict[str, Relation] = {}
    for p in paths:
        relations.update((e.id, e) for e in p.edges)
    for g in globals_:
        entities.setdefault(g.source.id, g.source)
        entities.setdefault(g.target.id, g.target)
        relations.setdefault(g.relation.id, g.relation)
    seed_ids = [index.arrays.node_ids[i] for i in seeds.ranked]
    subgraph = _subgraph(facts, entities, relations, seed_ids)
    in_graph = {n.id for n in subgraph.nodes}
    ppr_of = local.scores
    entity_ppr = {} if ppr_of is None else {  # the graph view's details panel shows each entity's own PPR
        n.id: float(ppr_of[index.id_to_idx[n.id]]) for n in subgraph.nodes if n.id in index.id_to_idx}
    trace.timings.append(StageTiming(stage="total", ms=(time.perf_counter() - start) * 1000))
    ids = index.arrays.node_ids
    mass = {} if ppr_of is None else {ids[i]: float(ppr_of[i]) for i in top_mass(ppr_of, PPR_MASS_TOP)}
    return SearchResult(
        query=query,
        params=params,
        facts=tuple(facts),
        subgraph=subgraph,
        seed_ids=tuple(seed_ids),
        destination_ids=tuple(d for d in local.destinations if d in in_graph),
        paths=tuple(paths),
        global_relations=tuple(globals_),
        decomposition=decomposition,
        timings=tuple(trace.timings),
        warnings=tuple(dict.fromkeys(trace.warnings)),
        graph_version=kg.version,
        entity_ppr=entity_ppr,
        ppr_mass=mass,
        chunks=cited(facts, chunks),
        evidence_strength=strength(rel_hits[0], chunk_hits, entity_hits, kg.embedder.name),
    )
