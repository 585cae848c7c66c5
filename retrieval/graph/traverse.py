"""Traversal on the in-memory CSR: budgeted BFS, neighbourhood expansion and k shortest simple paths.

Everything runs on `GraphIndex` arrays; a relation-type filter is compared as data against the
edge arrays and never reaches a query. Details (descriptions, chunks) come from a `Details` source,
normally the graph store; without one, records are built from the index arrays alone.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal, Protocol

import networkx as nx
import numpy as np

from retrieval.embedding import Embedder
from retrieval.errors import NotFoundError, ValidationError
from retrieval.graph.index import GraphIndex
from retrieval.models import (
    Chunk,
    Entity,
    FactStep,
    GraphPath,
    NeighbourSummary,
    PathResult,
    Relation,
    SourceMetadata,
    Subgraph,
    TraversalResult,
)
from retrieval.stores.base import CHUNKS, GraphStore, VectorStore, unique

Direction = Literal["out", "in", "both"]
DIRECTIONS: tuple[str, ...] = ("out", "in", "both")
MAX_DEPTH = 6
MAX_K = 20
MAX_HOPS = 6
MAX_BUDGET = 10_000
MAX_EDGES = 100_000
MAX_RELATION_TYPES = 100
_PATH_POOL = 100  # simple paths ranked at most, before the top k is taken
_REGION_EDGES = 200_000  # largest subgraph handed to networkx for Yen's algorithm


class Details(Protocol):
    """Where full entity/relation records come from (a GraphStore satisfies it)."""

    def get_entities(self, ids: Sequence[str]) -> list[Entity]: ...
    def get_relations(self, ids: Sequence[str]) -> list[Relation]: ...


# --- validation -------------------------------------------------------------------------------


def _check_int(name: str, value: int, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not lo <= value <= hi:
        raise ValidationError(f"{name} must be an integer from {lo} to {hi}, got {value!r}")
    return int(value)


def _check_direction(direction: str) -> Direction:
    if direction not in DIRECTIONS:
        raise ValidationError(f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
    return direction  # type: ignore[return-value]


def _check_relation_types(relation_types: Sequence[str] | None) -> tuple[str, ...]:
    if relation_types is None:
        return ()
    if isinstance(relation_types, str):
        relation_types = [relation_types]
    types = tuple(relation_types)
    if len(types) > MAX_RELATION_TYPES or not all(isinstance(t, str) for t in types):
        raise ValidationError(f"relation types must be at most {MAX_RELATION_TYPES} strings")
    return tuple(dict.fromkeys(types))


def _node(index: GraphIndex, node_id: str) -> int:
    idx = index.id_to_idx.get(node_id) if isinstance(node_id, str) else None
    if idx is None:
        raise NotFoundError(f"no entity with id {node_id!r} in the graph")
    return idx


# --- cached arrays ----------------------------------------------------------------------------


def _adjacency(index: GraphIndex, side: Literal["out", "in"]) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, edge order): the edges leaving (out) or entering (in) each node, as a CSR of edge ids."""
    key = f"traverse.adj.{side}"
    cached = index.extras.get(key)
    if cached is None:
        keys = np.asarray(index.arrays.src if side == "out" else index.arrays.dst, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        indptr = np.zeros(index.n_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(keys, minlength=index.n_nodes), out=indptr[1:])
        cached = (indptr, order)
        index.extras[key] = cached
    return cached  # type: ignore[return-value]


def degrees(index: GraphIndex) -> np.ndarray:
    """Each node's undirected degree (relations at it), computed once per index."""
    cached = index.extras.get("traverse.degree")
    if cached is None:
        cached = np.diff(index.und_csr.indptr)
        index.extras["traverse.degree"] = cached
    return cached  # type: ignore[return-value]


# Front and back matter an LLM extracts entities from (a Project Gutenberg header and licence, a copyright page):
# never what a sample question should ask about.
BOILERPLATE = re.compile(r"\b(?:project gutenberg|gutenberg|e-?books?|licen[cs]es?|copyrights?|trademarks?|ein|isbn|"
                         r"internal revenue service|literary archive|public domain|www|https?)\b", re.I)


def sample_question(index: GraphIndex) -> str | None:
    """A relationship question from the graph's substance: its best-connected entity and that entity's
    best-connected neighbour (else the next best-connected entity), boilerplate skipped; None for an empty graph."""
    names = index.arrays.node_names
    degree = degrees(index)
    ranked = [int(i) for i in np.argsort(-degree, kind="stable") if not BOILERPLATE.search(names[int(i)])]
    if not ranked:
        return None
    first = ranked[0]
    near = index.und_csr.indices[index.und_csr.indptr[first]:index.und_csr.indptr[first + 1]].tolist()
    others = [i for i in (sorted(set(near), key=lambda i: (-degree[i], i)) + ranked[1:])
              if i != first and not BOILERPLATE.search(names[i]) and names[i] != names[first]]
    if not others:
        return f"What is {names[first][:200]}?"
    return f"How does {names[first][:200]} relate to {names[others[0]][:200]}?"


def _relation_mask(index: GraphIndex, types: tuple[str, ...]) -> tuple[np.ndarray | None, list[str]]:
    """Boolean mask of edges whose type is in `types` (exact string comparison), and unknown types."""
    if not types:
        return None, []
    cached = index.extras.get("traverse.type_codes")
    if cached is None:
        table: dict[str, int] = {}
        codes = np.fromiter(
            (table.setdefault(t, len(table)) for t in index.arrays.relation_types),
            dtype=np.int64,
            count=index.n_edges,
        )
        cached = (table, codes)
        index.extras["traverse.type_codes"] = cached
    table, codes = cached  # type: ignore[misc]
    wanted = [table[t] for t in types if t in table]
    unknown = [t for t in types if t not in table]
    return np.isin(codes, np.asarray(wanted, dtype=np.int64)), unknown


def _gather(indptr: np.ndarray, order: np.ndarray, frontier: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edge ids of every node in `frontier` (vectorised CSR row gather) and the frontier node of each."""
    starts = indptr[frontier]
    lens = indptr[frontier + 1] - starts
    total = int(lens.sum())
    if total == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    run_starts = np.cumsum(lens) - lens
    pos = np.repeat(starts - run_starts, lens) + np.arange(total)
    return order[pos], np.repeat(frontier, lens)


def _bfs_arrays(
    index: GraphIndex, start: int, max_depth: int, direction: Direction, mask: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Level-synchronous BFS over all reachable nodes: (order, depth, parent node, parent edge).

    Exact and vectorised per level, so counting "M reachable" costs O(reachable edges) in numpy;
    within a level, better-connected nodes come first so a budget shows the informative ones.
    """
    n = index.n_nodes
    src, dst = index.arrays.src, index.arrays.dst
    depth = np.full(n, -1, dtype=np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    parent_edge = np.full(n, -1, dtype=np.int64)
    depth[start] = 0
    order = [np.array([start], dtype=np.int64)]
    frontier = order[0]
    degree = degrees(index)
    sides = ("out", "in") if direction == "both" else (direction,)
    for level in range(1, max_depth + 1):
        edge_parts, from_parts, to_parts = [], [], []
        for side in sides:
            indptr, eorder = _adjacency(index, side)  # type: ignore[arg-type]
            edges, origin = _gather(indptr, eorder, frontier)
            if mask is not None:
                keep = mask[edges]
                edges, origin = edges[keep], origin[keep]
            edge_parts.append(edges)
            from_parts.append(origin)
            to_parts.append(dst[edges] if side == "out" else src[edges])
        to = np.concatenate(to_parts)
        fresh = depth[to] < 0
        if not fresh.any():
            break
        to, edges, origin = to[fresh], np.concatenate(edge_parts)[fresh], np.concatenate(from_parts)[fresh]
        new, first = np.unique(to, return_index=True)
        depth[new] = level
        parent[new] = origin[first]
        parent_edge[new] = edges[first]
        new = new[np.lexsort((new, -degree[new]))]
        order.append(new)
        frontier = new
    return np.concatenate(order), depth, parent, parent_edge


# --- records ----------------------------------------------------------------------------------


def _with_fallback(ids: list[str], found: dict[str, Any], kind: str, warnings: list[str], checked: bool) -> None:
    missing = sum(1 for i in ids if i not in found) if checked else 0
    if missing:
        warnings.append(f"{missing} {kind} are missing from the graph store; shown from the index")


def _entities(index: GraphIndex, idxs: Sequence[int], details: Details | None, warnings: list[str]) -> list[Entity]:
    a = index.arrays
    ids = [a.node_ids[i] for i in idxs]
    found = {e.id: e for e in details.get_entities(ids)} if details is not None and ids else {}
    _with_fallback(ids, found, "entities", warnings, details is not None)
    return [
        found.get(nid)
        or Entity(id=nid, name=a.node_names[i], type=a.node_types[i], source_chunks=tuple(a.node_chunks[i]))
        for i, nid in zip(idxs, ids, strict=True)
    ]


def _relations(index: GraphIndex, eids: Sequence[int], details: Details | None, warnings: list[str]) -> list[Relation]:
    a = index.arrays
    ids = [a.relation_ids[e] for e in eids]
    found = {r.id: r for r in details.get_relations(ids)} if details is not None and ids else {}
    _with_fallback(ids, found, "relations", warnings, details is not None)
    weight = a.weight if len(a.weight) else np.ones(len(a.src))
    return [
        found.get(rid)
        or Relation(id=rid, source_id=a.node_ids[int(a.src[e])], target_id=a.node_ids[int(a.dst[e])],
                    relation_type=a.relation_types[e], weight=float(weight[e]))
        for e, rid in zip(eids, ids, strict=True)
    ]


def path_steps(nodes: Sequence[Entity], edges: Sequence[Relation]) -> tuple[FactStep, ...]:
    """The path's relations in walk order, each with the way its own edge runs (an incoming edge is not forward)."""
    return tuple(FactStep(left=prev.name, relation=edge.relation_type, right=node.name,
                          forward=edge.source_id == prev.id, description=edge.description)
                 for prev, node, edge in zip(nodes, nodes[1:], edges, strict=False))


def verbalize(nodes: Sequence[Entity], edges: Sequence[Relation]) -> str:
    """`A --[REL: description]--> B <--[REL]-- C`: the arrow follows each edge's own direction."""
    parts = [nodes[0].name] if nodes else []
    for step in path_steps(nodes, edges):
        label = f"{step.relation}: {step.description}" if step.description else step.relation
        parts.append(f"--[{label}]-->" if step.forward else f"<--[{label}]--")
        parts.append(step.right)
    return " ".join(parts)


def step_line(step: FactStep) -> str:
    """`A —REL→ B`, or `A ←REL— B` when the relation runs from B to A: the screen's form of one relation."""
    return f"{step.left} —{step.relation}→ {step.right}" if step.forward else \
        f"{step.left} ←{step.relation}— {step.right}"


def chain(steps: Sequence[FactStep]) -> str:
    """A path on one line, `A —REL→ B ←REL2— C`, each arrow the way its relation runs."""
    if not steps:
        return ""
    return steps[0].left + "".join(
        (f" —{s.relation}→ " if s.forward else f" ←{s.relation}— ") + s.right for s in steps)


def readable(steps: Sequence[FactStep]) -> str:
    """The screen's one layout for every fact with relations: per relation a line `A —REL→ B` (the arrow the way
    the relation runs), then its description as text, indented, each of its own lines kept (LightRAG's keywords)."""
    lines = []
    for step in steps:
        lines.append(step_line(step))
        lines += ["    " + " ".join(part.split()) for part in step.description.splitlines() if part.strip()]
    return "\n".join(lines)


_CHUNK_FIELDS = frozenset(Chunk.model_fields) - {"id"}


def chunk_record(chunk_id: str, payload: Mapping[str, Any]) -> Chunk:
    """A DocumentChunks row, or a search hit's payload, as a Chunk record."""
    return Chunk(id=chunk_id, **{k: v for k, v in payload.items() if k in _CHUNK_FIELDS})


def read_chunks(vectors: VectorStore, ids: Sequence[str]) -> dict[str, Chunk]:
    """Chunk records (text, book, chapter) by id from DocumentChunks; ids it does not hold are left out."""
    wanted = list(dict.fromkeys(i for i in ids if i))
    rows = vectors.get(CHUNKS, wanted) if wanted else []
    return {str(r["id"]): chunk_record(str(r["id"]), r) for r in rows}


def chunk_sources(chunk_ids: Sequence[str], chunks: Mapping[str, Chunk]) -> list[SourceMetadata]:
    """SourceMetadata for chunk ids from their records (the id alone for a chunk without one)."""
    out = []
    for c in dict.fromkeys(c for c in chunk_ids if c):
        chunk = chunks.get(c)
        out.append(SourceMetadata(source=c, chunk_id=c) if chunk is None else SourceMetadata(
            source=chunk.source or c, original_document=chunk.original_document, chapter=chunk.chapter,
            author=chunk.author, chunk_id=c))
    return out


def path_sources(vectors: VectorStore | None, chunk_ids: Sequence[str]) -> list[SourceMetadata]:
    """SourceMetadata for chunk ids, read from the DocumentChunks collection (ids kept if no store)."""
    ids = list(dict.fromkeys(c for c in chunk_ids if c))
    return chunk_sources(ids, read_chunks(vectors, ids) if vectors is not None and ids else {})


# --- BFS and expansion ------------------------------------------------------------------------


def bfs(
    index: GraphIndex,
    start_id: str,
    max_depth: int = 2,
    *,
    relation_types: Sequence[str] | None = None,
    direction: Direction = "out",
    node_budget: int = 200,
    max_edges: int = 2000,
    details: Details | GraphStore | None = None,
) -> TraversalResult:
    """Breadth-first search from `start_id` within `max_depth` hops, showing at most `node_budget` nodes.

    Returns the start plus the shown nodes in BFS order, one (shortest) path to each, the induced subgraph
    (edges among them that pass the filter) and "showing N of M": N shown and M reachable (exact), both
    without the start node.
    """
    max_depth = _check_int("max_depth", max_depth, 0, MAX_DEPTH)
    node_budget = _check_int("node_budget", node_budget, 1, MAX_BUDGET)
    max_edges = _check_int("max_edges", max_edges, 1, MAX_EDGES)
    direction = _check_direction(direction)
    types = _check_relation_types(relation_types)
    start = _node(index, start_id)
    warnings: list[str] = []
    mask, unknown = _relation_mask(index, types)
    if unknown:
        warnings.append(f"no relation of type {', '.join(map(repr, unknown))} in this graph")

    order, depth, parent, parent_edge = _bfs_arrays(index, start, max_depth, direction, mask)
    shown = order[: node_budget + 1]
    # BFS order is depth-sorted, so a prefix holds every ancestor of each shown node.
    in_shown = np.zeros(index.n_nodes, dtype=bool)
    in_shown[shown] = True
    src, dst = index.arrays.src, index.arrays.dst
    induced = in_shown[src] & in_shown[dst]
    if mask is not None:
        induced &= mask
    tree = parent_edge[shown[1:]]
    others = np.setdiff1d(np.flatnonzero(induced), tree)
    room = max(0, max_edges - len(tree))  # tree edges always stay, so every shown node keeps its path
    if len(others) > room:
        warnings.append(f"showing {len(tree) + room} of {len(tree) + len(others)} edges among the shown nodes")
        others = others[:room]
    edge_ids = np.concatenate([tree, others])

    entities = _entities(index, shown.tolist(), details, warnings)
    relations = _relations(index, edge_ids.tolist(), details, warnings)
    ent_by_idx = dict(zip(shown.tolist(), entities, strict=True))
    rel_by_eid = dict(zip(edge_ids.tolist(), relations, strict=True))
    paths = []
    for v in shown[1:].tolist():
        chain_nodes, chain_edges = [v], []
        while chain_nodes[-1] != start:
            u = chain_nodes[-1]
            chain_edges.append(int(parent_edge[u]))
            chain_nodes.append(int(parent[u]))
        nodes = [ent_by_idx[i] for i in reversed(chain_nodes)]
        edges = [rel_by_eid[e] for e in reversed(chain_edges)]
        paths.append(GraphPath(nodes=tuple(nodes), edges=tuple(edges), text=verbalize(nodes, edges), hops=len(edges)))

    return TraversalResult(
        start_id=start_id,
        max_depth=max_depth,
        direction=direction,
        relation_types=types,
        depths={index.arrays.node_ids[i]: int(depth[i]) for i in shown.tolist()},
        paths=tuple(paths),
        subgraph=Subgraph(
            nodes=tuple(entities), edges=tuple(relations), total_nodes=len(order), truncated=len(shown) < len(order)
        ),
        shown=len(shown) - 1,
        total=len(order) - 1,
        warnings=tuple(warnings),
    )


def expand(
    index: GraphIndex,
    node_id: str,
    node_budget: int = 50,
    *,
    relation_types: Sequence[str] | None = None,
    direction: Direction = "both",
    details: Details | GraphStore | None = None,
) -> TraversalResult:
    """The neighbours of one node, best-connected first, with "showing N of M" (a hub stays fast)."""
    return bfs(
        index,
        node_id,
        1,
        relation_types=relation_types,
        direction=direction,
        node_budget=node_budget,
        details=details,
    )


def incident_edges(index: GraphIndex, node_id: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every relation of one entity, either direction, self-loops left out: (edge ids, other-end node
    indexes, outgoing?)."""
    v = _node(index, node_id)
    at = np.array([v], dtype=np.int64)
    out_e, _ = _gather(*_adjacency(index, "out"), at)
    in_e, _ = _gather(*_adjacency(index, "in"), at)
    eids = np.concatenate([out_e, in_e])
    others = np.concatenate([index.arrays.dst[out_e], index.arrays.src[in_e]]).astype(np.int64)
    outgoing = np.concatenate([np.ones(len(out_e), dtype=bool), np.zeros(len(in_e), dtype=bool)])
    keep = others != v
    return eids[keep], others[keep], outgoing[keep]


def neighbour_summary(index: GraphIndex, node_id: str, shown: Collection[str]) -> NeighbourSummary:
    """Of an entity's distinct neighbours, how many `shown` holds ("N of M"), and the left-out ones counted per
    relation type (a neighbour joined by two types counts under both), so a view can offer the rest by type."""
    eids, others, _ = incident_edges(index, node_id)
    ids = index.arrays.node_ids
    inside = np.fromiter((ids[o] in shown for o in others.tolist()), dtype=bool, count=len(others))
    left: dict[str, set[int]] = {}
    for e, o in zip(eids[~inside].tolist(), others[~inside].tolist(), strict=True):
        left.setdefault(index.arrays.relation_types[e], set()).add(o)
    counts = {t: len(v) for t, v in sorted(left.items(), key=lambda kv: (-len(kv[1]), kv[0]))}
    return NeighbourSummary(node_id=node_id, shown=len(np.unique(others[inside])), total=len(np.unique(others)),
                            left_by_type=counts)


# --- k shortest simple paths ------------------------------------------------------------------


def _distances(index: GraphIndex, start: int, max_hops: int, mask: np.ndarray | None) -> np.ndarray:
    return _bfs_arrays(index, start, max_hops, "both", mask)[1]


def _path_subgraph(
    index: GraphIndex, a: int, b: int, max_hops: int, mask: np.ndarray | None
) -> tuple[nx.Graph, int, int]:
    """Undirected graph of the nodes on some a-b walk of <= L hops (d(a,v) + d(v,b) <= L), and L.

    L is max_hops unless that region has over _REGION_EDGES edges (hubs); then the largest L that fits.
    Parallel edges collapse to the heaviest one, since Yen's algorithm needs a simple graph.
    """
    da, db = _distances(index, a, max_hops, mask), _distances(index, b, max_hops, mask)
    src, dst, weight = index.arrays.src, index.arrays.dst, index.arrays.weight
    reach = (da >= 0) & (db >= 0)
    total = np.where(reach, da + db, max_hops + 1)
    hops = max_hops
    while True:
        on_path = total <= hops
        keep = on_path[src] & on_path[dst] & (src != dst)
        if mask is not None:
            keep &= mask
        eids = np.flatnonzero(keep)
        if len(eids) <= _REGION_EDGES or hops <= max(int(db[a]), 1):
            break
        hops -= 1
    if len(weight):
        eids = eids[np.lexsort((-eids, weight[eids]))]  # heaviest (then first) last, so it wins below
    graph: nx.Graph = nx.Graph()
    graph.add_nodes_from(np.flatnonzero(on_path).tolist())
    graph.add_edges_from((int(src[e]), int(dst[e]), {"eid": int(e)}) for e in eids)
    return graph, int(on_path.sum()), hops


def _ppr(index: GraphIndex, seeds: dict[int, float], damping: float) -> np.ndarray:
    from retrieval.graph.ppr import Transition, ppr

    trans = index.extras.get("ppr.transition.und")
    if not isinstance(trans, Transition):
        trans = Transition.of(index.und_csr)
        index.extras["ppr.transition.und"] = trans
    return np.asarray(ppr(trans, seeds, damping), dtype=np.float64)


def k_shortest_paths(
    index: GraphIndex,
    source_id: str,
    target_id: str,
    k: int = 5,
    max_hops: int = 4,
    *,
    query: str = "",
    relation_types: Sequence[str] | None = None,
    details: Details | GraphStore | None = None,
    vectors: VectorStore | None = None,
    embedder: Embedder | None = None,
    damping: float = 0.5,
) -> PathResult:
    """Up to k shortest simple paths between two entities (Yen 1971, via networkx on the a-b region).

    Ranked by hop count; within a length by score = PPR mass of the intermediate nodes (personalised
    PageRank from both ends, normalised to the best candidate), averaged with the cosine similarity of
    the path's edge descriptions to `query` when one is given. Edges are followed in either direction.
    """
    k = _check_int("k", k, 1, MAX_K)
    max_hops = _check_int("max_hops", max_hops, 1, MAX_HOPS)
    if not 0.0 < damping < 1.0:
        raise ValidationError(f"damping must be in (0, 1), got {damping!r}")
    if not isinstance(query, str):
        raise ValidationError("query must be a string")
    types = _check_relation_types(relation_types)
    a, b = _node(index, source_id), _node(index, target_id)
    if a == b:
        raise ValidationError("source and target are the same entity")
    warnings: list[str] = []
    mask, unknown = _relation_mask(index, types)
    if unknown:
        warnings.append(f"no relation of type {', '.join(map(repr, unknown))} in this graph")

    graph, region, hops = _path_subgraph(index, a, b, max_hops, mask)
    if hops < max_hops:
        warnings.append(f"paths limited to {hops} hops: the {max_hops}-hop region is too large (hub nodes)")
    candidates: list[list[int]] = []
    if b in graph and a in graph:
        try:
            for p in nx.shortest_simple_paths(graph, a, b):
                if len(p) - 1 > hops or len(candidates) >= max(_PATH_POOL, k):
                    break
                candidates.append(p)
        except nx.NetworkXNoPath:
            pass
    if not candidates:
        warnings.append(f"no path within {max_hops} hops")
    ends = _entities(index, [a, b], details, warnings)
    if not candidates:
        return PathResult(source=ends[0], target=ends[1], k=k, max_hops=max_hops, query=query, warnings=tuple(warnings))

    edge_paths = [[graph.edges[u, v]["eid"] for u, v in zip(p, p[1:], strict=False)] for p in candidates]
    all_nodes = sorted({i for p in candidates for i in p})
    all_edges = sorted({e for es in edge_paths for e in es})
    ent = dict(zip(all_nodes, _entities(index, all_nodes, details, warnings), strict=True))
    rel = dict(zip(all_edges, _relations(index, all_edges, details, warnings), strict=True))

    ppr = _ppr(index, {a: 0.5, b: 0.5}, damping)
    mass = np.array([float(ppr[p[1:-1]].sum()) for p in candidates])
    ppr_norm = mass / mass.max() if mass.max() > 0 else np.zeros(len(candidates))
    sims: np.ndarray | None = None
    if query.strip() and embedder is not None:
        texts = ["; ".join(f"{rel[e].relation_type} {rel[e].description}".strip() for e in es) for es in edge_paths]
        vecs = embedder.embed([query, *texts])
        sims = vecs[1:] @ vecs[0]
    elif query.strip():
        warnings.append("no embedder given: paths are not ranked by the query")
    score = ppr_norm if sims is None else 0.5 * ppr_norm + 0.5 * np.clip(sims, 0.0, 1.0)
    ranking = sorted(range(len(candidates)), key=lambda i: (len(candidates[i]), -score[i], i))[:k]

    path_chunks = {i: tuple(dict.fromkeys(c for e in edge_paths[i] for c in rel[e].source_chunks)) for i in ranking}
    sources = {s.chunk_id: s for s in path_sources(vectors, [c for cs in path_chunks.values() for c in cs])}
    paths = []
    for i in ranking:
        nodes = [ent[n] for n in candidates[i]]
        edges = [rel[e] for e in edge_paths[i]]
        chunk_ids = path_chunks[i]
        paths.append(
            GraphPath(
                nodes=tuple(nodes),
                edges=tuple(edges),
                text=verbalize(nodes, edges),
                hops=len(edges),
                ppr_mass=float(mass[i]),
                query_similarity=None if sims is None else float(sims[i]),
                score=float(score[i]),
                chunk_ids=chunk_ids,
                sources=tuple(sources[c] for c in chunk_ids if c in sources),
            )
        )
    sub_nodes = {n.id: n for p in paths for n in p.nodes}
    sub_edges = {r.id: r for p in paths for r in p.edges}
    return PathResult(
        source=ends[0],
        target=ends[1],
        paths=tuple(paths),
        subgraph=Subgraph(nodes=tuple(sub_nodes.values()), edges=tuple(sub_edges.values()), total_nodes=region),
        k=k,
        max_hops=max_hops,
        query=query,
        candidates=len(candidates),
        warnings=tuple(warnings),
    )


def name_choices(index: GraphIndex, name: str, limit: int = 5) -> tuple[str | None, list[str]]:
    """The id of the entity named `name` (case-insensitive name or alias), else None and the ids of the closest
    names, best first: character similarity (rapidfuzz WRatio), raised where a word of one begins a word of the
    other ("free" → freemium, free trial). A name that is no entity is the analyst's choice, never a quiet swap."""
    from rapidfuzz import fuzz, process

    key = " ".join(str(name).split()).lower()
    if not key:
        raise ValidationError("entity name must be a non-empty string")
    a = index.arrays
    labels, owners = [n.lower() for n in a.node_names], list(a.node_ids)
    for eid, aliases in zip(a.node_ids, a.node_aliases or [()] * len(a.node_ids), strict=True):
        labels += [x.lower() for x in aliases]
        owners += [eid] * len(aliases)
    exact = next((owners[i] for i, label in enumerate(labels) if " ".join(label.split()) == key), None)
    if exact is not None:
        return exact, []
    words = [w for w in re.findall(r"\w+", key) if len(w) >= 3]

    def score(label: str, base: float) -> float:
        theirs = re.findall(r"\w+", label)
        shared = any(t.startswith(w) or (len(t) >= 3 and w.startswith(t)) for w in words for t in theirs)
        return base + (20 if shared else 0)

    hits = process.extract(key, labels, scorer=fuzz.WRatio, limit=max(50, limit * 10), score_cutoff=40)
    ranked = sorted(hits, key=lambda h: (-score(h[0], h[1]), h[2]))
    return None, unique(owners[i] for _, _, i in ranked)[:limit]


def resolve_entity(store: GraphStore, name: str) -> Entity:
    """The entity whose name or alias is `name` (case-insensitive). A name that is no entity's (a typo, or an entity
    since deleted or merged away) is never swapped for the closest one: NotFoundError names the input and the
    closest names to give instead (as the pages' pickers offer them, `name_choices`)."""
    if not isinstance(name, str) or not name.strip():
        raise ValidationError("entity name must be a non-empty string")
    hits = store.find_entities(name, fuzzy=False, limit=1)
    if hits:
        return hits[0]
    near = [e.name for e in store.find_entities(name, fuzzy=True, limit=5)]
    closest = f"; the closest names: {', '.join(repr(n) for n in dict.fromkeys(near))} (give one exactly)" \
        if near else ""
    raise NotFoundError(f"no entity named {name!r}{closest}")
