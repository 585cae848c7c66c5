"""Labeling: query sets, TREC-style pools, the blind grading queue, agreement with adjudication, qrels export."""

from __future__ import annotations

from functools import partial

import streamlit as st

import app_state
from components import labeling as lab
from components.annotator import grading_target

cfg = app_state.settings()
gate = app_state.gate(cfg)
st.markdown("### Labeling")
handle, kg = app_state.page_graph(cfg, "label")
curate = gate.permit("label_sets", graph=handle.name)
labels = partial(app_state.label_store, cfg)
target = grading_target(labels, kg.version, required=True)
qset = lab.choose_set(target.store)
if qset is None:
    st.caption("Import a query set to start: each query's candidates are pooled from every search mode and reranker, "
               "then graded blind, query by query, with the keyboard.")
    lab.render_query_set_import(labels, permit=curate, max_queries=cfg.max_query_set)
    st.stop()
queue_tab, sets_tab, agree_tab, export_tab = st.tabs(["Queue", "Query sets and pools", "Agreement", "Export"])
with queue_tab:
    lab.render_queue(target.store, qset, target)
with sets_tab:
    lab.render_pool(kg, target.store, qset, app_state.unavailable_rerankers(cfg), curate)
    lab.render_query_set_import(labels, permit=curate, max_queries=cfg.max_query_set)
adjudicate = gate.permit("adjudicate", graph=handle.name)
with agree_tab:
    lab.render_agreement(target.store, qset, kg.version, adjudicate)
with export_tab:
    lab.render_export(target.store, qset, kg.version, None if adjudicate.allowed else target.annotator or "")
