"""Local (entity-centred) search: seeds -> personalised PageRank on the memory graph -> traced paths.

The memory graph follows HippoRAG 2 (Gutiérrez et al., arXiv:2502.14802): entity nodes joined by relation
edges, plus one node per passage joined to the entities it mentions. The personalisation puts
  * entity seeds: entities named in the query and the endpoints of the top query-to-fact matches
    ("recognition memory" without an LLM: facts that touch a named entity are preferred), each weighted
    by its similarity times node specificity 1/|passages mentioning it| (HippoRAG, arXiv:2405.14831);
  * passage seeds: dense query-passage similarity, min-max scaled, times 0.05 (HippoRAG 2's weight).
PPR runs with damping 0.5 (HippoRAG) on the whole graph's CSR, or on a k-hop neighbourhood read from the
graph store when the graph is larger than `SearchParams.full_graph_max_edges`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from retrieval.graph.index import GraphIndex, get_entities, relation_nodes
from retrieval.graph.ppr import Transition, ppr
from retrieval.models import Entity, Relation, SearchParams, SemanticPath
from retrieval.stores.base import GraphStore, VectorHit

PASSAGE_NODE_WEIGHT = 0.05  # HippoRAG 2: passage_node_weight
TOP_FACTS = 5  # HippoRAG 2: facts linked to the graph per query
FACT_POOL = 50  # query-to-fact candidates searched, from which the top facts are taken
PASSAGE_POOL = 200  # dense passage candidates put in the personalisation
_TOKEN = re.compile(r"[a-z0-9]+")  # the BM25 tokenizer's tokens (retrieval.graph.bm25)


@dataclass(frozen=True)
class MemoryGraph:
    """Entities + passages as one graph, its PPR transition, and each entity's specificity."""

    transition: Transition
    n_entities: int
    specificity: np.ndarray  # 1 / max(|chunks linked|, passages containing the name's rarest token)
    df: dict[str, int] = field(default_factory=dict, repr=False)  # the token document frequencies it used


def token_df(bm25_index: object) -> dict[str, int]:
    """Document frequency of every token of a bm25s index (number of chunks containing it)."""
    retriever = getattr(bm25_index, "retriever", None)
    scores = getattr(retriever, "scores", None)
    vocab = getattr(retriever, "vocab_dict", None)
    if not scores or not vocab:
        return {}
    indptr = np.asarray(scores["indptr"])
    return {tok: int(indptr[i + 1] - indptr[i]) for tok, i in vocab.items() if i + 1 < len(indptr)}


def _specificity(index: GraphIndex, df: dict[str, int], rows: Sequence[int] | None = None) -> np.ndarray:
    # |P_i| from the node-chunk links; the text document frequency of the name's rarest token bounds it
    # from above for generic names ("first", "city") that the extractor linked to few chunks only.
    nc = index.node_chunk if rows is None else index.node_chunk[list(rows)]
    names = index.arrays.node_names if rows is None else [index.arrays.node_names[i] for i in rows]
    linked = np.asarray((nc != 0).sum(axis=1)).ravel().astype(np.float64)
    if df:
        text_df = np.array(
            [min((df.get(t, 0) for t in _TOKEN.findall(name.lower())), default=0) for name in names],
            dtype=np.float64,
        )
        linked = np.maximum(linked, text_df)
    return np.asarray(1.0 / np.maximum(linked, 1.0))


def _transition(index: GraphIndex) -> Transition:
    nc = sp.csr_matrix(index.node_chunk, dtype=np.float64)
    adj = sp.bmat([[index.und_csr, nc], [nc.T, None]], format="csr", dtype=np.float64)
    adj.setdiag(0)
    adj.eliminate_zeros()
    return Transition.of(adj)


