"""Search: one KG retrieval, shown as subgraph, facts, sources, agent context and trace side by side."""

from __future__ import annotations

import streamlit as st

import app_state
from components.results import cited_chunk_ids, render_overview, render_result, result_key
from components.search_form import render_examples, search_form
from components.text import md_literal
from retrieval.errors import RetrievalError

cfg = app_state.settings()
handle = app_state.current_handle(cfg)

st.markdown("### Search the knowledge graph")
if handle is None:
    st.info("No graph to search yet. Build the demo graph on the **Data** page.", icon=":material/info:")
    st.page_link("pages/data.py", label="Open Data", icon=":material/database:")
    st.stop()

try:
    kg = app_state.open_kg(cfg, handle)
except RetrievalError as exc:
    st.error(f"Cannot open graph **{md_literal(handle.name)}**: {md_literal(exc)}", icon=":material/error:")
    st.stop()

request = search_form()
if not request.query:
    st.caption(
        f"Graph **{md_literal(handle.name)}**. Type a question and press Enter: seeds are matched from the query, "
        "Personalized PageRank walks the graph, and the traced paths are verbalized into facts."
    )
    if handle.name == "demo":
        render_examples(app_state.demo_questions())
    st.markdown("##### What this graph holds")
    render_overview(*app_state.type_counts(kg))
    st.stop()

st.query_params["graph"] = handle.name  # a copied link names the graph it was run on
try:
    with st.spinner("Searching…"):
        result = app_state.run_search(kg, handle.name, handle.version, request.query, request.params_json)
        chunks = app_state.chunks(kg, handle.version, cited_chunk_ids(result))
        agent_md = app_state.agent_markdown(result, handle.name, handle.version, request.query, request.params_json)
except RetrievalError as exc:
    st.error(f"Search failed: {md_literal(exc)}", icon=":material/error:")
    st.stop()

render_result(
    result,
    chunks,
    agent_md,
    key=result_key(handle.version, request.query, request.params_json),
    node_budget=request.node_budget,
)
st.page_link("pages/rerank.py", label="Inspect the reranking of this query", icon=":material/leaderboard:",
             query_params={"q": request.query, "graph": handle.name})
