"""Data: the current graph's statistics, the graphs of the data directory, imports and the demo graph."""

from __future__ import annotations

from functools import partial

import streamlit as st

import app_state
from components import ingest_panel as ip
from components.documents_panel import render_documents
from components.fewshot_editor import render_fewshot_editor
from components.labeling import render_query_set_import
from retrieval.config import DEMO_DIR
from retrieval.errors import RetrievalError
from ui_text import md_literal

cfg = app_state.settings()
gate = app_state.gate(cfg)
handle = app_state.current_handle(cfg)
team = not gate.identity.local

st.markdown("### Data")
if handle is None:
    st.info("No graph yet: build the demo graph (a small marketing library, about a minute) or import your own.")
else:
    try:
        ip.render_stats(app_state.graph_stats(app_state.open_kg(cfg, handle)))
    except RetrievalError as exc:
        st.error(f"Cannot read graph **{md_literal(handle.name)}**: {md_literal(exc)}")

left, right = st.columns([1, 1], gap="large")
with left:
    st.markdown("#### Graphs in this data directory")
    frame = ip.graphs_frame(cfg.data_dir, app_state.graph_names(cfg))
    if not frame.empty:
        st.dataframe(frame, hide_index=True, column_config={"active": st.column_config.CheckboxColumn(width=56)})
        ip.render_graph_actions(cfg, gate, frame["graph"].tolist(), app_state.pick_graph, team)
    demo = gate.permit("import", graph="demo")
    demo_label = "Rebuild demo graph" if "demo" in frame["graph"].tolist() else "Build demo graph"
    if st.button(demo_label, type="primary", icon=":material/auto_awesome:", key="build-demo",
                 help=demo.refusal or None):  # drawn for every role: a click the role does not allow is refused
        ip.run_ingest(cfg, DEMO_DIR, "bundle", "demo", app_state.embedder(cfg.embed_model), permit=demo)

with right:
    st.markdown("#### Import a graph")
    ip.render_done()
    source = ip.import_source(cfg)
    chosen = source.upload is not None or bool(source.folder)
    fmt = st.segmented_control("Format", ip.FORMATS, default="auto", key="import-format")
    mapping = ip.mapping_inputs()
    if chosen and st.session_state.get("import-hint") != source.hint:  # a new source proposes its own name
        st.session_state["import-hint"] = source.hint
        st.session_state["import-name"] = ip.name_hint(source.hint)
    name = st.text_input("Graph name", key="import-name",
                         help="Letters, digits, '_' and '-'; an existing name gets a new version")
    allowed = gate.permit("import", graph=name or None)
    if st.button("Import", disabled=not (chosen and name), icon=":material/upload:",
                 help=(allowed.refusal or None) if name else None, key="import-go"):
        ip.run_import(cfg, source, fmt or "auto", name, app_state.embedder(cfg.embed_model), mapping, allowed)
    st.caption("Formats: the native bundle (docs/bundle-format.md), HippoRAG OpenIE output, a GraphRAG output "
               "folder, a LightRAG working dir, GraphML, nodes.csv + relationships.csv, or documents (.txt, .md, .pdf, "
               ".epub; see the README).")
    render_query_set_import(partial(app_state.label_store, cfg), "data-qs",
                            gate.permit("label_sets", graph=handle.name if handle else None),
                            max_queries=cfg.max_query_set)

if handle is not None:
    with st.expander(f"Add or remove documents of {md_literal(handle.name)}", icon=":material/note_add:"):
        try:
            kg = app_state.open_kg(cfg, handle)
            books = sorted(app_state.graph_stats(kg).chapter_names)
            add, remove = app_state.documents(kg)
        except RetrievalError as exc:  # the graph cannot open (a broken store, a read-only data dir): said here
            st.warning(f"Documents cannot be added or removed now: {md_literal(exc)}", icon=":material/error:")
        else:
            render_documents(cfg, add, remove, books)
    with st.expander(f"Few-shot examples of {md_literal(handle.name)}", icon=":material/school:"):
        render_fewshot_editor(cfg, handle.name, gate.permit("fewshot", graph=handle.name))
