"""Query: a read-only Cypher console over the current graph, with its results as a table and as a graph."""

from __future__ import annotations

import streamlit as st

import app_state
from components.query_console import render_console
from retrieval.explore.console import MAX_ROWS, TIMEOUT_MS
from ui_text import md_literal

cfg = app_state.settings()
st.markdown("### Query the graph")
handle, kg = app_state.page_graph(cfg, "query")

engine = "Kuzu, opened read-only for each query" if cfg.graph_backend == "kuzu" else "FalkorDB, through GRAPH.RO_QUERY"
st.caption(f"Cypher on graph **{md_literal(handle.name)}** ({engine}): a write is refused by the engine. Each query "
           f"stops after {TIMEOUT_MS / 1000:g} s and shows at most {MAX_ROWS:,} rows.")
render_console(cfg, app_state.live_graph(kg), handle, app_state.gate(cfg).permit("console", graph=handle.name))