def patch_memory_graph(old: MemoryGraph, new: GraphIndex, delta: Any) -> MemoryGraph:
    """The memory graph after an in-place change (`retrieval.graph.patch.IndexDelta`): the transition is kept
    when no edge, node or chunk link changed (a rename, a description), else made again from the patched CSRs
    (vectorised scipy); specificity is carried over and computed again for the changed nodes only."""
    keep = not delta.edges_changed and not delta.nodes_moved and not delta.rechunked and new.n_nodes == old.n_entities
    transition = old.transition if keep else _transition(new)
    spec = delta.carry(old.specificity, 1.0)
    changed = sorted(set(delta.renamed) | set(delta.rechunked))
    if changed:
        spec[changed] = _specificity(new, old.df, changed)
    return MemoryGraph(transition, new.n_nodes, spec, old.df)


def build_memory_graph(index: GraphIndex, df: dict[str, int] | None = None) -> MemoryGraph:
    """[[entity-entity relation weights, entity-passage links], [passage-entity links, 0]], undirected."""
    return MemoryGraph(_transition(index), index.n_nodes, _specificity(index, df or {}), df or {})


def memory_graph(index: GraphIndex, df_source: object | None = None) -> MemoryGraph:
    """The memory graph of this version (built once, cached on the index, patched by a curation change).
    `df_source`: a BM25 index."""
    return index.cached("memory_graph", lambda: build_memory_graph(index, token_df(df_source) if df_source else {}),
                        patch_memory_graph)


# --- seeds ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seeds:
    """Entity seeds (node index -> weight, best first) and passage seeds (chunk index -> weight)."""

    entities: dict[int, float]
    passages: dict[int, float] = field(default_factory=dict)
    named: tuple[int, ...] = ()  # the entity seeds the query names, in text order

    @property
    def ranked(self) -> list[int]:
        """Entity seeds in priority order (named entities first)."""
        return list(self.entities)


def choose_seeds(
    index: GraphIndex,
    mem: MemoryGraph,
    *,
    mentions: Sequence[tuple[int, float]],
    fact_hits: Sequence[VectorHit] = (),
    chunk_hits: Sequence[VectorHit] = (),
    entity_hits: Sequence[VectorHit] = (),
    max_seeds: int = 5,
) -> Seeds:
    """Seed weights for one query (see the module docstring).

    `mentions`: (node, query-entity cosine) of the entities the query names; `fact_hits`: relation
    descriptions nearest the query; `entity_hits`: nearest entities, used only when nothing else seeds.
    """
    spec = mem.specificity
    weights: dict[int, float] = {}

    def add(idx: int | None, score: float) -> None:
        if idx is not None:
            w = max(float(score), 0.0) * float(spec[idx])
            if w > weights.get(idx, 0.0):
                weights[idx] = w

    named = {i for i, _ in mentions}
    for idx, cos in mentions:
        add(idx, cos)
    ends = [(h, *relation_nodes(index, h.id)) for h in fact_hits]  # from the index: hits need no payload
    anchored = [e for e in ends if e[1] in named or e[2] in named]
    for hit, s, t in (anchored or ends)[:TOP_FACTS]:
        add(s, hit.score)
        add(t, hit.score)
    if not weights:
        for hit in entity_hits[:max_seeds]:
            add(index.id_to_idx.get(hit.id), hit.score)
    # the entities the query names come first (the user asked about them), then the rest by weight
    top = sorted(weights, key=lambda i: (i not in named, -weights[i]))[:max_seeds]
    passages: dict[int, float] = {}
    pairs = [(index.chunk_to_idx[h.id], h.score) for h in chunk_hits if h.id in index.chunk_to_idx]
    if pairs:
        scores = np.array([s for _, s in pairs])
        lo, hi = float(scores.min()), float(scores.max())
        scaled = (scores - lo) / (hi - lo) if hi > lo else np.ones_like(scores)
        passages = {c: float(w) * PASSAGE_NODE_WEIGHT for (c, _), w in zip(pairs, scaled, strict=True) if w > 0}
    kept = {i: weights[i] for i in top if weights[i] > 0}
    return Seeds(kept, passages, tuple(i for i, _ in mentions if i in kept))


