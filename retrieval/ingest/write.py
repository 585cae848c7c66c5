"""Writing one version's stores: graph rows, the three vector collections (each distinct text embedded once)
and the BM25 index."""

from __future__ import annotations

import hashlib
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


READ_BATCH = 1_000  # ids per payload read of the previous version


class ReusingEmbedder:
    """An embedder that takes the vector of a text the live version of the same graph already holds (same
    embedding model, text matched by its sha256), and embeds only the others: a re-import of a slightly changed
    graph costs its changed texts. State (the previous version's hash table, counts) is real, hence a class."""

    def __init__(self, embedder: Embedder, graph: GraphStore, vectors: VectorStore, chunk_ids: Sequence[str]) -> None:
        self.embedder = embedder
        self.name, self.dim = embedder.name, embedder.dim
        self._graph, self._vectors, self._chunk_ids = graph, vectors, chunk_ids
        self._table: dict[bytes, tuple[str, str]] | None = None
        self.reused = 0
        self.embedded = 0
        self.problem = ""  # why the previous version's vectors could not be reused (a lost or broken store)

    @staticmethod
    def _hash(text: str) -> bytes:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()

    def _build(self) -> dict[bytes, tuple[str, str]]:
        """sha256(text) -> (collection, id) over every row of the previous version (payloads read in batches)."""
        arrays = self._graph.export_edges()
        table: dict[bytes, tuple[str, str]] = {}
        for collection, ids in ((ENTITIES, arrays.node_ids), (RELATIONS, arrays.relation_ids),
                                (CHUNKS, list(self._chunk_ids))):
            for start in range(0, len(ids), READ_BATCH):
                for row in self._vectors.get(collection, list(ids[start:start + READ_BATCH])):
                    text = row["text"] if collection != CHUNKS else bm25.chunk_text(
                        Chunk(**{k: v for k, v in row.items() if k in Chunk.model_fields}))
                    table.setdefault(self._hash(str(text)), (collection, str(row["id"])))
        return table

    def _give_up(self, exc: RetrievalError) -> None:
        """The previous version cannot be read (its store lost or broken): embed every text from now on, and say
        so; reuse is an optimisation, never a reason for a rebuild to fail."""
        self._table = {}
        self.problem = f"the previous version's vectors could not be read ({exc}): every text was embedded"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._table is None:
            try:
                self._table = self._build()
            except RetrievalError as exc:
                self._give_up(exc)
        table = self._table or {}
        found = {i: table[h] for i, h in enumerate(map(self._hash, texts)) if h in table}
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        by_collection: dict[str, list[int]] = {}
        for i, (collection, _) in found.items():
            by_collection.setdefault(collection, []).append(i)
        for collection, rows in by_collection.items():
            try:
                vecs = self._vectors.vectors(collection, [found[i][1] for i in rows])
            except RetrievalError as exc:
                self._give_up(exc)
                for i in rows:
                    found.pop(i)
                continue
            for i, v in zip(rows, vecs, strict=True):
                if v.any():
                    out[i] = v
                else:
                    found.pop(i)
        todo = [i for i in range(len(texts)) if i not in found]
        if todo:
            out[todo] = np.asarray(self.embedder.embed([texts[i] for i in todo]), dtype=np.float32)
        self.reused += len(found)
        self.embedded += len(todo)
        return out

    def close(self) -> None:
        for store in (self._vectors, self._graph):
            store.close()


def reusing_embedder(settings: Settings, live: Any, embedder: Embedder) -> tuple[Embedder, str]:
    """`embedder` wrapped to reuse the vectors of the live version `live` (a catalog.GraphHandle, or None), and
    why not where it cannot (another embedding model, a version it cannot open): then every text is embedded."""
    if live is None:
        return embedder, ""
    if live.manifest.get("embed_model") != embedder.name or int(live.manifest.get("dim", -1)) != embedder.dim:
        return embedder, "the previous version was embedded by another model: every text is embedded again"
    graph = vectors = None
    try:
        graph = open_graph_store(settings, live.location)
        vectors = open_vector_store(settings, live.location)
        chunk_ids = bm25.load_version(live.dir).chunk_ids
    except RetrievalError as exc:
        for store in (vectors, graph):
            if store is not None:
                store.close()
        return embedder, f"the vectors of version {live.version} could not be read ({exc}): every text is embedded"
    return ReusingEmbedder(embedder, graph, vectors, chunk_ids), ""
