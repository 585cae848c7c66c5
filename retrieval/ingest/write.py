"""Writing one version's stores: graph rows, the three vector collections (each distinct text embedded once, its
vector taken from the data directory's cache where it is there, `retrieval.stores.vector_cache`) and the BM25 index."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.graph import bm25
from retrieval.ingest import ProgressFn
from retrieval.models import GraphData
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

EMBED_BATCH = 256  # texts per embedder call: how soon a cancelled build's embedding stops


INSERT_ROWS = 50_000  # rows per vector insert: bounded memory, few flushes


def _groups(n: int, texts: Sequence[str], size: int) -> Iterator[list[int]]:
    # Longest first, so that each model batch pads to similar lengths.
    order = sorted(range(n), key=lambda i: -len(texts[i]))
    for start in range(0, n, size):
        yield order[start : start + size]


@dataclass(frozen=True)
class Embedded:
    """One group of a collection's rows with their vectors, ready to insert."""

    collection: str
    rows: list[int]  # indexes into the collection's items
    matrix: np.ndarray


class EmbeddingThread(threading.Thread):
    """Embeds the collections' texts, in order, in a thread of its own while the build's thread does the rest
    (communities, layout, graph store, vector inserts): ONNX Runtime releases the GIL while it computes.

    The build's thread takes the groups through `take`, which also reports progress (the app's callbacks must run
    in the thread that runs the page) and raises the thread's error. `cancel` stops it between batches. State
    (a queue, counts, a stop flag) is real, hence a class."""

    def __init__(self, embedder: Embedder, jobs: Sequence[tuple[str, Sequence[str]]]) -> None:
        super().__init__(name="kg-embed", daemon=True)
        self.embedder = embedder
        self.jobs = [(collection, list(texts)) for collection, texts in jobs]
        self.done = dict.fromkeys((collection for collection, _ in self.jobs), 0)  # texts done per collection
        self.seconds = 0.0  # in embedder calls
        self.error: BaseException | None = None
        self._queue: queue.Queue[Embedded | None] = queue.Queue(maxsize=2)
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            for collection, texts in self.jobs:
                for group in _groups(len(texts), texts, INSERT_ROWS):
                    # Each distinct text is embedded once (relations extracted from documents share their sentence).
                    slot: dict[str, int] = {}
                    for i in group:
                        slot.setdefault(texts[i], len(slot))
                    distinct = list(slot)
                    parts = [np.zeros((0, self.embedder.dim), dtype=np.float32)]
                    for start in range(0, len(distinct), EMBED_BATCH):
                        if self._halt.is_set():
                            return
                        t = time.perf_counter()
                        parts.append(np.asarray(self.embedder.embed(distinct[start:start + EMBED_BATCH]),
                                                dtype=np.float32))
                        self.seconds += time.perf_counter() - t
                        self.done[collection] += len(parts[-1])
                    self.done[collection] += len(group) - len(distinct)  # repeated texts reuse their vector
                    self._put(Embedded(collection, group, np.concatenate(parts)[[slot[texts[i]] for i in group]]))
        except BaseException as exc:  # handed to the build's thread by `take`
            self.error = exc
        finally:
            self._put(None)

    def _put(self, item: Embedded | None) -> None:
        while not self._halt.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def take(self, say: ProgressFn, every: float = 0.5) -> Iterator[Embedded]:
        """The embedded groups in order, reporting `embedding COLLECTION` progress at least every `every` s."""
        reported: set[str] = set()  # collections reported complete

        def report() -> None:
            for collection, texts in self.jobs:
                if collection in reported:
                    continue
                done = min(self.done[collection], len(texts))
                say(f"embedding {collection}", done, len(texts))
                if done < len(texts):
                    return
                reported.add(collection)

        report()
        while True:
            try:
                item = self._queue.get(timeout=every)
            except queue.Empty:
                report()
                continue
            if item is None:
                if self.error is not None:
                    raise self.error
                report()
                return
            report()
            yield item

    def cancel(self) -> None:
        """Stop after the batch in hand and wait for the thread (a build that failed or was cancelled)."""
        self._halt.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=60)


def embedding_jobs(data: GraphData) -> list[tuple[str, list[str]]]:
    """(collection, texts) in the order the build writes them: entities, relations, chunks."""
    names = {e.id: e.name for e in data.entities}
    return [(ENTITIES, [entity_text(e) for e in data.entities]),
            (RELATIONS, [relation_text(r, names) for r in data.relations]),
            (CHUNKS, [bm25.chunk_text(c) for c in data.chunks])]


def fill_version(
    settings: Settings,
    data: GraphData,
    location: StoreLocation,
    embedding: EmbeddingThread,
    seconds: dict[str, float],
    say: ProgressFn,
) -> int:
    """Write graph, vectors and BM25 of one version, the vectors as `embedding` hands them over; returns the
    vector dimension."""
    graph: GraphStore | None = None
    vectors: VectorStore | None = None
    dim = int(embedding.embedder.dim)
    try:
        t = time.perf_counter()
        say("graph store", 0, 1)
        graph = open_graph_store(settings, location)
        graph.upsert(data)
        say("graph store", 1, 1)
        seconds["graph"] = time.perf_counter() - t

        t = time.perf_counter()
        vectors = open_vector_store(settings, location)
        vectors.ensure(dim)
        items = {ENTITIES: data.entities, RELATIONS: data.relations, CHUNKS: data.chunks}
        texts = dict(embedding.jobs)
        rows: dict[str, Callable[[Any, str], dict[str, Any]]] = {
            ENTITIES: entity_row, RELATIONS: relation_row, CHUNKS: lambda c, _text: chunk_row(c)}
        for part in embedding.take(say):  # waits for the embedding thread where it is behind
            # Few large inserts: each Milvus insert ends in a flush, and fewer segments also search faster.
            got, text = items[part.collection], texts[part.collection]
            w = time.perf_counter()
            vectors.insert(part.collection, [rows[part.collection](got[i], text[i]) for i in part.rows], part.matrix)
            seconds["inserts"] = seconds.get("inserts", 0.0) + time.perf_counter() - w
        seconds["vectors"] = time.perf_counter() - t - seconds.get("inserts", 0.0)  # opening + waiting for vectors
        seconds["embed"] = embedding.seconds

        t = time.perf_counter()
        say("BM25 index", 0, 1)
        index = bm25.build_index([c.id for c in data.chunks], texts[CHUNKS])
        bm25.save_index(index, location.dir / "bm25")
        say("BM25 index", 1, 1)
        seconds["bm25"] = time.perf_counter() - t

        t = time.perf_counter()
        say("vector index", 0, 1)
        vectors.wait_ready()  # a server answers from a temporary index until its real one is built
        say("vector index", 1, 1)
        seconds["index"] = time.perf_counter() - t
        return dim
    finally:
        # Close before the commit renames the directory (and before a discard deletes it).
        for store in (vectors, graph):
            if store is not None:
                store.close()
