"""What the graph view's details panel shows for one entity or relation: its record, degree, typed relations and
source chunks (book, chapter), read from the in-memory index, the graph store and DocumentChunks.

An id the opened graph does not hold (a stored subgraph from elsewhere, the schema view's type nodes) is
described from the view's own records instead (`view_entity_details`, `view_relation_details`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from retrieval.errors import NotFoundError
from retrieval.graph.index import GraphIndex, get_entities, relation_nodes
from retrieval.graph.traverse import degrees, incident_edges, read_chunks
from retrieval.models import Chunk, Entity, EntityDetails, RelationDetails, RelationLine, Subgraph
from retrieval.stores.base import GraphStore, VectorStore

MAX_RELATIONS = 40
MAX_SOURCES = 8


def _sources(vectors: VectorStore | None, ids: Sequence[str], limit: int) -> tuple[tuple[Chunk, ...], int]:
    unique = list(dict.fromkeys(i for i in ids if i))
    if vectors is None or not unique:
        return (), len(unique)
    found = read_chunks(vectors, unique[:limit])
    return tuple(found.get(i) or Chunk(id=i, text="") for i in unique[:limit]), len(unique)


def entity_details(
    index: GraphIndex,
    graph: GraphStore,
    vectors: VectorStore | None,
    entity_id: str,
    *,
    max_relations: int = MAX_RELATIONS,
    max_sources: int = MAX_SOURCES,
) -> EntityDetails:
    """The entity's record, its degree in the whole graph, its relations (typed, with descriptions; the ones to
    its best-connected neighbours first, `max_relations` of them) and its source chunks. NotFoundError if the
    graph has no such entity."""
    eids, others, outgoing = incident_edges(index, entity_id)
    found = get_entities(index, graph, [entity_id])
    if not found:
        raise NotFoundError(f"no entity with id {entity_id!r} in the graph store")
    entity = found[0]
    a = index.arrays
    degree = degrees(index)
    order = np.lexsort((eids, -degree[others]))[:max_relations] if len(eids) else np.zeros(0, dtype=np.int64)
    records = {r.id: r for r in graph.get_relations([a.relation_ids[e] for e in eids[order].tolist()])}
    lines = []
    for e, o, out in zip(eids[order].tolist(), others[order].tolist(), outgoing[order].tolist(), strict=True):
        rel = records.get(a.relation_ids[e])
        if rel is not None:
            lines.append(RelationLine(relation=rel, other_id=a.node_ids[o], other_name=a.node_names[o],
                                      other_type=a.node_types[o], outgoing=bool(out)))
    types = Counter(a.relation_types[e] for e in eids.tolist())
    sources, total = _sources(vectors, entity.source_chunks, max_sources)
    return EntityDetails(entity=entity, degree=len(eids), relations=tuple(lines), relations_total=len(eids),
                         relation_types=dict(types.most_common()), sources=sources, sources_total=total)


def relation_details(
    index: GraphIndex, graph: GraphStore, vectors: VectorStore | None, relation_id: str, *,
    max_sources: int = MAX_SOURCES,
) -> RelationDetails:
    """The relation's record (type, description, weight, validity), both ends and its source chunks."""
    s, t = relation_nodes(index, relation_id)
    found = graph.get_relations([relation_id]) if s is not None else []
    if not found or s is None or t is None:
        raise NotFoundError(f"no relation with id {relation_id!r} in the graph")
    ends = {e.id: e for e in get_entities(index, graph, [index.arrays.node_ids[s], index.arrays.node_ids[t]])}
    rel = found[0]
    source = ends.get(rel.source_id) or Entity(id=rel.source_id, name=index.arrays.node_names[s])
    target = ends.get(rel.target_id) or Entity(id=rel.target_id, name=index.arrays.node_names[t])
    sources, total = _sources(vectors, rel.source_chunks, max_sources)
    return RelationDetails(relation=rel, source=source, target=target, sources=sources, sources_total=total)


def view_entity_details(
    view: Subgraph, entity_id: str, vectors: VectorStore | None = None, *,
    max_relations: int = MAX_RELATIONS, max_sources: int = MAX_SOURCES,
) -> EntityDetails:
    """An entity described from the view's own records (degree and relations within the view)."""
    nodes = {n.id: n for n in view.nodes}
    if entity_id not in nodes:
        raise NotFoundError(f"no entity with id {entity_id!r} in this view")
    edges = [e for e in view.edges if entity_id in (e.source_id, e.target_id) and e.source_id != e.target_id]
    lines = []
    for e in edges[:max_relations]:
        out = e.source_id == entity_id
        other = nodes.get(e.target_id if out else e.source_id)
        other_id = e.target_id if out else e.source_id
        lines.append(RelationLine(relation=e, other_id=other_id, other_name=other.name if other else other_id,
                                  other_type=other.type if other else "entity", outgoing=out))
    types = Counter(e.relation_type for e in edges)
    entity = nodes[entity_id]
    sources, total = _sources(vectors, entity.source_chunks, max_sources)
    return EntityDetails(entity=entity, degree=len(edges), relations=tuple(lines), relations_total=len(edges),
                         relation_types=dict(types.most_common()), sources=sources, sources_total=total,
                         in_graph=False)


def view_relation_details(view: Subgraph, relation_id: str, vectors: VectorStore | None = None, *,
                          max_sources: int = MAX_SOURCES) -> RelationDetails:
    """A relation described from the view's own records."""
    rel = next((e for e in view.edges if e.id == relation_id), None)
    if rel is None:
        raise NotFoundError(f"no relation with id {relation_id!r} in this view")
    nodes = {n.id: n for n in view.nodes}
    source = nodes.get(rel.source_id) or Entity(id=rel.source_id, name=rel.source_id)
    target = nodes.get(rel.target_id) or Entity(id=rel.target_id, name=rel.target_id)
    sources, total = _sources(vectors, rel.source_chunks, max_sources)
    return RelationDetails(relation=rel, source=source, target=target, sources=sources, sources_total=total,
                           in_graph=False)
