"""Graph Memory: tenant-scoped stored graphs; search, open, traverse, export and delete them."""

from __future__ import annotations

import streamlit as st

import app_state
from components import memory_view as mv
from ui_text import md_literal, result_key

cfg = app_state.settings()
memory = app_state.memory_store(cfg)

head, counters = st.columns([3, 2], vertical_alignment="bottom")
head.markdown("### Graph Memory")
head.caption("Subgraphs saved from Paths (and Search), kept per tenant and namespace as JSON files under "
             "the data directory's `memory/`.")
counter_slot = counters.empty()  # filled last, so it counts this run's operations too

scope = mv.scope_picker(memory)
if scope is not None:
    left, right = st.columns([3, 2])
    query = left.text_input("Keywords", key="m-q", placeholder="Search titles, keywords and entity names…",
                            icon=":material/search:")
    tags = right.multiselect("Tags", mv.known_tags(memory, scope), key="m-tags", accept_new_options=True,
                             placeholder="Require tags…")
    found = mv.find_graphs(memory, scope, query, tags)
    if not found.ok:
        st.error(md_literal(found.error or "cannot read graph memory"), icon=":material/error:")
    else:
        picked = mv.render_graph_list(found.graphs, scores=bool(query.strip() or tags), namespaces=not scope.namespace,
                                      key=result_key(scope.tenant, str(scope.namespace), query, *tags))
        graph = mv.open_graph(memory, picked) if picked is not None else None
        if graph is not None:
            kg = app_state.open_kg_or_none(cfg)
            mv.render_stored_graph(memory, graph, app_state.live_graph(kg) if kg is not None else None)

with counter_slot.container():
    mv.render_counters(memory)
with st.expander("Prometheus counters"):
    st.code(memory.metrics_text() or "# no samples yet", language="text")
