"""Compare view: two search modes on one query — overlap of cited chunks, items unique to each, both ranked lists."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from components.annotator import grading_target
from components.facts import fact_row
from components.grader import Tag, render_grader
from components.search_form import MODE_LABELS
from components.trace import render_warnings, strength_text, total_ms
from retrieval.evaluation.labels import LabelStore
from retrieval.models import SearchResult
from retrieval.search.modes import cited_chunks, jaccard
from retrieval.search.verbalize import NOTHING
from ui_text import md_literal

SHARED_TAG = Tag("shared", "green")
UNIQUE_TAG = Tag("only here", "orange")
WEAK_TAG = Tag("weak match", "plain")


@dataclass(frozen=True)
class Comparison:
    """Overlap of two results: on cited chunks (Jaccard), and per item."""

    jaccard: float
    shared_chunks: frozenset[str]
    only_a_chunks: frozenset[str]
    only_b_chunks: frozenset[str]
    unique_a: frozenset[str]  # ids of A's items that B has neither as an item nor through a cited chunk
    unique_b: frozenset[str]


def _unique(result: SearchResult, other: SearchResult, other_chunks: set[str]) -> frozenset[str]:
    ids = {f.id for f in other.facts}
    return frozenset(f.id for f in result.facts if f.id not in ids and not other_chunks.intersection(f.chunk_ids))


def compare(a: SearchResult, b: SearchResult) -> Comparison:
    """An item is shared when the other side returns the same item or cites one of its chunks."""
    ca, cb = cited_chunks(a), cited_chunks(b)
    return Comparison(
        jaccard=jaccard(ca, cb),
        shared_chunks=frozenset(ca & cb),
        only_a_chunks=frozenset(ca - cb),
        only_b_chunks=frozenset(cb - ca),
        unique_a=_unique(a, b, cb),
        unique_b=_unique(b, a, ca),
    )


def mode_label(result: SearchResult) -> str:
    return MODE_LABELS.get(result.mode, md_literal(result.mode))


def side_header(result: SearchResult, unique: frozenset[str]) -> str:
    counts = ", ".join(f"{md_literal(k)} {v}" for k, v in result.counts.items())
    parts = [f"**{mode_label(result)}**", f"{len(result.facts)} items, {len(unique)} only here",
             counts, f"{total_ms(result):.0f} ms"]
    return " · ".join(p for p in parts if p)


def render_compare(a: SearchResult, b: SearchResult, *, labels: Callable[[], LabelStore]) -> Comparison:
    """Overlap figures on top, then A and B side by side as grading lists (containers `st-key-compare-a` / `-b`),
    graded into the label store `labels` opens."""
    cmp = compare(a, b)
    la, lb = mode_label(a), mode_label(b)
    st.markdown(f"#### {la} vs {lb}")
    figures = st.columns(4)
    figures[0].metric(
        "Overlap (Jaccard of cited chunks)", f"{cmp.jaccard:.3f}", border=True,
        help="|A ∩ B| / |A ∪ B| over the chunk ids the two result lists cite (1.0 when neither cites any)",
    )
    figures[1].metric("Shared chunks", len(cmp.shared_chunks), border=True)
    figures[2].metric(f"Chunks only in {la}", len(cmp.only_a_chunks), border=True)
    figures[3].metric(f"Chunks only in {lb}", len(cmp.only_b_chunks), border=True)
    only = st.toggle(
        "Only the items unique to each side", key="compare-only-unique",
        help="An item is shared when the other side returns the same item or cites one of its chunks",
    )
    columns = st.columns(2, gap="medium")
    target = grading_target(labels, a.graph_version)  # both lists grade for the same query: a grade shows on both sides
    for col, side, result, unique in ((columns[0], "a", a, cmp.unique_a), (columns[1], "b", b, cmp.unique_b)):
        with col:
            st.markdown(side_header(result, unique))
            render_warnings(result.warnings)
            if result.no_match:  # this mode found no evidence: say so, and list its weak matches as such
                st.info(NOTHING, icon=":material/search_off:")
                st.caption(strength_text(result.evidence_strength))
            rows = [fact_row(i, f, result.query, channels=True, tags=(WEAK_TAG,) if result.no_match else
                             (UNIQUE_TAG if f.id in unique else SHARED_TAG,))
                    for i, f in enumerate(result.facts or result.weak_matches, 1)
                    if not only or result.no_match or f.id in unique]
            with st.container(key=f"compare-{side}"):
                render_grader(rows, key=f"compare-list-{side}", target=target,
                              empty="Every item here is shared." if only and result.facts else "No results.")
    return cmp
