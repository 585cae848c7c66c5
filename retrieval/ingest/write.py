"""Writing one version's stores: graph rows, the three vector collections (each distinct text embedded once, its
vector taken from the data directory's cache where it is there, `retrieval.stores.vector_cache`) and the BM25 index."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from tqdm import tqdm

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.errors import RetrievalError
from retrieval.graph import bm25
from retrieval.ingest import ProgressFn
from retrieval.models import Chunk, GraphData
from retrieval.stores.base import (
    CHUNKS,
    ENTITIES,
    RELATIONS,
    GraphStore,
    StoreLocation,
    VectorStore,
    open_graph_store,
    open_vector_store,
)
from retrieval.stores.rows import chunk_row, entity_row, entity_text, relation_row, relation_text

EMBED_BATCH = 1024  # texts per embedder call (one progress step)


INSERT_ROWS = 50_000  # rows per vector insert: bounded memory, few flushes


def _groups(n: int, texts: Sequence[str], size: int) -> Iterator[list[int]]:
    # Longest first, so that each model batch pads to similar lengths.
    order = sorted(range(n), key=lambda i: -len(texts[i]))
    for start in range(0, n, size):
        yield order[start : start + size]


def embed_into(
    vectors: VectorStore,
    embedder: Embedder,
    collection: str,
    items: Sequence[Any],
    texts: Sequence[str],
    row: Callable[[Any, str], dict[str, Any]],
    progress: bool,
    seconds: dict[str, float],
    report: ProgressFn | None = None,
) -> None:
    bar = tqdm(total=len(texts), desc=f"embed {collection}", unit="text", disable=not progress, leave=False)
    done = 0
    stage = f"embedding {collection}"
    if report is not None:
        report(stage, 0, len(texts))
    try:
        # Few large inserts: each Milvus insert ends in a flush, and fewer segments also search faster.
        for group in _groups(len(texts), texts, INSERT_ROWS):
            # Each distinct text is embedded once (relations extracted from documents share their sentence).
            slot: dict[str, int] = {}
            for i in group:
                slot.setdefault(texts[i], len(slot))
            distinct = list(slot)
            parts = []
            for start in range(0, len(distinct), EMBED_BATCH):
                batch = distinct[start : start + EMBED_BATCH]
                t = time.perf_counter()
                parts.append(np.asarray(embedder.embed(batch), dtype=np.float32))
                seconds["embed"] = seconds.get("embed", 0.0) + time.perf_counter() - t
                bar.update(len(batch))
                done += len(batch)
                if report is not None:
                    report(stage, done, len(texts))
            bar.update(len(group) - len(distinct))
            done += len(group) - len(distinct)  # repeated texts reuse their vector
            if report is not None:
                report(stage, done, len(texts))
            matrix = np.concatenate(parts)[[slot[texts[i]] for i in group]]
            t = time.perf_counter()
            vectors.insert(collection, [row(items[i], texts[i]) for i in group], matrix)
            seconds["vectors"] = seconds.get("vectors", 0.0) + time.perf_counter() - t
    finally:
        bar.close()


def fill_version(
    settings: Settings,
    data: GraphData,
    location: StoreLocation,
    embedder: Embedder,
    progress: bool,
    seconds: dict[str, float],
    say: ProgressFn,
) -> int:
    """Write graph, vectors and BM25 of one version; returns the vector dimension."""
    graph: GraphStore | None = None
    vectors: VectorStore | None = None
    try:
        t = time.perf_counter()
        say("graph store", 0, 1)
        graph = open_graph_store(settings, location)
        graph.upsert(data)
        say("graph store", 1, 1)
        seconds["graph"] = time.perf_counter() - t

        t = time.perf_counter()
        vectors = open_vector_store(settings, location)
        vectors.ensure(embedder.dim)
        seconds["vectors"] = time.perf_counter() - t
        names = {e.id: e.name for e in data.entities}
        embed_into(vectors, embedder, ENTITIES, data.entities, [entity_text(e) for e in data.entities],
                    entity_row, progress, seconds, say)
        embed_into(vectors, embedder, RELATIONS, data.relations,
                    [relation_text(r, names) for r in data.relations], relation_row, progress, seconds, say)
        chunk_texts = [bm25.chunk_text(c) for c in data.chunks]
        embed_into(vectors, embedder, CHUNKS, data.chunks, chunk_texts, lambda c, _text: chunk_row(c), progress,
                    seconds, say)

        t = time.perf_counter()
        say("BM25 index", 0, 1)
        index = bm25.build_index([c.id for c in data.chunks], chunk_texts)
        bm25.save_index(index, location.dir / "bm25")
        say("BM25 index", 1, 1)
        seconds["bm25"] = time.perf_counter() - t

        t = time.perf_counter()
        say("vector index", 0, 1)
        vectors.wait_ready()  # a server answers from a temporary index until its real one is built
        say("vector index", 1, 1)
        seconds["index"] = time.perf_counter() - t
        return int(embedder.dim)
    finally:
        # Close before the commit renames the directory (and before a discard deletes it).
        for store in (vectors, graph):
            if store is not None:
                store.close()
