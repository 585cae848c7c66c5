"""Audit log (team mode, admins): who signed in, imported, deleted, switched the active graph, adjudicated, queried
the console, edited few-shot examples, and every refused action; `python -m retrieval audit` exports the same."""

from __future__ import annotations

import streamlit as st

import app_state
from components.audit_view import render_audit
from retrieval.errors import AccessDenied
from ui_text import md_literal

cfg = app_state.settings()
gate = app_state.gate(cfg)
st.markdown("### Audit log")
try:
    gate.check("audit")  # the page is listed for admins only; a crafted URL still reaches this check
except AccessDenied as exc:
    st.error(md_literal(exc), icon=":material/lock:")
    st.stop()
if gate.audit is None:
    st.info("Local mode keeps no audit log: one user, nobody to tell apart.", icon=":material/info:")
    st.stop()
st.caption("Append-only, in the data directory's `audit.sqlite` (each entry fsynced before the action goes on).")
render_audit(gate.audit.entries)
