"""The no-match notice (seed 000): "No relevant knowledge found for this query.", then the weak matches."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from components.annotator import grading_target
from components.facts import fact_row
from components.grader import render_grader
from components.trace import render_warnings, strength_text
from retrieval.evaluation.labels import LabelStore
from retrieval.models import SearchResult
from retrieval.search.verbalize import NOTHING


def render_no_match(result: SearchResult, *, key: str, labels: Callable[[], LabelStore]) -> None:
    """The notice, how weak the evidence was, and the nearest candidates, marked as not evidence (gradable into the
    label store `labels` opens)."""
    st.info(NOTHING, icon=":material/search_off:")
    st.caption(strength_text(result.evidence_strength) + " The threshold was calibrated on answerable and "
               "unanswerable questions (README, no-match table).")
    if result.warnings:
        with st.expander(f"{len(result.warnings)} warning{'s' * (len(result.warnings) != 1)} from the search"):
            render_warnings(result.warnings)
    if result.weak_matches:
        st.markdown("##### Weak matches")
        st.caption("The nearest candidates: too far from the question to count as evidence (gradable like any item).")
        rows = [fact_row(i, f, result.query, channels=True) for i, f in enumerate(result.weak_matches, start=1)]
        render_grader(rows, key=f"weak-{key}", target=grading_target(labels, result.graph_version))
