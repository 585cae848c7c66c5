"""Global (relation-centred) search: relation descriptions nearest each global sub-query.

One batched vector search over `RelationDescriptions` serves every sub-query; hits are deduplicated by
relation id (best score kept) and completed from the graph store in one call per record kind.
"""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.graph.index import GraphIndex, get_entities
from retrieval.models import Entity, GlobalRelation, Relation
from retrieval.stores.base import GraphStore, VectorHit


def best_hits(hits_per_query: Sequence[Sequence[VectorHit]], top_k_per_query: int) -> list[VectorHit]:
    """The top `top_k_per_query` hits of each sub-query, deduplicated by id (best score), best first."""
    best: dict[str, VectorHit] = {}
    for hits in hits_per_query:
        for hit in sorted(hits, key=lambda h: -h.score)[:top_k_per_query]:
            if hit.id not in best or hit.score > best[hit.id].score:
                best[hit.id] = hit
    return sorted(best.values(), key=lambda h: (-h.score, h.id))


def global_relations(index: GraphIndex, graph: GraphStore, hits: Sequence[VectorHit]) -> list[GlobalRelation]:
    """GlobalRelation records for relation hits (ONE get_relations + ONE get_entities call).

    A hit whose relation is no longer in the graph store is skipped (the vector payload alone
    cannot give its source chunks).
    """
    if not hits:
        return []
    relations = {r.id: r for r in graph.get_relations([h.id for h in hits])}
    ends = list(dict.fromkeys(x for r in relations.values() for x in (r.source_id, r.target_id)))
    entities = {e.id: e for e in get_entities(index, graph, ends)} if ends else {}
    out = []
    for hit in hits:
        rel: Relation | None = relations.get(hit.id)
        if rel is None:
            continue
        src = entities.get(rel.source_id) or Entity(id=rel.source_id, name=rel.source_id)
        dst = entities.get(rel.target_id) or Entity(id=rel.target_id, name=rel.target_id)
        out.append(
            GlobalRelation(
                source=src,
                target=dst,
                relation=rel,
                relation_type=rel.relation_type,
                description=rel.description or str(hit.payload.get("description", "")),
                score=float(hit.score),
            )
        )
    return out
