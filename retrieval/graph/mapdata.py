"""What the Map page draws of one graph version, as arrays in the in-memory index's entity order: stored
positions (`retrieval.graph.layout`), each entity's type, communities, degree and PageRank, and every relation
with its type. Built once per version; the UI turns it into the bytes the browser draws from."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from retrieval.graph.communities import CommunityIndex
from retrieval.graph.index import GraphIndex
from retrieval.graph.layout import Layout, Region
from retrieval.graph.ppr import Transition, ppr

PAGERANK_DAMPING = 0.85  # the classic PageRank (Brin & Page 1998), not the search's PPR damping
MAX_CODES = 65_535  # entity and relation types are sent as 16-bit codes; rarer ones beyond share the last


@dataclass(frozen=True)
class MapData:
    """The whole graph as the map draws it. Entity arrays follow `GraphIndex.arrays.node_ids`."""

    version: str
    node_ids: list[str]
    names: list[str]
    types: list[str]  # the graph's entity types, most frequent first (their colours follow this order)
    type_code: np.ndarray  # uint16 (n,)
    xy: np.ndarray  # float32 (n, 2)
    region: np.ndarray  # int32 (n,): level-0 region, -1 none
    subregion: np.ndarray  # int32 (n,): level-1 region, -1 none
    regions: tuple[Region, ...]
    region_titles: list[str]
    degree: np.ndarray  # uint32 (n,): relations at each entity
    pagerank: np.ndarray  # float32 (n,)
    src: np.ndarray  # uint32 (m,)
    dst: np.ndarray  # uint32 (m,)
    rel_types: list[str]  # relation types, most frequent first
    rel_code: np.ndarray  # uint16 (m,)
    layout_seconds: float = 0.0
    warnings: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.node_ids)


def type_order(index: GraphIndex) -> list[str]:
    """The graph's entity types, most frequent first (ties by name), once per version: the order every view
    colours types in, so a type keeps its colour on every page of one graph."""
    def build() -> list[str]:
        counts = Counter(t or "entity" for t in index.arrays.node_types)
        return sorted(counts, key=lambda t: (-counts[t], t))

    return index.cached("type_order", build)


def _codes(values: list[str], order: list[str]) -> np.ndarray:
    at = {t: min(i, MAX_CODES) for i, t in enumerate(order)}
    return np.fromiter((at[v] for v in values), dtype=np.uint16, count=len(values))


def pagerank(index: GraphIndex) -> np.ndarray:
    """PageRank of every entity on the undirected weighted entity graph (once per version)."""
    def build() -> np.ndarray:
        n = index.n_nodes
        if n == 0:
            return np.zeros(0, dtype=np.float32)
        return ppr(Transition.of(index.und_csr), np.ones(n), PAGERANK_DAMPING, tol=1e-7).astype(np.float32)

    return index.cached("pagerank", build)


def region_title(region: Region, communities: CommunityIndex) -> str:
    """A region's label: its community's title, or what the entities of an unlabelled region have in common."""
    community = communities.by_id.get(region.id) if region.id else None
    if community is not None:
        return community.title or f"Community {community.id}"
    return f"{region.size:,} entities in no community"


def map_data(index: GraphIndex, layout: Layout, communities: CommunityIndex, version: str) -> MapData:
    """The map's arrays for one opened version (see `MapData`)."""
    arrays = index.arrays
    rows = layout.rows(arrays.node_ids)
    if rows is None:
        raise ValueError("the map layout belongs to another version of this graph")
    types = type_order(index)
    rel_counts = Counter(arrays.relation_types)
    rel_types = sorted(rel_counts, key=lambda t: (-rel_counts[t], t))
    degree = np.diff(index.und_csr.indptr).astype(np.uint32)
    return MapData(
        version=version,
        node_ids=list(arrays.node_ids),
        names=list(arrays.node_names),
        types=types,
        type_code=_codes([t or "entity" for t in arrays.node_types], types),
        xy=np.ascontiguousarray(layout.xy[rows], dtype=np.float32),
        region=np.ascontiguousarray(layout.region[rows], dtype=np.int32),
        subregion=np.ascontiguousarray(layout.subregion[rows], dtype=np.int32),
        regions=layout.regions,
        region_titles=[region_title(r, communities) for r in layout.regions],
        degree=degree,
        pagerank=pagerank(index),
        src=arrays.src.astype(np.uint32),
        dst=arrays.dst.astype(np.uint32),
        rel_types=rel_types,
        rel_code=_codes(list(arrays.relation_types), rel_types),
        layout_seconds=layout.seconds,
        warnings=layout.warnings,
    )
