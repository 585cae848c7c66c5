"""Fact table: verbalized facts with every score; picking a row returns that fact."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import pandas as pd
import streamlit as st

from components.sources import quote
from components.text import clean, md_literal
from retrieval.models import Chunk, VerbalizedFact

# Known scores first, in reading order; any other score key follows alphabetically.
SCORE_ORDER = (
    "hybrid", "ppr", "path_semantic", "similarity", "score", "rerank_score", "ce_score", "pagerank", "graph_score",
    "bm25", "vector", "mmr_score", "mmr_rank", "llm_rank", "rerank_rank",
)
SCORE_LABELS = {
    "ppr": "PPR",
    "path_semantic": "path sem.",
    "similarity": "similarity",
    "rerank_score": "rerank score",
    "ce_score": "CE score",
    "pagerank": "PageRank",
    "mmr_rank": "MMR rank",
    "mmr_score": "MMR score",
    "llm_rank": "LLM rank",
    "rerank_rank": "rerank rank",
    "bm25": "BM25",
    "vector": "vector",
}
CHANNEL_COLORS = {"document": "blue", "graph": "violet"}


def channel_of(fact: VerbalizedFact) -> str:
    """`document` or `graph`: the tool's own channel mark, else from the fact type (KG facts come from the graph)."""
    return fact.channel or ("document" if fact.type == "document" else "graph")


def citation_of(fact: VerbalizedFact) -> str:
    """The tool's own citation (`[N: Book - Chapter]`), else the first source's book › chapter, else the chunk id."""
    if fact.citation:
        return fact.citation
    src = fact.sources[0] if fact.sources else None
    where = " › ".join(x for x in (src.original_document, src.chapter) if x) if src else ""
    return where or (fact.chunk_ids[0] if fact.chunk_ids else "")


def fmt_score(key: str, value: float) -> str:
    return f"{value:.0f}" if key.endswith("_rank") else f"{value:.3f}"


def score_keys(facts: Sequence[VerbalizedFact]) -> list[str]:
    present = {k for f in facts for k in f.scores}
    known = [k for k in SCORE_ORDER if k in present]
    return known + sorted(present - set(known))


def facts_frame(facts: Sequence[VerbalizedFact], *, channels: bool = False) -> pd.DataFrame:
    """One row per fact: rank, type, text, every score, and where it comes from (with `channels`: the
    document/graph mark and the citation, as the search tools give them)."""
    keys = score_keys(facts)
    marks = ["channel", "citation"] if channels else []
    rows = []
    for i, f in enumerate(facts, 1):
        books = sorted({clean(s.original_document) for s in f.sources if s.original_document})
        row: dict[str, object] = {"#": i, "type": f.type, "fact": clean(f.text)}
        if channels:
            row |= {"channel": [channel_of(f)], "citation": clean(citation_of(f))}
        for k in keys:
            row[k] = f.scores.get(k)
        row["sources"] = len(f.sources) or len(f.chunk_ids)
        row["books"] = ", ".join(books)
        rows.append(row)
    return pd.DataFrame(rows, columns=["#", "type", *marks, "fact", *keys, "sources", "books"])


def _column_config(keys: Sequence[str]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "#": st.column_config.NumberColumn("#", width=36),
        "type": st.column_config.TextColumn("type", width=64),
        "fact": st.column_config.TextColumn("fact", width=300, help="hover or widen to read it all"),
        "sources": st.column_config.NumberColumn("src", width=44, help="cited chunks"),
        "books": st.column_config.TextColumn("books", width="small"),
        "channel": st.column_config.MultiselectColumn(
            "channel", options=list(CHANNEL_COLORS), color=list(CHANNEL_COLORS.values()), width=90,
            help="document chunk or knowledge-graph item",
        ),
        "citation": st.column_config.TextColumn("citation", width="small"),
    }
    for k in keys:
        label = SCORE_LABELS.get(k, k)
        fmt = "%d" if k.endswith("_rank") else "%.3f"
        config[k] = st.column_config.NumberColumn(label, format=fmt, width=62 if k.endswith("_rank") else 68)
    return config


def picked_row(key: str, n_rows: int) -> int | None:
    """The row picked in table `key` as of this run (widget state is known before the table is drawn)."""
    state = st.session_state.get(key)
    rows = list(state["selection"]["rows"]) if state and "selection" in state else []
    return rows[0] if rows and 0 <= rows[0] < n_rows else None


def render_facts(
    facts: Sequence[VerbalizedFact], *, key: str, height: int | Literal["auto"] = "auto", channels: bool = False
) -> int | None:
    """The fact table with single-row selection; returns the picked row index (or None)."""
    if not facts:
        st.info("No facts found for this query.")
        return None
    frame = facts_frame(facts, channels=channels)
    event = st.dataframe(
        frame,
        hide_index=True,
        column_config=_column_config(score_keys(facts)),
        on_select="rerun",
        selection_mode="single-row",
        key=key,
        height=height,
        placeholder="—",  # a score the fact does not have (e.g. no PPR on a global fact)
    )
    rows = list(event.selection.rows) if event is not None and hasattr(event, "selection") else []
    return rows[0] if rows and 0 <= rows[0] < len(facts) else None


def render_fact_detail(index: int, fact: VerbalizedFact, chunks: dict[str, Chunk]) -> None:
    """The picked fact: its text, scores and the chunks it cites."""
    with st.container(border=True, key="picked-fact"):
        st.markdown(f"**Picked fact #{index + 1}** · `{fact.type}` — highlighted in the graph")
        st.markdown(md_literal(fact.text))
        if fact.scores:
            st.caption(" · ".join(f"{SCORE_LABELS.get(k, k)} {fmt_score(k, v)}" for k, v in fact.scores.items()))
        cited = [c for c in (chunks.get(cid) for cid in fact.chunk_ids) if c is not None]
        for c in cited:
            where = " › ".join(md_literal(x) for x in (c.original_document, c.chapter) if x) or md_literal(c.id)
            st.markdown(f"**Source** · {where}")
            st.markdown(quote(c.text))
        if fact.chunk_ids and not cited:
            st.caption("Cited chunks: " + ", ".join(md_literal(c) for c in fact.chunk_ids))
