"""The Search page's result layout: subgraph on the left, tabs (facts, sources, agent context, trace) on the right."""

from __future__ import annotations

import hashlib
import re

import pandas as pd
import streamlit as st

import app_state
from components.facts import picked_row, render_fact_detail, render_facts
from components.graph_view import GraphMarks, render_graph
from components.sources import render_sources
from components.text import clean
from components.trace import render_trace
from retrieval.export import suggest_keywords
from retrieval.models import Chunk, SearchResult, VerbalizedFact


def result_key(*parts: str) -> str:
    """A short stable key for widgets that belong to one result (selection resets on a new search)."""
    return hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def marks_for(result: SearchResult, fact: VerbalizedFact | None = None) -> GraphMarks:
    """Seeds, PPR destinations and traced paths from the result; the picked fact's entities and relations."""
    path_nodes = {n.id for p in result.paths for n in (p.source_node, *p.intermediate_nodes, p.destination_node)}
    path_edges = {e.id for p in result.paths for e in p.edges}
    return GraphMarks.of(
        seeds=result.seed_ids,
        destinations=result.destination_ids,
        path_nodes=path_nodes,
        path_edges=path_edges,
        focus_nodes=fact.entity_ids if fact else (),
        focus_edges=fact.relation_ids if fact else (),
    )


def cited_chunk_ids(result: SearchResult) -> tuple[str, ...]:
    ids = [c for f in result.facts for c in (*f.chunk_ids, *(s.chunk_id for s in f.sources)) if c]
    return tuple(dict.fromkeys(ids))


def summary_line(result: SearchResult) -> str:
    total_ms = sum(t.ms for t in result.timings)
    kinds = {k: sum(1 for f in result.facts if f.type == k) for k in ("local", "global")}
    parts = [
        f"**{len(result.facts)} facts** ({kinds['local']} local, {kinds['global']} global)",
        f"{len(result.subgraph.nodes)} entities",
        f"{len(result.seed_ids)} seeds",
        f"{len(result.paths)} paths",
        f"{total_ms:.0f} ms",
    ]
    if result.warnings:
        parts.append(f":orange[{len(result.warnings)} warning{'s' if len(result.warnings) > 1 else ''} — see Trace]")
    return " · ".join(parts)


def render_agent_context(markdown: str, file_stem: str) -> None:
    """The Markdown exactly as the agent tool returns it; the code block has a copy button."""
    st.caption("What `search_knowledge_graph` hands to an agent, verbatim.")
    st.download_button(
        "Download .md", markdown.encode("utf-8", "replace"), file_name=f"{file_stem}.md", mime="text/markdown",
        icon=":material/download:",
    )
    st.code(clean(markdown), language="markdown", wrap_lines=True, height=520)


def file_stem(query: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9]+", "-", query).strip("-").lower()[:48]
    return f"kg-context-{stem or 'query'}"


def render_overview(entity_types: list[tuple[str, int]], relation_types: list[tuple[str, int]]) -> None:
    """What the graph holds, while no query is typed: entity and relation types with their counts."""
    left, right = st.columns(2, gap="medium")
    for col, rows, what in ((left, entity_types, "entity type"), (right, relation_types, "relation type")):
        frame = pd.DataFrame([(clean(t), n) for t, n in rows], columns=[what, "count"])
        top = int(frame["count"].max()) if not frame.empty else 1
        col.dataframe(
            frame, hide_index=True, height=min(36 + 35 * len(frame), 330),
            column_config={"count": st.column_config.ProgressColumn("count", format="%d", min_value=0, max_value=top)},
        )


def render_result(
    result: SearchResult, chunks: dict[str, Chunk], agent_md: str, *, key: str, node_budget: int = 120
) -> int | None:
    """Side by side: graph left, tabs right. Returns the picked fact index."""
    from components.memory_view import export_popover, saved_notice  # memory_view imports this module

    head, tool = st.columns([6, 1], vertical_alignment="center")
    head.markdown(summary_line(result))
    with tool:
        export_popover(app_state.settings(), result.subgraph, key=f"export-{key}", stem=file_stem(result.query),
                       title=result.query[:200], keywords=list(suggest_keywords(result.subgraph)), tags=["search"],
                       metadata={"source": "search", "query": result.query, "version": result.graph_version})
    saved_notice(result.subgraph, key=f"export-{key}")
    left, right = st.columns([1, 1], gap="medium")
    # The graph goes out first so the browser parses vis-network while the tabs are still being sent.
    picked = picked_row(f"facts-{key}", len(result.facts))
    with left:
        fact = result.facts[picked] if picked is not None else None
        render_graph(result.subgraph, marks_for(result, fact), max_nodes=node_budget, height=600)
    with right:
        facts_tab, sources_tab, agent_tab, trace_tab = st.tabs(["Facts", "Sources", "Agent context", "Trace"])
        with facts_tab:
            picked = render_facts(result.facts, key=f"facts-{key}")
            if picked is not None:
                render_fact_detail(picked, result.facts[picked], chunks)
            else:
                st.caption("Pick a row to highlight its path in the graph and see its sources.")
        with sources_tab:
            render_sources(result.facts, chunks, picked=picked)
        with agent_tab:
            render_agent_context(agent_md, file_stem(result.query))
        with trace_tab:
            render_trace(result)
    return picked
