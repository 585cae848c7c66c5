"""Export a shown subgraph: lossless JSON, GraphML (strings only, for Gephi/yEd/networkx) or into graph memory."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np
from pydantic import ValidationError as PydanticValidationError

from retrieval.errors import ValidationError
from retrieval.models import Entity, MemoryResult, Relation, StoredGraph, Subgraph

if TYPE_CHECKING:
    from retrieval.explore.memory import GraphMemory
    from retrieval.graph.index import GraphIndex
    from retrieval.graph.traverse import Details

FORMAT = "kg-lens-subgraph/1"
# Characters XML 1.0 cannot carry at all (NUL, most C0 controls, lone surrogates, U+FFFE/FFFF).
_XML_ILLEGAL = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


# --- JSON -------------------------------------------------------------------------------------


def to_json(subgraph: Subgraph, metadata: Mapping[str, Any] | None = None) -> str:
    """The subgraph as a `kg-lens-subgraph/1` JSON document; `from_json` reads it back unchanged."""
    doc = {
        "format": FORMAT,
        "metadata": dict(metadata or {}),
        "total_nodes": subgraph.total_nodes,
        "truncated": subgraph.truncated,
        "nodes": [n.model_dump(mode="json") for n in subgraph.nodes],
        "edges": [e.model_dump(mode="json") for e in subgraph.edges],
    }
    text = json.dumps(doc, ensure_ascii=False, indent=1)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates in the data survive only as \ud8xx escapes
        text = json.dumps(doc, ensure_ascii=True, indent=1)
    return text


def from_json(text: str | bytes) -> Subgraph:
    """Parse a `to_json` document; a malformed one raises ValidationError naming what is wrong."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValidationError(f"not a JSON document: {exc}"[:300]) from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValidationError(f"not a {FORMAT} document")
    try:
        return Subgraph(
            nodes=tuple(Entity.model_validate(n) for n in doc.get("nodes", ())),
            edges=tuple(Relation.model_validate(e) for e in doc.get("edges", ())),
            total_nodes=int(doc.get("total_nodes", 0)),
            truncated=bool(doc.get("truncated", False)),
        )
    except (PydanticValidationError, TypeError, ValueError) as exc:
        raise ValidationError(f"invalid subgraph document: {exc}"[:300]) from exc


# --- GraphML ----------------------------------------------------------------------------------


