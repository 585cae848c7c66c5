"""Paths: explore a neighbourhood step by step, or ask why two entities are connected; export what is shown."""

from __future__ import annotations

from functools import partial

import streamlit as st

import app_state
from components import link_params
from components import paths_view as pv
from components.links import PATH_MODES as MODES
from retrieval.errors import RetrievalError
from ui_text import md_literal

cfg = app_state.settings()
handle = app_state.current_handle(cfg)
st.markdown("### Paths")
if handle is None:
    st.info("No graph yet. Build the demo graph on the **Data** page.", icon=":material/info:")
    st.page_link("pages/data.py", label="Open Data", icon=":material/database:")
    st.stop()

link_params.render([link_params.check(pv.P["mode"])])
mode = st.segmented_control("Mode", list(MODES), format_func=MODES.get, default="explore", required=True,
                            key="mode", bind="query-params", label_visibility="collapsed")
try:
    kg = app_state.open_kg(cfg, handle)
    cat = app_state.entity_catalog(kg)
    live, memory = app_state.live_graph(kg), partial(app_state.memory_store, cfg)
    if mode == "why":
        why = pv.why_controls(kg, cat)
        if why is None:
            st.caption("Pick two entities: their k shortest simple paths are ranked by length, PPR mass and, "
                       "with a question, by how well the relations read like it. Each path cites its sources.")
            st.stop()
        with st.spinner("Finding paths…"):
            result = app_state.ranked_paths(kg, why.a, why.b, why.k, why.hops, why.query, why.relation_types)
            chunks = app_state.chunks(kg, kg.revision, pv.path_chunk_ids(result))
        pv.render_why(memory, partial(app_state.label_store, cfg), live, result, chunks)
        st.page_link("pages/map.py", label="Show on map", icon=":material/map:", query_params={
            "graph": handle.name, "a": cat.label(why.a), "b": cat.label(why.b), "k": str(why.k),
            "hops": str(why.hops), **({"pq": why.query} if why.query else {})})
    else:
        params = pv.explore_controls(kg, cat)
        if params is None:
            st.caption("Pick a start entity: its neighbourhood is drawn within the depth and filters, best-connected "
                       "first, then expand any entity's neighbours step by step (Back/Forward undo and redo).")
            st.stop()
        pv.render_explore(memory, live, cat, params)
        st.page_link("pages/map.py", label="Show on map", icon=":material/map:", query_params={
            "graph": handle.name, "start": cat.label(params.start), "depth": str(params.depth),
            "budget": str(params.budget)})
except RetrievalError as exc:
    st.error(f"Traversal failed: {md_literal(exc)}", icon=":material/error:")
