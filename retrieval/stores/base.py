"""Store protocols and the back-end registries (`retrieval.registry`: imported lazily, checked on load)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import numpy as np

from retrieval.models import Entity, GraphChanges, GraphData, QueryResult, Relation, Subgraph
from retrieval.registry import Registry, protocol_methods

if TYPE_CHECKING:
    from retrieval.config import Settings
    from retrieval.stores.console import Hold

ENTITIES = "Entities"
RELATIONS = "RelationDescriptions"
CHUNKS = "DocumentChunks"
COLLECTIONS = (ENTITIES, RELATIONS, CHUNKS)
# Scalar payload stored next to each vector (besides `id`); every field is a string except `position` (int).
PAYLOAD_FIELDS: dict[str, tuple[str, ...]] = {
    ENTITIES: ("name", "type", "text"),
    RELATIONS: ("text", "source_id", "target_id", "relation_type"),
    CHUNKS: ("text", "source", "original_document", "chapter", "author", "position"),
}
INT_FIELDS = frozenset({"position"})



@dataclass(frozen=True)
class StoreLocation:
    """Where one graph version lives: a local directory, plus a key for server-side resources."""

    dir: Path
    key: str  # [A-Za-z0-9_], unique per graph version; FalkorDB graph name / Milvus prefix


@dataclass(frozen=True)
class EdgeArrays:
    """The whole graph as arrays, for PageRank/PPR on an in-memory CSR."""

    node_ids: list[str]
    node_names: list[str]
    node_types: list[str]
    node_chunks: list[tuple[str, ...]]  # chunk ids mentioning each node
    src: np.ndarray  # int64 indexes into node_ids
    dst: np.ndarray
    weight: np.ndarray  # float64
    relation_ids: list[str]
    relation_types: list[str]
    # aliases of each node (same order as node_ids) for name matching; empty list = not exported
    node_aliases: list[tuple[str, ...]] = field(default_factory=list)


@dataclass(frozen=True)
class VectorHit:
    id: str
    score: float  # cosine similarity in [-1, 1]
    payload: dict[str, Any]


class GraphStore(Protocol):
    """A property graph of Entity nodes and Relation edges. Parameterised queries only."""

    def upsert(self, data: GraphData) -> None: ...
    def get_entities(self, ids: Sequence[str], *, chunks: bool = True) -> list[Entity]:
        """Entities for `ids` in the order asked. `chunks=False`: the caller has the chunk links (the
        in-memory index) and a store may leave `source_chunks` empty."""
        ...
    def get_relations(self, ids: Sequence[str]) -> list[Relation]: ...
    def find_entities(self, name: str, *, fuzzy: bool = False, limit: int = 10) -> list[Entity]: ...
    def neighbourhood(
        self,
        seed_ids: Sequence[str],
        *,
        hops: int = 1,
        max_edges: int = 500,
        relation_types: Sequence[str] | None = None,
    ) -> Subgraph: ...
    def export_edges(self) -> EdgeArrays: ...
    def counts(self) -> dict[str, int]: ...
    def close(self) -> None: ...


class GraphUpdates(Protocol):
    """In-place updates of a stored graph (curation): apart from `GraphStore` to keep each interface small."""

    def write(self, changes: GraphChanges) -> None:
        """Apply `changes` as one unit (deletes, then puts), with parameterised statements only; a reader sees
        the graph before or after it. Cost grows with the size of the change, not of the graph."""
        ...

    def undescribed(self) -> list[str]:
        """Ids of the relations stored without a description: their vector text is made of their ends' names,
        so renaming an end changes it (one scan, cached by the caller)."""
        ...

    def ready_to_write(self) -> None:
        """Make sure a `write` can start now (Kuzu: open the database for writing, waiting a bounded time for
        other processes' locks), StoreError otherwise: called before a changeset is logged, so that a graph held
        elsewhere refuses the change with nothing recorded."""
        ...


class VectorStore(Protocol):
    """Three collections (Entities, RelationDescriptions, DocumentChunks) of normalised vectors."""

    def ensure(self, dim: int) -> None: ...
    def insert(self, collection: str, rows: Sequence[dict[str, Any]], vectors: np.ndarray) -> None: ...
    def search(
        self, collection: str, vectors: np.ndarray, limit: int, *, payload: bool = True
    ) -> list[list[VectorHit]]: ...
    def get(self, collection: str, ids: Sequence[str]) -> list[dict[str, Any]]: ...
    def vectors(self, collection: str, ids: Sequence[str]) -> np.ndarray:
        """Stored vectors of `ids`, one row each in order (zeros for an unknown id): no re-embedding."""
        ...

    def count(self, collection: str) -> int: ...
    def drop(self) -> None: ...
    def close(self) -> None: ...
    def wait_ready(self, timeout_s: float = ...) -> None:
        """Block until searches are served by the built index (a server indexes after ingest; Lite at once)."""


class VectorUpdates(Protocol):
    """In-place updates of the vector collections (curation); `insert` already replaces a row by id."""

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """Remove the rows of `ids` (unknown ids are ignored)."""
        ...

    def sync(self) -> None:
        """Read what other processes wrote from now on (a server store reads at Strong consistency)."""
        ...


def unique(ids: Iterable[str]) -> list[str]:
    """`ids` without repeats, first occurrence first."""
    return list(dict.fromkeys(ids))


def fuzzy_ids(key: str, labels: Sequence[str], owners: Sequence[str], limit: int) -> list[str]:
    """Owner ids of the labels closest to `key` (rapidfuzz WRatio >= 60), best first, each id once."""
    from rapidfuzz import fuzz, process

    hits = process.extract(key, labels, scorer=fuzz.WRatio, limit=limit * 3, score_cutoff=60)
    return unique(owners[i] for _, _, i in hits)[:limit]


N = TypeVar("N", bound=Hashable)  # a node key: entity id, or a back end's internal node number


@dataclass(frozen=True)
class Expansion(Generic[N]):
    """Nodes reached by `expand` in BFS order (seeds first), and relation ids kept, hop by hop in id order."""

    nodes: list[N]
    edges: list[str]
    truncated: bool
    total_nodes: int


def expand(
    seeds: Sequence[N],
    hops: int,
    max_edges: int,
    types: list[str] | None,
    incident: Callable[[Sequence[N], list[str] | None, int], Iterable[tuple[str, N, N]]],
    neighbours: Callable[[Sequence[N], list[str] | None], Iterable[N]],
) -> Expansion[N]:
    """Breadth-first k-hop expansion over edges of either direction, at most `max_edges` edges (by id order).

    `incident(frontier, types, limit)` gives the first `limit` (relation id, source, target) by relation id
    touching the frontier; `neighbours(frontier, types)` every node next to it. When the cap cuts a hop short,
    `truncated` is set and `total_nodes` counts the nodes within reach up to that hop (the seeds, every node
    reached so far and every neighbour of the hop's frontier). Shared by the graph stores.
    """
    reached = dict.fromkeys(seeds)
    frontier = list(reached)
    edges: dict[str, None] = {}
    for _ in range(max(hops, 0)):
        if not frontier:
            break
        nxt: list[N] = []
        # Edges kept at the previous hop come back (they touch the frontier); hence max_edges + 1.
        for rid, src, dst in incident(frontier, types, max_edges + 1):
            if rid in edges:
                continue
            if len(edges) >= max_edges:
                total = len(set(reached) | set(neighbours(frontier, types)))
                return Expansion(list(reached), list(edges), True, total)
            edges[rid] = None
            for node in (src, dst):
                if node not in reached:
                    reached[node] = None
                    nxt.append(node)
        frontier = nxt
    return Expansion(list(reached), list(edges), False, len(reached))


class GraphBackend(Protocol):
    """What a graph back end's class provides besides an open store: opening one, and deleting a version's
    server-side data (embedded back ends keep theirs in the version directory: nothing to delete)."""

    @classmethod
    def open(cls, settings: Settings, location: StoreLocation) -> GraphStore: ...
    @staticmethod
    def delete_graph(settings: Settings, location: StoreLocation) -> bool: ...


class VectorBackend(Protocol):
    @classmethod
    def open(cls, settings: Settings, location: StoreLocation) -> VectorStore: ...


class ConsoleAdapter(Protocol):
    """A graph back end's read-only Cypher console (`retrieval.explore.console` calls it). `unchanging` is held
    while the adapter reads the version's live files (Kuzu copies them): the graph's read lock."""

    @staticmethod
    def read_only_query(settings: Settings, location: StoreLocation, query: str, params: dict[str, Any],
                        timeout_ms: int, max_rows: int, unchanging: Hold | None = None) -> QueryResult: ...
    @staticmethod
    def explain_query(settings: Settings, location: StoreLocation, query: str, params: dict[str, Any],
                      unchanging: Hold | None = None) -> str: ...


GRAPH_STORES = Registry("graph back end", {
    "kuzu": "retrieval.stores.kuzu:KuzuGraphStore",
    "falkordb": "retrieval.stores.falkordb:FalkorGraphStore",
}, protocol_methods(GraphStore, GraphUpdates, GraphBackend))
GRAPH_CONSOLES = Registry("graph console", {
    "kuzu": "retrieval.stores.kuzu_console",
    "falkordb": "retrieval.stores.falkordb_console",
}, protocol_methods(ConsoleAdapter))
VECTOR_STORES = Registry("vector back end", {
    "milvus": "retrieval.stores.milvus:MilvusVectorStore",
}, protocol_methods(VectorStore, VectorUpdates, VectorBackend))


def graph_backend(settings: Settings) -> type[GraphBackend]:
    """The class of the graph back end `settings` names (ConfigError listing the valid names otherwise)."""
    cls: type[GraphBackend] = GRAPH_STORES.load(settings.graph_backend)
    return cls


def graph_console(settings: Settings) -> ConsoleAdapter:
    """The read-only console adapter of the graph back end `settings` names."""
    adapter: ConsoleAdapter = GRAPH_CONSOLES.load(settings.graph_backend)
    return adapter


def open_graph_store(settings: Settings, location: StoreLocation) -> GraphStore:
    """Open the graph back end named by `settings.graph_backend` at `location`."""
    return graph_backend(settings).open(settings, location)


def updates(store: GraphStore) -> GraphUpdates:
    """The in-place update side of a graph store (every registered back end has it: the registry checks)."""
    return store  # type: ignore[return-value]


def vector_updates(store: VectorStore) -> VectorUpdates:
    """The in-place update side of a vector store (every registered back end has it: the registry checks)."""
    return store  # type: ignore[return-value]


def open_vector_store(settings: Settings, location: StoreLocation) -> VectorStore:
    """Open the vector back end named by `settings.vector_backend` at `location`."""
    cls: type[VectorBackend] = VECTOR_STORES.load(settings.vector_backend)
    return cls.open(settings, location)
