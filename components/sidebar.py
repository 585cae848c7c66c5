"""Sidebar: the active graph (name, version, counts), back ends in use and live capabilities."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import streamlit as st

from components.annotator import annotator_box
from retrieval.config import Settings
from retrieval.graph.catalog import GraphHandle
from ui_records import Capability, Signed
from ui_text import md_code, md_literal

BACKEND_NAMES = {"kuzu": "Kuzu (embedded)", "falkordb": "FalkorDB", "milvus": "Milvus"}
_COLORS = {"live": "green", "loading": "blue", "off": "gray"}
_ICONS = {"live": ":material/check_circle:", "loading": ":material/hourglass_top:", "off": ":material/block:"}


PICKER = "graph-picker"


def backend_lines(cfg: Settings, manifest: dict[str, Any] | None = None) -> list[str]:
    manifest = manifest or {}
    graph = manifest.get("graph_backend") or cfg.graph_backend
    vectors = manifest.get("vector_backend") or cfg.vector_backend
    vec_name = BACKEND_NAMES.get(vectors, vectors)
    if vectors == "milvus":
        vec_name = "Milvus server" if cfg.milvus_uri.startswith(("http", "tcp")) else "Milvus Lite"
    embed = manifest.get("embed_model") or cfg.embed_model or "all-MiniLM-L6-v2"
    return [f"graph · {BACKEND_NAMES.get(graph, graph)}", f"vectors · {vec_name}", f"embedder · {embed}"]


def render_capabilities(read: Callable[[], Sequence[Capability]]) -> None:
    """Capability badges; while one is still loading they redraw every 2 s (a fragment), so "loading…" turns into
    the outcome without waiting for the analyst's next click."""
    loading = any(cap.state == "loading" for cap in read())

    @st.fragment(run_every=2.0 if loading else None)
    def badges() -> None:
        for cap in read():
            st.badge(
                f"{cap.name}: {cap.word}",
                color=_COLORS[cap.state],  # type: ignore[arg-type]
                icon=_ICONS[cap.state],
                help=cap.detail or None,
            )

    badges()


def render_graph_picker(graphs: Mapping[str, Mapping[str, int]], current: str | None,
                        on_pick: Callable[[str], None]) -> None:
    """Every graph of the data directory with its counts, the one in use checked: one click switches this session
    to another (the page's URL then names it); the Data page's "Make active" sets the default for new sessions."""
    names = list(graphs)
    if current in names and st.session_state.get(PICKER) != current:
        st.session_state[PICKER] = current  # the graph in use changed by a link: the picker follows it
    st.radio("Graph", names, key=PICKER, label_visibility="collapsed",
             captions=[" · ".join(f"{graphs[n][k]:,} {k}" for k in ("entities", "relations") if k in graphs[n])
                       for n in names],
             on_change=lambda: on_pick(str(st.session_state[PICKER])))


def render_sidebar(
    cfg: Settings, handle: GraphHandle | None, capabilities: Callable[[], Sequence[Capability]], data_page: Any,
    graphs: Mapping[str, Mapping[str, int]], on_pick: Callable[[str], None],
    who: Signed | None = None, sign_out: Callable[[], None] | None = None,
) -> None:
    """Graph identity first (what am I looking at, and the others to switch to), then the stack, then the optional
    capabilities, then who grades (team mode: `who`, the signed-in user)."""
    with st.sidebar:
        st.markdown("#### Graph")
        if handle is None:
            st.warning("No graph in the data directory yet.", icon=":material/info:")
            st.page_link(data_page, label="Data → Build demo graph", icon=":material/construction:")
        else:
            render_graph_picker(graphs, handle.name, on_pick)
            counts = handle.counts
            detail = " · ".join(f"{counts[k]:,} {k}" for k in ("chunks", "books", "chapters") if k in counts)
            st.caption(f"**{md_literal(handle.name)}** · version {md_code(handle.version)}" +
                       (f"  \n{detail}" if detail else ""))
        st.markdown("#### Back ends")
        st.caption("  \n".join(md_literal(x) for x in backend_lines(cfg, handle.manifest if handle else None)))
        st.markdown("#### Capabilities")
        render_capabilities(capabilities)
        st.caption(f"data dir {md_code(cfg.data_dir)}")
    annotator_box(who, sign_out)