def personalisation(mem: MemoryGraph, seeds: Seeds) -> np.ndarray:
    """The PPR restart vector over [entities | passages] (not normalised; PPR normalises)."""
    n_passages = mem.transition.n - mem.n_entities
    vec = np.zeros(mem.transition.n)
    for i, w in seeds.entities.items():
        vec[i] += w
    for c, w in seeds.passages.items():
        if c < n_passages:
            vec[mem.n_entities + c] += w
    return vec


def restricted_ppr(
    mem: MemoryGraph, reset: np.ndarray, keep_entities: np.ndarray, damping: float
) -> np.ndarray:
    """PPR on the sub-graph of `keep_entities` (bool mask) and their passages; zeros elsewhere."""
    n = mem.transition.n
    keep = np.zeros(n, dtype=bool)
    keep[: mem.n_entities] = keep_entities
    # passages linked to a kept entity (the transition is column-stochastic: [passage, entity] > 0)
    linked = mem.transition.matrix[mem.n_entities :, : mem.n_entities] @ keep_entities.astype(np.float64)
    keep[mem.n_entities :] = np.asarray(linked).ravel() > 0
    sub_idx = np.flatnonzero(keep)
    out = np.zeros(n)
    sub_reset = reset[sub_idx]
    if not len(sub_idx) or sub_reset.sum() <= 0:
        return out
    # re-normalise the columns of the kept block: the dropped neighbours' share stays in the sub-graph
    sub = Transition.of(mem.transition.matrix[sub_idx][:, sub_idx].T)
    out[sub_idx] = ppr(sub, sub_reset, damping)
    return out


# --- paths ------------------------------------------------------------------------------------


def hop_distances(csr: sp.csr_matrix, sources: Sequence[int], max_hops: int) -> np.ndarray:
    """Hop distance from the nearest source over `csr` (-1 if farther than `max_hops`); level-synchronous BFS."""
    dist = np.full(csr.shape[0], -1, dtype=np.int64)
    frontier = np.unique(np.asarray(sources, dtype=np.int64))
    dist[frontier] = 0
    for hop in range(1, max_hops + 1):
        if not len(frontier):
            break
        reached = np.zeros(csr.shape[0], dtype=bool)  # a mask, not np.unique: hub rows hold 10^5 neighbours
        reached[csr[frontier].indices] = True
        frontier = np.flatnonzero(reached & (dist < 0))
        dist[frontier] = hop
    return dist


