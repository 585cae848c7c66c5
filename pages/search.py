"""Search: one retrieval (KG or a tool mode) shown as subgraph, facts, sources, context and trace; or two compared."""

from __future__ import annotations

from functools import partial

import streamlit as st
from pydantic import ValidationError

import app_state
from components import link_params
from components.answer_view import render_answer_tab
from components.compare_view import render_compare
from components.graph_data import warm_layout
from components.nomatch_view import render_no_match
from components.results import render_elsewhere, render_overview, render_result
from components.search_form import render_examples, search_form
from retrieval.errors import RetrievalError
from retrieval.models import SearchResult
from retrieval.search.modes import to_text
from ui_text import md_literal, result_key

cfg = app_state.settings()
st.markdown("### Search the knowledge graph")
handle = app_state.page_handle(cfg, "search")

request = search_form()  # drawn before the graph opens: a first view shows the form, not grey skeletons
link_params.render(request.notices)
kg = app_state.page_kg(cfg, handle, warm=warm_layout)
if not request.query:
    st.caption(
        f"Graph **{md_literal(handle.name)}**. Type a question and press Enter: seeds are matched from the query, "
        "Personalized PageRank walks the graph, and the traced paths are verbalized into facts."
    )
    examples = app_state.demo_questions() if handle.name == "demo" else []
    if examples:
        render_examples(examples)
    st.markdown("##### What this graph holds")
    schema = app_state.schema(kg)
    render_overview(*app_state.type_counts(kg), schema)
    question = examples[0] if examples else app_state.sample_question(kg)
    if question:
        render_elsewhere(schema, question=question, data_dir=cfg.data_dir, graph=handle.name)
    st.stop()

graph = handle.name
version = kg.revision  # results are cached per revision: a curation edit shows at once


def run(mode: str) -> SearchResult:
    return app_state.run_mode(kg, graph, version, mode, request.query, limit=request.limit,
                              text_weight=request.text_weight, params_json=request.params_json)


try:
    with st.spinner("Searching…"):
        results = [run(mode) for mode in (request.mode, request.compare) if mode]
except (RetrievalError, ValidationError) as exc:
    st.error(f"Search failed: {md_literal(exc)}", icon=":material/error:")
    st.stop()

labels = partial(app_state.label_store, cfg)  # where grades go: opened when a list is drawn
if len(results) == 2:
    render_compare(*results, labels=labels)
else:
    result = results[0]
    text = to_text(result) if result.mode != "kg" else app_state.agent_markdown(
        result, handle.name, version, request.query, request.params_json)
    key = result_key(version, request.mode, request.query, request.params_json, str(request.limit),
                     str(request.text_weight))
    if result.no_match:
        render_no_match(result, key=key, labels=labels)
    else:
        render_result(result, text, key=key, labels=labels, memory=partial(app_state.memory_store, cfg),
                      node_budget=request.node_budget, live=app_state.live_graph(kg),
                      answer_tab=lambda: render_answer_tab(cfg, kg, result, key=key,
                                                           cross_encoder=partial(app_state.cross_encoder, cfg)))
st.page_link("pages/rerank.py", label="Inspect the reranking of this query", icon=":material/leaderboard:",
             query_params={"inspect": request.query, "graph": handle.name})  # not `q`: Search's own box
st.page_link("pages/map.py", label="Show on map: seeds, PPR mass and paths on the whole graph",
             icon=":material/map:", query_params={"graph": handle.name, "q": request.query,
                                                  "params": request.params_json})
