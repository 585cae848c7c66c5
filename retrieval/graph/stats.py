"""What an opened graph version holds, counted from its stores (not only its manifest)."""

from __future__ import annotations

from retrieval.graph import catalog
from retrieval.graph.communities import load_extras
from retrieval.models import GraphStats
from retrieval.stores.base import CHUNKS, ENTITIES, RELATIONS, GraphStore, VectorStore


def graph_stats(handle: catalog.GraphHandle, graph: GraphStore, vectors: VectorStore | None) -> GraphStats:
    """Counts read from the open stores (not only the manifest), with the version's identity.

    Without a vector store (e.g. Milvus Lite held by another process) `vectors` is left empty.
    """
    counts = {**handle.manifest.get("counts", {}), **graph.counts()}
    vector_counts = {c: vectors.count(c) for c in (ENTITIES, RELATIONS, CHUNKS)} if vectors is not None else {}
    m = handle.manifest
    extras = load_extras(handle.dir)
    return GraphStats(
        name=handle.name,
        version=handle.version,
        books=int(counts.get("books", 0)),
        chapters=int(counts.get("chapters", 0)),
        chunks=int(counts.get("chunks", vector_counts.get(CHUNKS, 0))),
        entities=int(counts.get("entities", 0)),
        relations=int(counts.get("relations", 0)),
        graph_backend=str(m.get("graph_backend", "")),
        vector_backend=str(m.get("vector_backend", "")),
        created_at=str(m.get("created_at", "")),
        embed_model=str(m.get("embed_model", "")),
        vectors=vector_counts,
        communities=len(extras.communities),
        chapter_names=extras.chapter_names,
    )
