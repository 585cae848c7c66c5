"""The page `scripts/graph_bench.py` drives: one subgraph of N nodes (a budgeted BFS from a hub of the graph in
KG_DATA_DIR) drawn by the old iframe view (pyvis HTML, `?view=old`) or the live component (`?view=new`).
"Next" draws another hub's subgraph of the same size (new data, the same page)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import app_state  # noqa: E402
from components import graph_live  # noqa: E402
from components.graph_view import GraphMarks, graph_html, render_graph  # noqa: E402
from retrieval.config import Settings  # noqa: E402
from retrieval.embedding import load_embedder  # noqa: E402
from retrieval.graph.runtime import KG, open_kg  # noqa: E402
from retrieval.graph.traverse import bfs  # noqa: E402
from retrieval.models import Subgraph  # noqa: E402

st.set_page_config(page_title="graph bench", layout="wide")


@st.cache_resource
def kg() -> KG:
    cfg = Settings.from_env()
    return open_kg(cfg, embedder=load_embedder(cfg.embed_model))


@st.cache_data(max_entries=32)
def subgraph(n: int, hub: int) -> Subgraph:
    """A BFS of n nodes from the hub-th best-connected entity, at most 2n relations among them."""
    graph = kg()
    degree = np.diff(graph.index.und_csr.indptr)
    start = graph.index.arrays.node_ids[int(np.argsort(-degree, kind="stable")[hub])]
    return bfs(graph.index, start, 6, direction="both", node_budget=n - 1, max_edges=2 * n,
               details=graph.graph).subgraph


view = st.query_params.get("view", "new")
n = int(st.query_params.get("n", "100"))
if "warm" in st.query_params:  # fetch the hubs' subgraphs first, so the timed draws measure the views only
    for h in range(int(st.query_params["warm"])):
        subgraph(n, h)
    st.caption("warm")
    st.stop()
hub = st.session_state.setdefault("hub", 0)
if st.button("Next", key="next"):
    hub = st.session_state["hub"] = hub + 1
sub = subgraph(n, hub)
st.caption(f"hub {hub}: {len(sub.nodes)} nodes, {len(sub.edges)} relations")
if view == "old":
    st.iframe(graph_html(sub, GraphMarks.of(seeds=[sub.nodes[0].id]), max_nodes=n, height=640).html, height="content")
else:
    graph_live.load_library()
    render_graph(sub, GraphMarks.of(seeds=[sub.nodes[0].id]), max_nodes=n, height=640, live=app_state.live_graph(kg()),
                 key="bench")
