"""Fact list: verbalized facts with their full text, every score and book › chapter, gradable in place
(components.grader); picking a fact returns it."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from components.grader import GradeRow, GradeTarget, Tag, render_grader, selected_key
from components.sources import quote
from retrieval.graph.traverse import chain, readable, step_line
from retrieval.models import Chunk, FactStep, VerbalizedFact
from ui_text import md_literal, reading

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
CHANNEL_ICONS = {"document": ":material/description:", "graph": ":material/hub:"}


def fact_text(fact: VerbalizedFact) -> str:
    """How a fact reads in a list: one layout for every fact with relations (`traverse.readable`: relation,
    direction, then the description as text), a passage's text as a reader expects it (`reading`)."""
    if fact.steps:
        return readable(fact.steps)
    return reading(fact.text) if fact.type == "document" else fact.text


def fact_line(fact: VerbalizedFact) -> str:
    """A fact on one line (a table cell, a chart tooltip): `A —REL→ B ←REL2— C`, else its text."""
    return chain(fact.steps) if fact.steps else " ".join(fact.text.split())


def steps_markdown(steps: Sequence[FactStep]) -> str:
    """One Markdown bullet per relation: `A —REL→ B` the way it runs, then its description (literal text)."""
    lines = []
    for step in steps:
        line = f"- {md_literal(step_line(step))}"
        if step.description.strip():
            line += "  \n  " + md_literal(" ".join(step.description.split()))
        lines.append(line)
    return "\n".join(lines)


def channel_of(fact: VerbalizedFact) -> str:
    """`document` or `graph`: the tool's own channel mark, else from the fact type (KG facts come from the graph)."""
    return fact.channel or ("document" if fact.type == "document" else "graph")


def channel_badge(fact: VerbalizedFact) -> str:
    """A small coloured badge, `document` or `graph` (Markdown; the words are ours, never data)."""
    channel = channel_of(fact)
    return f":{CHANNEL_COLORS[channel]}-badge[{CHANNEL_ICONS[channel]} {channel}]"


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


def where_of(fact: VerbalizedFact) -> str:
    """The citation (book › chapter), and how many more sources the fact has."""
    more = len(fact.sources) - 1
    return citation_of(fact) + (f" (+{more} more source{'s' if more > 1 else ''})" if more > 0 else "")


def fact_scores(fact: VerbalizedFact) -> tuple[tuple[str, str], ...]:
    """Every score of the fact (the ones that ranked it first), as (label, formatted value)."""
    return tuple((SCORE_LABELS.get(k, k), fmt_score(k, fact.scores[k])) for k in score_keys([fact]))


def fact_row(rank: int, fact: VerbalizedFact, query: str, *, channels: bool = False,
             tags: Sequence[Tag] = ()) -> GradeRow:
    """A fact as a gradable row: full text, type (and with `channels` the document/graph mark and the tool's
    citation), book › chapter, every score. The row key carries the rank, so a filtered list keeps its keys."""
    marks = [Tag(fact.type)]
    if channels:
        channel = channel_of(fact)
        marks = [m for m in marks if m.text != channel]  # a passage is "document" once, not "document document"
        marks.append(Tag(channel, CHANNEL_COLORS[channel]))
    return GradeRow(key=f"{rank}|{fact.id}", query=query, item_id=fact.id, text=fact_text(fact), rank=str(rank),
                    tags=(*marks, *tags), meta=where_of(fact), scores=fact_scores(fact))


def rank_of(row_key: str | None, n_rows: int) -> int | None:
    """The 0-based index a fact row key names (None when it names none of `n_rows`)."""
    head = (row_key or "").split("|", 1)[0]
    return int(head) - 1 if head.isdigit() and 0 < int(head) <= n_rows else None


def picked_row(key: str, n_rows: int) -> int | None:
    """The fact picked in list `key` as of this run (its state is known before the list is drawn)."""
    return rank_of(selected_key(key), n_rows)


def render_facts(facts: Sequence[VerbalizedFact], *, query: str, key: str, target: GradeTarget,
                 channels: bool = False) -> int | None:
    """The facts as a grading list (click or Enter picks one); returns the picked fact's index (or None)."""
    if not facts:
        st.info("No facts found for this query.")
        return None
    rows = [fact_row(i, f, query, channels=channels) for i, f in enumerate(facts, 1)]
    return rank_of(render_grader(rows, key=key, target=target, selectable=True), len(facts))


def render_fact_detail(index: int, fact: VerbalizedFact, chunks: dict[str, Chunk]) -> None:
    """The picked fact: its text, scores and the chunks it cites."""
    with st.container(border=True, key="picked-fact"):
        st.markdown(f"**Picked fact #{index + 1}** · `{fact.type}` — highlighted in the graph")
        st.markdown(steps_markdown(fact.steps) if fact.steps else quote(fact_text(fact)))
        if fact.scores:
            st.caption(" · ".join(f"{SCORE_LABELS.get(k, k)} {fmt_score(k, v)}" for k, v in fact.scores.items()))
        cited = [c for c in (chunks.get(cid) for cid in fact.chunk_ids) if c is not None]
        for c in cited:
            where = " › ".join(md_literal(x) for x in (c.original_document, c.chapter) if x) or md_literal(c.id)
            st.markdown(f"**Source** · {where}")
            st.markdown(quote(c.text))
        if fact.chunk_ids and not cited:
            st.caption("Cited chunks: " + ", ".join(md_literal(c) for c in fact.chunk_ids))
