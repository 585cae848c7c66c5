"""Multi-document retrieval grouped by book (seed 004 MultiDocSynthesizer)."""

from __future__ import annotations

import time
from collections import defaultdict

from pydantic import Field

from retrieval.graph.runtime import KG
from retrieval.graph.traverse import chunk_record, read_chunks
from retrieval.items import relation_item_id
from retrieval.models import SearchResult, StageTiming, VerbalizedFact
from retrieval.search.tools import ToolParams, chunk_fact, embed_query
from retrieval.search.verbalize import cited
from retrieval.stores.base import CHUNKS, RELATIONS


class MultiDocParams(ToolParams):
    num_docs: int = Field(3, ge=1, le=20)
    max_sections: int = Field(3, ge=1, le=20)
    min_relevance: float = Field(0.2, ge=-1.0, le=1.0)


def multidoc_search(
    kg: KG, query: str, num_docs: int = 3, max_sections: int = 3, min_relevance: float = 0.2
) -> SearchResult:
    """Top `num_docs` books by their best chunk, up to `max_sections` chunks each above `min_relevance`,
    plus the graph relations whose source chunks are among them."""
    p = MultiDocParams.model_validate(
        {"query": query, "num_docs": num_docs, "max_sections": max_sections, "min_relevance": min_relevance}
    )
    start = time.perf_counter()
    vec = embed_query(kg, p.query)
    pool = min(500, max(100, 20 * p.num_docs * p.max_sections))
    chunk_hits = kg.vectors.search(CHUNKS, vec, pool)[0]
    # only relations above the threshold can be shown: fetch just those from the graph store
    rel_hits = [h for h in kg.vectors.search(RELATIONS, vec, pool)[0] if h.score >= p.min_relevance]
    by_book: dict[str, list[VerbalizedFact]] = defaultdict(list)
    for hit in chunk_hits:
        if hit.score < p.min_relevance:
            continue
        book = str(hit.payload.get("original_document", "")) or "(no book)"
        if len(by_book[book]) < p.max_sections:
            by_book[book].append(chunk_fact(hit.id, hit.payload, {"vector": hit.score, "similarity": hit.score}))
    books = sorted(by_book, key=lambda b: -by_book[b][0].scores["vector"])[: p.num_docs]
    chunk_ids = {f.chunk_ids[0] for b in books for f in by_book[b]}
    rel_ids = [h.id for h in rel_hits]
    relations = {r.id: r for r in kg.graph.get_relations(rel_ids)} if rel_ids else {}
    facts: list[VerbalizedFact] = []
    groups: dict[str, tuple[str, ...]] = {}
    for book in books:
        chunk_facts = by_book[book]
        ids = {f.chunk_ids[0] for f in chunk_facts}
        rel_facts = [
            VerbalizedFact(
                id=relation_item_id(h.id), type="global", channel="graph",
                text=f"{h.payload.get('relation_type', '')}: {h.payload.get('text', '')}",
                scores={"similarity": h.score}, chunk_ids=tuple(relations[h.id].source_chunks),
                relation_ids=(h.id,), entity_ids=(relations[h.id].source_id, relations[h.id].target_id),
                sources=tuple(s for f in chunk_facts if f.chunk_ids[0] in relations[h.id].source_chunks
                              for s in f.sources),
            )
            for h in rel_hits
            if h.id in relations and ids & set(relations[h.id].source_chunks)
        ][: p.max_sections]
        facts.extend(chunk_facts + rel_facts)
        groups[book] = tuple(f.id for f in chunk_facts + rel_facts)
    # the chunks' own records come with their hits; a relation's other source chunks are read in one call
    known = {h.id: chunk_record(h.id, h.payload) for h in chunk_hits if h.id in chunk_ids}
    known |= read_chunks(kg.vectors, [c for f in facts for c in f.chunk_ids if c not in known])
    elapsed = (time.perf_counter() - start) * 1000
    return SearchResult(
        query=p.query, mode="multidoc", facts=tuple(facts), groups=groups,
        timings=(StageTiming(stage="multidoc", ms=elapsed),),
        counts={"books": len(books), "chunks": len(chunk_ids), "facts": len(facts)}, graph_version=kg.version,
        chunks=cited(facts, known),
    )
