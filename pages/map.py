"""Map: every entity of the graph at once, communities as regions (semantic zoom); a search, a why-connected
question (`?a=&b=`, from Paths) or an explored neighbourhood (`?start=`) lit on it."""

from __future__ import annotations

import streamlit as st
from pydantic import ValidationError

import app_state
from components import map_view as mv
from retrieval.errors import RetrievalError
from retrieval.models import SearchParams
from ui_text import md_literal

cfg = app_state.settings()
st.markdown("### Map")
handle, kg = app_state.page_graph(cfg, "map")
st.query_params["graph"] = handle.name  # a copied link names the graph it was made on
query = st.text_input("Light up a search", key="q", bind="query-params", max_chars=2000,
                      placeholder="Ask a question: its seeds, PPR mass and traced paths light up on the map")
url = st.query_params
cat = app_state.entity_catalog(kg)
lights = None
try:
    if query:
        params = url.get("params") or SearchParams.model_validate({}).model_dump_json()
        with st.spinner("Searching…"):
            result = app_state.run_mode(kg, handle.name, handle.version, "kg", query, limit=10, text_weight=0.3,
                                        params_json=params)
        lights = mv.search_lights(result)
    elif cat.by_label.get(url.get("a", "")) and cat.by_label.get(url.get("b", "")):
        a, b = cat.by_label[url["a"]], cat.by_label[url["b"]]
        paths = app_state.ranked_paths(kg, a, b, int(url.get("k", 5)), int(url.get("hops", 4)), url.get("pq", ""), ())
        lights = mv.path_lights(paths)
    elif cat.by_label.get(url.get("start", "")):
        start = cat.by_label[url["start"]]
        reached = app_state.live_graph(kg).bfs(start, int(url.get("depth", 2)), "both", (), int(url.get("budget", 60)))
        lights = mv.traversal_lights(start, reached.subgraph, cat.label(start))
except (RetrievalError, ValidationError, ValueError) as exc:
    st.warning(f"Nothing lit: {md_literal(exc)}", icon=":material/warning:")
if app_state.map_layout_ready(kg):
    body = app_state.map_body(kg)
else:  # a version built before layouts were stored: laid out once now, then kept with the version
    bar = st.progress(0.0, text="Laying out the whole graph (once for this version)…")
    body = app_state.map_body(kg, lambda _, done, total: bar.progress(
        done / max(total, 1), text=f"Laying out {done:,} of {total:,} entities…"))
    bar.empty()
for warning in body.warnings:
    st.warning(md_literal(warning), icon=":material/warning:")
st.caption(f"{body.entities:,} entities, {body.relations:,} relations, {body.communities:,} communities "
           f"(layout {body.layout_seconds:.1f} s, once per version). Zoom in from communities to entities; click "
           "one for its details, double-click to open its neighbourhood, right-click for more.")
mv.render_map(body, lights, live=app_state.live_graph(kg))
