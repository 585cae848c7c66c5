"""The app's shared state: Settings once per session, cached stores/models keyed on the graph version."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import streamlit as st

from retrieval.config import Settings
from retrieval.embedding import Embedder, load_embedder
from retrieval.errors import NotFoundError
from retrieval.graph import catalog
from retrieval.graph.runtime import KG
from retrieval.models import Chunk, GraphStats, SearchParams, SearchResult, Subgraph
from retrieval.stores.base import CHUNKS
from ui_text import md_code, md_literal

if TYPE_CHECKING:
    from retrieval.rerank.cross_encoder import CrossEncoderReranker


def settings() -> Settings:
    """Settings built once per session from the environment (KG_* variables)."""
    if "settings" not in st.session_state:
        st.session_state["settings"] = Settings.from_env()
    return st.session_state["settings"]


def graph_names(cfg: Settings) -> list[str]:
    return catalog.list_graphs(cfg.data_dir)


def chosen_graph(cfg: Settings) -> str | None:
    """`?graph=NAME` in the URL (so a copied link names its graph), else KG_GRAPH, else the active graph."""
    names = graph_names(cfg)
    wanted = st.query_params.get("graph")
    if wanted in names:
        return wanted
    if cfg.graph_name in names:
        return cfg.graph_name
    return catalog.active_name(cfg.data_dir)


def graph_notice(cfg: Settings) -> str:
    """Why `?graph=NAME` in the link cannot be used (no such graph here) and which graph is shown, or ''."""
    wanted = st.query_params.get("graph")
    names = graph_names(cfg)
    if wanted is None or wanted in names:
        return ""
    name = chosen_graph(cfg)
    shown = f"graph **{md_literal(name)}** is shown" if name else "no graph is open"
    have = ", ".join(md_literal(n) for n in names) or "none"
    return f"{md_code(f'graph={wanted}')} in the link names no graph in this data directory ({have}): {shown}."


def current_handle(cfg: Settings) -> catalog.GraphHandle | None:
    """The committed version of the chosen graph, resolved on every run (one small JSON read)."""
    name = chosen_graph(cfg)
    if not name:
        return None
    try:
        return catalog.resolve(cfg.data_dir, name)
    except NotFoundError:
        return None  # swapped away between listing and reading: the next run sees the new state


@st.cache_resource(show_spinner="Loading the embedding model…")
def embedder(model: str) -> Embedder:
    """One embedder per model name for the whole server."""
    return load_embedder(model)


def _close(kg: KG) -> None:
    kg.close()


@st.cache_resource(max_entries=4, on_release=_close, show_spinner="Opening the graph…")
def _open_kg(_cfg: Settings, data_dir: str, name: str, version: str, backends: tuple[str, str]) -> KG:
    handle = catalog.resolve(Path(data_dir), name)
    if handle.version != version:  # re-ingested between resolve and open: open exactly what was asked
        raise NotFoundError(f"graph {name!r} moved from version {version} to {handle.version}; reload the page")
    kg = KG(_cfg, handle, embedder(_cfg.embed_model))
    warm_up(kg)
    return kg


def sample_question(kg: KG) -> str | None:
    """A relationship question between two of the graph's entities (None for an empty graph)."""
    names = kg.index.arrays.node_names
    return f"How does {names[0][:200]} relate to {names[-1][:200]}?" if names else None


def warm_up(kg: KG) -> None:
    """Pay the one-off costs on open, not in the analyst's first search: CSR index, BM25, name matcher,
    collection loads and first inference, by running one relationship query between two of its entities,
    then reading its chunks and laying out its graph once (igraph's first call is slower)."""
    from components.graph_data import GraphMarks, Legend, drawing
    from retrieval.search.retriever import search

    _ = kg.bm25
    question = sample_question(kg)
    if question:
        result = search(kg, question, SearchParams.model_validate({}))
        kg.vectors.get(CHUNKS, [c for f in result.facts[:3] for c in f.chunk_ids])
        drawing(result.subgraph, GraphMarks(), max_nodes=120, legend=Legend())  # layout code warm


def open_kg(cfg: Settings, handle: catalog.GraphHandle) -> KG:
    """The opened KG for this graph version; a re-ingest changes the version, hence a fresh open."""
    return _open_kg(cfg, str(cfg.data_dir), handle.name, handle.version, (cfg.graph_backend, cfg.vector_backend))


def page_graph(cfg: Settings, to_do: str) -> tuple[catalog.GraphHandle, KG]:
    """The chosen graph, opened; otherwise the page says why (no graph yet: to the Data page) and stops."""
    from retrieval.errors import RetrievalError

    handle = current_handle(cfg)
    if handle is None:
        st.info(f"No graph to {to_do} yet. Build the demo graph on the **Data** page.", icon=":material/info:")
        st.page_link("pages/data.py", label="Open Data", icon=":material/database:")
        st.stop()
    try:
        return handle, open_kg(cfg, handle)
    except RetrievalError as exc:
        st.error(f"Cannot open graph **{md_literal(handle.name)}**: {md_literal(exc)}", icon=":material/error:")
        st.stop()
    raise AssertionError("st.stop() ends the run")


def open_kg_or_none(cfg: Settings) -> KG | None:
    """The chosen graph opened, or None when there is none or it cannot open (the sidebar says why)."""
    from retrieval.errors import RetrievalError

    handle = current_handle(cfg)
    try:
        return open_kg(cfg, handle) if handle is not None else None
    except RetrievalError:
        return None