def top_by_score(nodes: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The `k` best `nodes` by score, ties by index (a partition first, so a big candidate set sorts little)."""
    if len(nodes) > 4 * k > 0:
        cut = -np.partition(-scores[nodes], k - 1)[k - 1]
        nodes = nodes[scores[nodes] >= cut]
    return nodes[np.lexsort((nodes, -scores[nodes]))][:k]


def trace_path(csr: sp.csr_matrix, dist: np.ndarray, scores: np.ndarray, dest: int) -> list[int]:
    """Seed -> `dest` node path: walk back one hop at a time to the highest-scoring predecessor."""
    path = [dest]
    cur = dest
    for level in range(int(dist[dest]) - 1, -1, -1):
        nbrs = csr.indices[csr.indptr[cur] : csr.indptr[cur + 1]]
        cand = nbrs[dist[nbrs] == level]
        cur = int(cand[np.lexsort((cand, -scores[cand]))[0]])
        path.append(cur)
    return path[::-1]


def pick_edge(index: GraphIndex, a: int, b: int) -> int:
    """The heaviest relation between nodes a and b (either direction); ties: the first stored."""
    eids = index.edges_between(a, b)
    return max(eids, key=lambda e: (index.arrays.weight[e], -e))


@dataclass(frozen=True)
class TracedPaths:
    """Node-index paths (seed first) and the relation index of each hop."""

    nodes: list[list[int]]
    edges: list[list[int]]
    destinations: list[int]


def trace_destinations(
    index: GraphIndex, scores: np.ndarray, seeds: Sequence[int], max_hops: int, top_k: int,
    named: Sequence[int] = (),
) -> TracedPaths:
    """Paths to the top-`top_k` non-seed entities by PPR within `max_hops` of a seed.

    When the query names two or more entities, the paths joining the first to each other one come
    first (a relationship query asks how they connect), also traced through the highest-PPR nodes.
    """
    if not seeds:
        return TracedPaths([], [], [])
    csr = index.und_csr
    nodes: list[list[int]] = []
    if len(named) >= 2:
        from_first = hop_distances(csr, [named[0]], max_hops)
        nodes += [trace_path(csr, from_first, scores, b) for b in dict.fromkeys(named[1:]) if from_first[b] > 0]
    dist = hop_distances(csr, seeds, max_hops)
    reach = np.flatnonzero(dist > 0)
    dests = top_by_score(reach, scores, top_k).tolist()
    nodes += [trace_path(csr, dist, scores, d) for d in dests]
    edges = [[pick_edge(index, a, b) for a, b in zip(p, p[1:], strict=False)] for p in nodes]
    return TracedPaths(nodes, edges, dests)


def materialise_paths(
    index: GraphIndex,
    graph: GraphStore,
    traced: TracedPaths,
    scores: np.ndarray,
    extra_nodes: Sequence[str] = (),
) -> tuple[list[SemanticPath], dict[str, Entity]]:
    """Full Entity/Relation records for traced paths (ONE get_entities and ONE get_relations call).

    `extra_nodes` (e.g. seeds without a path) are fetched in the same call and returned in the dict.
    """
    node_ids = list(dict.fromkeys([*extra_nodes, *(index.arrays.node_ids[i] for p in traced.nodes for i in p)]))
    rel_ids = list(dict.fromkeys(index.arrays.relation_ids[e] for es in traced.edges for e in es))
    entities = {e.id: e for e in get_entities(index, graph, node_ids)} if node_ids else {}
    relations = {r.id: r for r in graph.get_relations(rel_ids)} if rel_ids else {}

    def entity(i: int) -> Entity:
        nid = index.arrays.node_ids[i]
        return entities.get(nid) or Entity(id=nid, name=index.arrays.node_names[i], type=index.arrays.node_types[i])

    def relation(e: int) -> Relation:
        rid = index.arrays.relation_ids[e]
        return relations.get(rid) or Relation(
            id=rid,
            source_id=index.arrays.node_ids[int(index.arrays.src[e])],
            target_id=index.arrays.node_ids[int(index.arrays.dst[e])],
            relation_type=index.arrays.relation_types[e],
        )

    paths = []
    for nodes, edges in zip(traced.nodes, traced.edges, strict=True):
        ents = [entity(i) for i in nodes]
        paths.append(
            SemanticPath(
                source_node=ents[0],
                intermediate_nodes=tuple(ents[1:-1]),
                destination_node=ents[-1],
                edges=tuple(relation(e) for e in edges),
                ppr_score=float(scores[nodes[-1]]),
            )
        )
    return paths, entities


def neighbourhood_mask(index: GraphIndex, graph: GraphStore, seed_ids: Sequence[str], params: SearchParams,
                       hops: int) -> np.ndarray:
    """Entities of the k-hop neighbourhood the graph store returns (edge-capped), as a mask."""
    sub = graph.neighbourhood(seed_ids, hops=hops, max_edges=params.max_edges)
    keep = np.zeros(index.n_nodes, dtype=bool)
    for node in sub.nodes:
        idx = index.id_to_idx.get(node.id)
        if idx is not None:
            keep[idx] = True
    for sid in seed_ids:
        keep[index.id_to_idx[sid]] = True
    return keep
