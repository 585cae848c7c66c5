"""An opened graph version: its stores, embedder and lazily built in-memory indexes."""

from __future__ import annotations

import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any

from retrieval.config import Settings
from retrieval.embedding import Embedder, EmbeddingCache, load_embedder
from retrieval.graph import catalog
from retrieval.stores.base import GraphStore, VectorStore, open_graph_store, open_vector_store

if TYPE_CHECKING:
    from retrieval.graph.communities import CommunityIndex
    from retrieval.graph.index import GraphIndex
    from retrieval.graph.layout import Layout, ProgressFn


class KG:
    """One committed graph version with open stores. State is real here, hence a class."""

    def __init__(self, settings: Settings, handle: catalog.GraphHandle, embedder: Embedder) -> None:
        self.settings = settings
        self.handle = handle
        self.embedder = embedder
        self._lock = threading.RLock()
        self._layout: Layout | None = None

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

    @cached_property
    def index(self) -> GraphIndex:
        """CSR adjacency, names and chunk incidence, built once per version from the edge export."""
        from retrieval.graph.index import build_index

        with self._lock:
            return build_index(self.graph.export_edges())

    @cached_property
    def bm25(self) -> Any:
        """The BM25 index over chunks that ingest stored with this version."""
        from retrieval.graph.bm25 import load_index

        with self._lock:
            return load_index(self.handle.dir / "bm25")

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
            if self._layout is None:
                arrays = self.index.arrays
                self._layout = layout_for(self.handle.dir, arrays.node_ids, arrays.src, arrays.dst, arrays.weight,
                                          self.communities.communities, progress)
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