def run_mode(
    kg: KG, graph: str, version: str, mode: str, query: str, *, limit: int, text_weight: float, params_json: str
) -> SearchResult:
    """One search in any `retrieval.search.modes` mode, cached on (graph, version, mode, query, the parameters it
    uses): KG takes the search parameters; the tools take `limit`, and hybrid also `text_weight`."""
    kg_mode = mode == "kg"
    return _run_mode(kg, graph, version, mode, query, None if kg_mode else limit,
                     text_weight if mode == "hybrid" else None, params_json if kg_mode else None)


@st.cache_data(max_entries=256, show_spinner=False)
def _run_mode(_kg: KG, graph: str, version: str, mode: str, query: str, limit: int | None,
              text_weight: float | None, params_json: str | None) -> SearchResult:
    from retrieval.search import modes

    params = SearchParams.model_validate_json(params_json) if params_json is not None else None
    tool = {"limit": limit, "text_weight": text_weight}  # None: this mode does not use it
    return modes.run_mode(_kg, mode, query, params=params, **{k: v for k, v in tool.items() if v is not None})


@st.cache_data(max_entries=256, show_spinner=False)
def agent_markdown(_result: SearchResult, graph: str, version: str, query: str, params_json: str) -> str:
    """The Markdown the agent tool returns for this result."""
    from retrieval.search.verbalize import to_markdown

    return to_markdown(_result)


@st.cache_data(max_entries=256, show_spinner=False)
def chunks(_kg: KG, version: str, ids: tuple[str, ...]) -> dict[str, Chunk]:
    """Chunk records (text, book, chapter) by id, read from the DocumentChunks collection."""
    from retrieval.explore.details import read_chunks

    return read_chunks(_kg.vectors, ids)


# --- optional capabilities --------------------------------------------------------------------


@dataclass(frozen=True)
class Capability:
    """A badge: live (green), pending (loading) or off with a one-word reason and the full detail."""

    name: str
    state: Literal["live", "loading", "off"]
    word: str
    detail: str = ""


class _Probe:
    """Loads the cross-encoder in a background thread: a hub fetch can take a minute to fail offline."""

    def __init__(self, model: str) -> None:
        from retrieval.rerank.cross_encoder import CrossEncoderReranker

        self.reranker = CrossEncoderReranker(model)
        self.done = threading.Event()
        self.started = time.monotonic()
        threading.Thread(target=self._run, name=f"probe-{model}", daemon=True).start()

    def _run(self) -> None:
        try:
            _ = self.reranker.available
        finally:
            self.done.set()


@st.cache_resource(show_spinner=False)
def _cross_encoder_probe(model: str) -> _Probe:
    return _Probe(model)


def cross_encoder(cfg: Settings) -> CrossEncoderReranker:
    """The shared CrossEncoderReranker (loading may still be in progress; check cross_encoder_status)."""
    return _cross_encoder_probe(cfg.cross_encoder_model).reranker


def _why(reason: str) -> str:
    """The badge's word for a `retrieval.rerank.cross_encoder.unavailable` sentence."""
    low = reason.lower()
    if "offline" in low or "could not be reached" in low:
        return "offline"
    if "no such file" in low or "no model by that name" in low:
        return "model not found"
    return "failed to load"


# An offline miss is told in milliseconds: the first status read waits up to this long rather than draw "loading…"
# (later reads never wait; the sidebar redraws its badges until a real load settles).
PROBE_WAIT_S = 1.0


def cross_encoder_status(cfg: Settings) -> Capability:
    probe = _cross_encoder_probe(cfg.cross_encoder_model)
    if not probe.done.wait(max(0.0, probe.started + PROBE_WAIT_S - time.monotonic())):
        return Capability("Cross-encoder", "loading", "loading…", cfg.cross_encoder_model)
    if probe.reranker.available:
        return Capability("Cross-encoder", "live", "loaded", cfg.cross_encoder_model)
    return Capability("Cross-encoder", "off", _why(probe.reranker.reason), probe.reranker.reason)


def gemini_status(cfg: Settings) -> Capability:
    if cfg.gemini_enabled:
        return Capability("Gemini", "live", cfg.gemini_model, "GEMINI_API_KEY is set")
    return Capability("Gemini", "off", "no key", "set GEMINI_API_KEY to enable LLM decomposition and reranking")


@st.cache_data(max_entries=32, show_spinner=False)
def _graph_stats(_kg: KG, name: str, version: str) -> GraphStats:
    from retrieval.ingest.build import graph_stats

    return graph_stats(_kg.handle, _kg.graph, _kg.vectors)


def graph_stats(kg: KG) -> GraphStats:
    """Counts read from the open stores, once per graph version."""
    return _graph_stats(kg, kg.name, kg.version)


@st.cache_data(show_spinner=False)
def demo_questions(limit: int = 4) -> list[str]:
    """The multi-hop questions shipped with the demo bundle (data/demo/questions.json)."""
    from retrieval.config import DEMO_DIR

    path = DEMO_DIR / "questions.json"
    if not path.is_file():
        return []
    rows = json.loads(path.read_text(encoding="utf-8"))
    return [r["question"] for r in rows if r.get("kind") == "multi-hop"][:limit]


@st.cache_data(max_entries=32, show_spinner=False)
def _type_counts(_kg: KG, name: str, version: str) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    arrays = _kg.index.arrays
    return Counter(arrays.node_types).most_common(), Counter(arrays.relation_types).most_common()


def type_counts(kg: KG) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(entity type, count) and (relation type, count), most frequent first, from the in-memory index."""
    return _type_counts(kg, kg.name, kg.version)


@st.cache_data(max_entries=32, show_spinner=False)
def _schema(_kg: KG, name: str, version: str) -> Subgraph:
    from retrieval.graph.index import schema

    return schema(_kg.index)


def schema(kg: KG) -> Subgraph:
    """The graph's schema (entity types joined by their relation types), from the in-memory index."""
    return _schema(kg, kg.name, kg.version)
