"""The graph as compiling reads it (`compile.GraphView`): the opened KG (in-memory index + stores), or a
version's stores alone (a re-import, before its in-memory index exists)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.graph.communities import Extras
from retrieval.graph.runtime import KG
from retrieval.models import Chunk, Entity, Relation
from retrieval.stores.base import CHUNKS, GraphStore, VectorStore, updates

UNDESCRIBED = "curation.undescribed"  # the index's cache of relation ids without a description
MAX_INCIDENT = 1_000_000  # a hub's relations, read at once from a store (a re-import only)
CHUNK_BATCH = 1_000


def _chunks(vectors: VectorStore, ids: Sequence[str]) -> dict[str, Chunk]:
    fields = set(Chunk.model_fields)
    rows = vectors.get(CHUNKS, list(ids)) if ids else []
    return {str(r["id"]): Chunk(**{k: v for k, v in r.items() if k in fields}) for r in rows}


def _document_chunks(vectors: VectorStore, all_ids: Sequence[str], document: str) -> list[str]:
    """Chunks whose book title or source file is `document` (read in batches from DocumentChunks)."""
    out = []
    for start in range(0, len(all_ids), CHUNK_BATCH):
        for row in vectors.get(CHUNKS, list(all_ids[start:start + CHUNK_BATCH])):
            source = str(row.get("source", ""))
            if document in (row.get("original_document"), source, source.split("#", 1)[0]):
                out.append(str(row["id"]))
    return out


@dataclass
class KGView:
    """An opened graph: incidence and chunk links from the in-memory index, records from the stores."""

    kg: KG

    @property
    def extras(self) -> Extras:
        return self.kg.communities.extras

    def entities(self, ids: Sequence[str]) -> dict[str, Entity]:
        return {e.id: e for e in self.kg.graph.get_entities(list(ids))}

    def relations(self, ids: Sequence[str]) -> dict[str, Relation]:
        return {r.id: r for r in self.kg.graph.get_relations(list(ids))}

    def incident(self, entity_id: str) -> list[str]:
        """From the undirected CSR row and the sorted edge keys: O(degree · log E), nothing built per change."""
        index = self.kg.index
        v = index.id_to_idx.get(entity_id)
        if v is None:
            return []
        und = index.und_csr
        others = und.indices[und.indptr[v]:und.indptr[v + 1]].tolist()
        own = dict.fromkeys(e for o in [v, *others] for e in index.edges_between(v, int(o)))
        return [index.arrays.relation_ids[e] for e in own]

    def undescribed(self) -> set[str]:
        """The relations without a description, read once per index (kept up to date by `Curator._install`)."""
        return self.kg.index.cached(UNDESCRIBED, lambda: set(updates(self.kg.graph).undescribed()))

    def named(self, name: str) -> list[Entity]:
        return self.kg.graph.find_entities(name, limit=50)

    def chunks(self, ids: Sequence[str]) -> dict[str, Chunk]:
        return _chunks(self.kg.vectors, ids)

    def document_chunks(self, document: str) -> list[str]:
        return _document_chunks(self.kg.vectors, self.kg.bm25.chunk_ids, document)

    def linked(self, chunk_ids: Sequence[str]) -> list[str]:
        index = self.kg.index
        cols = [index.chunk_to_idx[c] for c in chunk_ids if c in index.chunk_to_idx]
        if not cols:
            return []
        rows = index.node_chunk[:, cols].nonzero()[0]
        return [index.arrays.node_ids[i] for i in sorted(set(rows.tolist()))]


@dataclass
class StoreView:
    """A version's stores without an in-memory index (a re-import replays the log before the commit)."""

    graph: GraphStore
    vectors: VectorStore
    extras: Extras
    chunk_ids: Sequence[str]

    def entities(self, ids: Sequence[str]) -> dict[str, Entity]:
        return {e.id: e for e in self.graph.get_entities(list(ids))}

    def relations(self, ids: Sequence[str]) -> dict[str, Relation]:
        return {r.id: r for r in self.graph.get_relations(list(ids))}

    def incident(self, entity_id: str) -> list[str]:
        sub = self.graph.neighbourhood([entity_id], hops=1, max_edges=MAX_INCIDENT)
        return [r.id for r in sub.edges if entity_id in (r.source_id, r.target_id)]

    def named(self, name: str) -> list[Entity]:
        return self.graph.find_entities(name, limit=50)

    def undescribed(self) -> set[str]:
        return set(updates(self.graph).undescribed())

    def chunks(self, ids: Sequence[str]) -> dict[str, Chunk]:
        return _chunks(self.vectors, ids)

    def document_chunks(self, document: str) -> list[str]:
        return _document_chunks(self.vectors, self.chunk_ids, document)

    def linked(self, chunk_ids: Sequence[str]) -> list[str]:
        wanted = set(chunk_ids)
        arrays = self.graph.export_edges()
        return [i for i, cs in zip(arrays.node_ids, arrays.node_chunks, strict=True) if wanted & set(cs)]