def _xml_text(value: object) -> str:
    """A string XML can hold: containers as JSON, XML-illegal characters as U+FFFD."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return _XML_ILLEGAL.sub("\ufffd", text)


def to_networkx(subgraph: Subgraph, metadata: Mapping[str, Any] | None = None) -> nx.MultiDiGraph:
    """A MultiDiGraph keyed by relation id; every attribute is a string (lists and dicts as JSON)."""
    graph: nx.MultiDiGraph = nx.MultiDiGraph()
    graph.graph.update({k: _xml_text(v) for k, v in (metadata or {}).items()})
    for n in subgraph.nodes:
        graph.add_node(
            _xml_text(n.id),
            label=_xml_text(n.name),  # what Gephi and yEd show
            name=_xml_text(n.name),
            type=_xml_text(n.type),
            description=_xml_text(n.description),
            aliases=_xml_text(list(n.aliases)),
            properties=_xml_text(n.properties),
            source_chunks=_xml_text(list(n.source_chunks)),
        )
    for e in subgraph.edges:
        graph.add_edge(
            _xml_text(e.source_id),
            _xml_text(e.target_id),
            key=_xml_text(e.id),
            label=_xml_text(e.relation_type),
            relation_type=_xml_text(e.relation_type),
            description=_xml_text(e.description),
            weight=repr(float(e.weight)),
            vector_db_ref_id=_xml_text(e.vector_db_ref_id),
            source_chunks=_xml_text(list(e.source_chunks)),
            valid_at=_xml_text(e.valid_at or ""),
            invalid_at=_xml_text(e.invalid_at or ""),
        )
    return graph


def to_graphml(subgraph: Subgraph, metadata: Mapping[str, Any] | None = None) -> bytes:
    """The subgraph as UTF-8 GraphML (networkx.write_graphml); `nx.read_graphml` reads it back."""
    buf = io.BytesIO()
    nx.write_graphml(to_networkx(subgraph, metadata), buf, encoding="utf-8", prettyprint=True)
    return buf.getvalue()


# --- graph memory -----------------------------------------------------------------------------


def closed(subgraph: Subgraph) -> tuple[tuple[Entity, ...], tuple[Relation, ...], int]:
    """Unique nodes, the edges whose both ends are among them, and how many edges were dropped."""
    nodes = tuple({n.id: n for n in subgraph.nodes}.values())
    ids = {n.id for n in nodes}
    edges = tuple(
        e for e in {e.id: e for e in subgraph.edges}.values() if e.source_id in ids and e.target_id in ids
    )
    return nodes, edges, len(subgraph.edges) - len(edges)


def save_to_memory(
    memory: GraphMemory,
    tenant: str,
    namespace: str,
    subgraph: Subgraph,
    *,
    keywords: Sequence[str] | None = None,
    tags: Sequence[str] | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> MemoryResult:
    """Store the shown subgraph in graph memory (edges to nodes outside it are left out; a stored
    graph must be closed); the ok result carries the new graph_id."""
    nodes, edges, dropped = closed(subgraph)
    meta = dict(metadata or {})
    if dropped:
        meta["dropped_edges"] = dropped
    return memory.store_graph(tenant, namespace, nodes, edges, keywords=keywords, tags=tags, metadata=meta)


def stored_subgraph(graph: StoredGraph) -> Subgraph:
    """A stored graph as a Subgraph (for the graph view and the exporters)."""
    return Subgraph(nodes=graph.nodes, edges=graph.edges, total_nodes=len(graph.nodes))


def merge_subgraphs(parts: Sequence[Subgraph], extra_edges: Sequence[Relation] = ()) -> Subgraph:
    """Union of subgraphs by node and edge id (first record wins), plus `extra_edges` among their nodes."""
    nodes: dict[str, Entity] = {}
    edges: dict[str, Relation] = {}
    for part in parts:
        for n in part.nodes:
            nodes.setdefault(n.id, n)
        for e in part.edges:
            edges.setdefault(e.id, e)
    for e in extra_edges:
        if e.source_id in nodes and e.target_id in nodes:
            edges.setdefault(e.id, e)
    return Subgraph(
        nodes=tuple(nodes.values()),
        edges=tuple(edges.values()),
        total_nodes=len(nodes),
        truncated=any(p.truncated for p in parts),
    )


def induced_edges(
    index: GraphIndex,
    node_ids: Sequence[str],
    details: Details,
    relation_types: Sequence[str] = (),
    limit: int = 5000,
) -> list[Relation]:
    """Every relation among `node_ids` (of `relation_types`, if given), read from `details`: a view built by
    expanding nodes step by step then shows all relations between its nodes, not only the expanded ones."""
    arrays = index.arrays
    inside = np.zeros(index.n_nodes, dtype=bool)
    inside[[index.id_to_idx[i] for i in node_ids if i in index.id_to_idx]] = True
    eids = np.flatnonzero(inside[arrays.src] & inside[arrays.dst]).tolist()
    if relation_types:
        wanted = set(relation_types)
        eids = [e for e in eids if arrays.relation_types[e] in wanted]
    return details.get_relations([arrays.relation_ids[e] for e in eids[:limit]])


def suggest_keywords(subgraph: Subgraph, first: Sequence[str] = (), limit: int = 8) -> list[str]:
    """Keywords for a saved subgraph: the given names first, then the best-connected node names."""
    degree: dict[str, int] = {}
    for e in subgraph.edges:
        degree[e.source_id] = degree.get(e.source_id, 0) + 1
        degree[e.target_id] = degree.get(e.target_id, 0) + 1
    ranked = sorted(subgraph.nodes, key=lambda n: (-degree.get(n.id, 0), n.name))
    out = list(dict.fromkeys(k.strip() for k in (*first, *(n.name for n in ranked)) if k.strip()))
    return [k[:200] for k in out[:limit]]
