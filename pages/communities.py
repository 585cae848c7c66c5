"""Communities: GraphRAG's communities with their reports, or those computed at ingest, by level and rank; one opens
beside its subgraph; `?entity=ID` lists the communities and claims of an entity."""

from __future__ import annotations

import streamlit as st

import app_state
from components import communities_view as cv
from retrieval.errors import RetrievalError
from ui_text import md_literal

cfg = app_state.settings()
st.markdown("### Communities")
handle, kg = app_state.page_graph(cfg, "explore")
try:
    index = kg.communities
    focus = cv.render_entity(kg, index)
    if not index.communities:
        st.info("This graph has no communities (it has no relations between its entities).", icon=":material/info:")
        st.stop()
    source = "GraphRAG's, with their reports" if index.communities[0].source == "graphrag" else \
        "computed at ingest (Leiden), described from their own counts"
    st.caption(f"{len(index.communities)} communities, {source}. Pick one to read it beside its subgraph.")
    level = cv.level_picker(index)
    picked = cv.community_list(index, level)
    if picked is None:  # the page's room is not left empty: the top-ranked community opens until one is picked
        picked = index.ranked(level)[0] if index.ranked(level) else None
        st.caption("The top-ranked community is open below; pick a row to read another.")
    if picked is not None:
        cv.render_community(app_state.live_graph(kg), index, picked, focus)
    cv.render_unattached(index)
except RetrievalError as exc:
    st.error(f"Cannot read the communities: {md_literal(exc)}", icon=":material/error:")
