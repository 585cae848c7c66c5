"""Curation: duplicate candidates to merge (one, or a reviewed batch), the change log with undo and redo, and the
history of an entity or relation. Edits of single entities and relations are made in any live graph view."""

from __future__ import annotations

import streamlit as st

import app_state
from components import curation_view as cv
from ui_text import md_literal

cfg = app_state.settings()
st.markdown("### Curation")
handle, kg = app_state.page_graph(cfg, "curate")
cur = app_state.curation(kg)
st.caption(f"Graph **{md_literal(handle.name)}** · revision {md_literal(kg.revision)} · you edit as "
           f"**{md_literal(cur.author)}** (the sidebar's name, else the local user). Every change is recorded: "
           "who, when, why, and each record before and after; it can be undone.")
cv.render_notices(cur)
dups, log, history = st.tabs(["Duplicates", "Changes", "History"])
with dups:
    cv.render_duplicates(cur)
with log:
    cv.render_log(cur)
with history:
    cv.render_history(cur, app_state.entity_catalog(kg))
