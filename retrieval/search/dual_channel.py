"""Dual-channel retrieval (seed 002): semantic document chunks, then graph context about the query's entities."""

from __future__ import annotations

import time

import numpy as np

from retrieval.graph.runtime import KG
from retrieval.items import entity_item_id
from retrieval.models import Chunk, Entity, Relation, SearchResult, StageTiming, Subgraph, VerbalizedFact
from retrieval.search.decompose import entity_mentions, hops_for
from retrieval.search.tools import ToolParams, embed_query, vector_search
from retrieval.search.verbalize import with_sources
from retrieval.stores.base import ENTITIES

MAX_RELATIONS_PER_ENTITY = 5
GRAPH_EDGE_CAP = 400


def entity_context(entity: Entity, edges: list[Relation], names: dict[str, str]) -> str:
    """One graph "chunk": the entity, its description and up to five of its relations, as text."""
    lines = [f"{entity.name} ({entity.type}): {entity.description}".rstrip(": ")]
    for r in edges[:MAX_RELATIONS_PER_ENTITY]:
        lines.append(
            f"{names.get(r.source_id, r.source_id)} --[{r.relation_type}]--> "
            f"{names.get(r.target_id, r.target_id)}: {r.description}"
        )
    return "\n".join(lines)


def graph_context(kg: KG, query: str, cap: int, qvec: np.ndarray | None = None
                  ) -> tuple[list[VerbalizedFact], Subgraph, int]:
    """Entity-centred graph chunks: name/embedding mentions, depth 2 for relationship queries else 1."""
    neighbours = kg.vectors.search(ENTITIES, embed_query(kg, query) if qvec is None else qvec, 10)[0]
    mentions = entity_mentions(kg.index, query, neighbours)
    if not mentions:
        return [], Subgraph(), 1
    hops = hops_for(query, len(mentions), None)
    sub = kg.graph.neighbourhood([m.id for m in mentions], hops=hops, max_edges=GRAPH_EDGE_CAP)
    names = {n.id: n.name for n in sub.nodes}
    by_id = {n.id: n for n in sub.nodes}
    edges_of: dict[str, list[Relation]] = {}
    for e in sub.edges:
        edges_of.setdefault(e.source_id, []).append(e)
        edges_of.setdefault(e.target_id, []).append(e)
    ordered = [m.id for m in mentions] + [n.id for n in sub.nodes]
    facts: list[VerbalizedFact] = []
    seen_names: set[str] = set()
    for eid in ordered:
        entity = by_id.get(eid)
        if entity is None or entity.name.casefold() in seen_names:
            continue  # dedup by entity name
        seen_names.add(entity.name.casefold())
        edges = edges_of.get(eid, [])
        facts.append(VerbalizedFact(
            id=entity_item_id(eid), type="entity", channel="graph",
            text=entity_context(entity, edges, names),
            scores={"mention": 1.0 if eid in {m.id for m in mentions} else 0.0},
            entity_ids=(eid,), relation_ids=tuple(e.id for e in edges[:MAX_RELATIONS_PER_ENTITY]),
            chunk_ids=tuple(dict.fromkeys(c for e in edges[:MAX_RELATIONS_PER_ENTITY] for c in e.source_chunks)),
        ))
        if len(facts) >= cap:
            break
    return facts, sub, hops


def dual_channel_search(kg: KG, query: str, limit: int = 10) -> SearchResult:
    """Semantic chunks first, graph context after (deduplicated by entity name, capped at 2x the chunks).

    Citations: documents `[N: Book - Chapter]`, graph `[N: Knowledge Graph - Entity]`. A graph failure
    never breaks the document channel: it becomes a warning.
    """
    p = ToolParams.model_validate({"query": query, "limit": limit})
    start = time.perf_counter()
    qvec = embed_query(kg, p.query)  # once for both channels
    timings = [StageTiming(stage="embed", ms=(time.perf_counter() - start) * 1000)]
    docs = vector_search(kg, p.query, p.limit, qvec=qvec)
    timings += docs.timings
    warnings: list[str] = []
    graph_facts: list[VerbalizedFact] = []
    graph_chunks: dict[str, Chunk] = {}
    sub, hops = Subgraph(), 1
    start = time.perf_counter()
    try:
        graph_facts, sub, hops = graph_context(kg, p.query, cap=2 * max(1, len(docs.facts)), qvec=qvec)
        graph_facts, graph_chunks = with_sources(graph_facts, kg.vectors)
    except Exception as exc:  # the seed requires document retrieval to survive any graph failure
        warnings.append(f"graph channel failed: {type(exc).__name__}: {exc}; document results only")
    timings.append(StageTiming(stage="graph", ms=(time.perf_counter() - start) * 1000))
    cited: list[VerbalizedFact] = []
    names = {e.id: e.name for e in sub.nodes}
    for n, fact in enumerate([*docs.facts, *graph_facts], start=1):
        if fact.channel == "graph":
            name = names.get(fact.entity_ids[0], fact.entity_ids[0])
            label = f"[{n}: Knowledge Graph - {name}]"
        else:
            src = fact.sources[0] if fact.sources else None
            label = f"[{n}: {src.original_document} - {src.chapter}]" if src else f"[{n}: Document]"
        cited.append(fact.model_copy(update={"citation": label}))
    return SearchResult(
        query=p.query, mode="dual", facts=tuple(cited), subgraph=sub, timings=tuple(timings),
        seed_ids=tuple(f.entity_ids[0] for f in graph_facts if f.scores.get("mention")),
        warnings=tuple(warnings), graph_version=kg.version,
        counts={"document": len(docs.facts), "graph": len(graph_facts), "hops": hops},
        chunks={**docs.chunks, **graph_chunks},
    )
