"""An opened graph version: its stores, embedder and lazily built in-memory indexes."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.config import Settings
from retrieval.embedding import Embedder, EmbeddingCache, load_embedder
from retrieval.graph import catalog
from retrieval.graph.lock import GraphLock
from retrieval.stores.base import GraphStore, VectorStore, open_graph_store, open_vector_store

if TYPE_CHECKING:
    from retrieval.graph.communities import CommunityIndex
    from retrieval.graph.index import GraphIndex
    from retrieval.graph.layout import Layout, ProgressFn


def lock_path(settings: Settings, name: str) -> Path:
    """The file whose flock orders a graph's readers and its curation writer across processes."""
    return Path(settings.data_dir) / "curation" / f"{name}.lock"


class KG:
    """One committed graph version with open stores. State is real here, hence a class.

    A curation changeset changes the version in place (`retrieval.curation`): `generation` counts them, and
    `revision` (the version, plus the generation once there is one) is what caches of results key on.
    """

    def __init__(self, settings: Settings, handle: catalog.GraphHandle, embedder: Embedder) -> None:
        self.settings = settings
        self.handle = handle
        self.embedder = embedder
        self._lock = threading.RLock()
        self._layout: Layout | None = None
        self._layout_generation = 0
        self.generation = 0
        self.rw = GraphLock(lock_path(settings, handle.name), wait_s=settings.lock_wait_s)

    # Stores open lazily so that one broken back end fails only the operations that need it.
    @cached_property
    def graph(self) -> GraphStore:
        with self._lock:
            return open_graph_store(self.settings, self.handle.location)

    @cached_property
    def vectors(self) -> VectorStore:
        with self._lock:
            return open_vector_store(self.settings, self.handle.location)

    @property
    def version(self) -> str:
        return self.handle.version

    @property
    def name(self) -> str:
        return self.handle.name

    @property
    def revision(self) -> str:
        """The version, plus `+N` after N curation changesets: a cache key that changes with every change."""
        return self.version if not self.generation else f"{self.version}+{self.generation}"

    def reading(self) -> AbstractContextManager[None]:
        """Hold while a search reads the graph: a changeset waits, so the search sees it before or after."""
        return self.rw.reading()

    def install(self, generation: int, *, index: GraphIndex | None = None, bm25: Any = None,
                communities: CommunityIndex | None = None, drop: tuple[str, ...] = ()) -> None:
        """Swap in the in-memory state after a change (the caller holds `rw.writing()`); `drop` forgets lazily
        built parts (`index`, `bm25`, `communities`) so their next use builds them from the stores."""
        with self._lock:
            for name, value in (("index", index), ("bm25", bm25), ("communities", communities)):
                if value is not None:
                    self.__dict__[name] = value
            for name in drop:
                self.__dict__.pop(name, None)
            self.generation = generation

    @cached_property
    def index(self) -> GraphIndex:
        """CSR adjacency, names and chunk incidence, built once per version from the edge export."""
        from retrieval.graph.index import build_index

        with self._lock:
            return build_index(self.graph.export_edges())

    @cached_property
    def bm25(self) -> Any:
        """The BM25 index over chunks that ingest stored with this version."""
        from retrieval.graph.bm25 import load_version

        with self._lock:
            return load_version(self.handle.dir)

    @cached_property
    def communities(self) -> CommunityIndex:
        """Communities, claims and chapter names this version keeps in its sidecar (`retrieval.graph.communities`)."""
        from retrieval.graph.communities import CommunityIndex, load_extras

        with self._lock:
            return CommunityIndex.of(load_extras(self.handle.dir))

    def layout(self, progress: ProgressFn | None = None) -> Layout:
        """Where every entity sits on the map (`retrieval.graph.layout`): stored with the version at ingest; a
        version built before that gets it computed on first use (`progress` hears it) and stored."""
        from retrieval.graph.layout import layout_for

        with self._lock:
            if self._layout is None or self._layout_generation != self.generation:
                arrays = self.index.arrays  # a curation changed the graph: the layout follows (`layout.cover`)
                self._layout = layout_for(self.handle.dir, arrays.node_ids, arrays.src, arrays.dst, arrays.weight,
                                          self.communities.communities, progress, base=self._layout)
                self._layout_generation = self.generation
            return self._layout

    def stored_layout(self) -> Layout | None:
        """The map layout if it is at hand (opened or stored) without computing it: views that only reuse it."""
        from retrieval.graph.layout import LAYOUT_FILE

        if self._layout is None and not (self.handle.dir / LAYOUT_FILE).is_file():
            return None
        return self.layout()

    def close(self) -> None:
        for name in ("graph", "vectors"):
            store = self.__dict__.pop(name, None)
            if store is not None:
                store.close()


def open_kg(settings: Settings, name: str | None = None, embedder: Embedder | None = None) -> KG:
    """Open graph `name` (default: settings.graph_name, then the active graph)."""
    handle = catalog.resolve(settings.data_dir, name or settings.graph_name or None)
    return KG(settings, handle, embedder or load_embedder(settings.embed_model))


def embedding_cache(kg: KG) -> EmbeddingCache:
    """The text -> vector LRU of this graph version (queries, names and fact texts are embedded once)."""
    return kg.index.cached("embedding_cache", lambda: EmbeddingCache(kg.embedder))
