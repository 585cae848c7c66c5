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
           f"**{md_literal(cur.author)}** (team mode: your sign-in; else the sidebar's name or the local user). Every "
           "change is recorded: who, when, why, and each record before and after; it can be undone.")
cv.render_notices(cur)
# a control, not tabs: the view stays chosen across the reruns an undo or a merge makes (and is in the URL)
view = st.segmented_control("View", ["Duplicates", "Changes", "History"], default="Duplicates", key="view",
                            bind="query-params", required=True)
if view == "Changes":
    cv.render_log(cur)
elif view == "History":
    cv.render_history(cur, app_state.entity_catalog(kg))
else:
    cv.render_duplicates(cur)
