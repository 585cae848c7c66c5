"""The no-match notice (seed 000): "No relevant knowledge found for this query.", then the weak matches."""

from __future__ import annotations

import streamlit as st

from components.items import render_items
from components.trace import render_warnings
from retrieval.models import EvidenceStrength, SearchResult
from retrieval.verbalize import NOTHING


def strength_text(strength: EvidenceStrength | None) -> str:
    """`Evidence strength 0.31 (best relation 0.37, chunk 0.54, entity 0.02) against the threshold 0.50.`"""
    if strength is None:
        return ""
    parts = ", ".join(f"{name} {value:.2f}" for name, value in strength.signals.items())
    text = f"Evidence strength {strength.score:.2f} (best {parts}) against the threshold {strength.threshold:.2f}"
    return text + ("." if strength.applied else " — not applied: calibrated for another embedding model.")


def render_no_match(result: SearchResult, *, key: str) -> None:
    """The notice, how weak the evidence was, and the nearest candidates, marked as not evidence."""
    st.info(NOTHING, icon=":material/search_off:")
    st.caption(strength_text(result.evidence_strength) + " The threshold was calibrated on answerable and "
               "unanswerable questions (README, no-match table).")
    if result.warnings:
        with st.expander(f"{len(result.warnings)} warning{'s' * (len(result.warnings) != 1)} from the search"):
            render_warnings(result.warnings)
    if result.weak_matches:
        st.markdown("##### Weak matches")
        st.caption("The nearest candidates: too far from the question to count as evidence.")
        render_items(list(enumerate(result.weak_matches, start=1)), key=f"weak-{key}")
