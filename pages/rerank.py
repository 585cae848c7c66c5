"""Rerank Inspector: one retrieved pool, every reranker's order and scores, what-if knobs, grades and metrics."""

from __future__ import annotations

from functools import partial

import streamlit as st

import app_state
from components import rerank_view as view
from components.annotator import grading_target
from retrieval.errors import RetrievalError
from retrieval.evaluation.consensus import shown_labels
from retrieval.evaluation.evaluate import evaluate
from retrieval.evaluation.inspect import apply_rerankers, pool_order
from ui_text import md_literal, result_key

cfg = app_state.settings()
handle = app_state.current_handle(cfg)
st.markdown("### Rerank Inspector")
if handle is None:
    st.info("No graph yet. Build the demo graph on the **Data** page.", icon=":material/info:")
    st.stop()
view.take_carried_query()
req = view.inspector_form(app_state.demo_questions() if handle.name == "demo" else [])
if not req.query:
    st.stop()
knobs = view.what_if(req.kind)
try:
    kg = app_state.open_kg(cfg, handle)
    with st.spinner("Retrieving the candidate pool…"):
        pool = app_state.pool(kg, req.query, req.kind, req.size)
except RetrievalError as exc:
    st.error(f"Retrieval failed: {md_literal(exc)}", icon=":material/error:")
    st.stop()

chosen = app_state.rerankers(cfg, kg, knobs.alpha, knobs.lambda_)
inspection = apply_rerankers(pool.query, pool_order(pool, knobs.text_weight), chosen.rerankers).in_order(
    [c.id for c in pool.candidates]  # rows and #positions stay in retrieval order while the knobs move
)
reranks = st.session_state["reranks"] = st.session_state.get("reranks", 0) + 1
st.caption(view.trace_line(app_state.retrievals(kg, req.query, req.kind, req.size), reranks, pool, inspection))
view.render_notes(chosen.notes, inspection, pool)

follow = partial(app_state.follow, kg)  # grades follow the graph: a merged entity's grade counts for the one kept
grader = grading_target(partial(app_state.label_store, cfg), kg.version, required=True, follow=follow)
key = result_key(kg.revision, req.kind, pool.query)
view.apply_grades(inspection, grader, key)  # before this run's metrics read the labels
graded = view.labels_of_kind(grader.store.all_labels(kg.version), req.kind)
all_labels = follow(graded)
mine = shown_labels(follow(view.labels_of_kind(grader.store.get_labels(pool.query, kg.version), req.kind)),
                    grader.annotator or "")
st.caption(md_literal(app_state.gone_grades(kg, graded)))
chart, metrics = st.columns([3, 2], gap="large")
with chart.container(height=view.PANEL_HEIGHT, border=False):
    view.render_bump(inspection, mine, knobs.k)
with metrics.container(height=view.PANEL_HEIGHT, border=False):
    view.render_metrics(evaluate(list(mine.values()), inspection.runs(), (knobs.k,)), "This query", "m-this",
                        "Grade candidates 0–3 below; a grade of 1 or more makes this query scorable.")
view.render_candidates(inspection, grader, mine, key="grid-" + key, none_rank=req.kind == "chunks")

st.markdown(f"#### All labelled queries · {req.kind} pool")
report, runs = app_state.evaluate_labelled(kg, inspection, all_labels, chosen.rerankers, req.kind, req.size,
                                           knobs.text_weight, knobs.k, view.compare_choice(list(chosen.rerankers)))
view.render_all_queries(report, knobs.k)
view.render_exchange(grader.store, kg.version, runs, app_state.gate(cfg).permit("label_sets", graph=handle.name))
