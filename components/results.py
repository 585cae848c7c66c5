"""The Search page's result layout: subgraph on the left, tabs (facts, sources, agent context, trace) on the right.

The tool modes (vector, hybrid, graph, comprehensive, dual-channel, multi-doc) use the same layout: their facts table
adds the document/graph mark and the citation, multi-doc adds a Books tab, and without a subgraph the tabs take the
whole width.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

from components.annotator import grading_target
from components.facts import (
    channel_badge,
    channel_of,
    citation_of,
    fact_row,
    picked_row,
    render_fact_detail,
    render_facts,
)
from components.grader import GradeTarget, render_grader
from components.graph_view import GraphMarks, render_graph, render_view
from components.memory_view import export_popover, saved_notice
from components.search_form import MODE_LABELS
from components.sources import render_sources
from components.trace import render_trace, render_warnings, total_ms
from retrieval.evaluation.labels import LabelStore
from retrieval.explore.export import suggest_keywords, to_graphml
from retrieval.explore.memory import GraphMemory
from retrieval.graph.index import SCHEMA_EDGES
from retrieval.models import SearchResult, Subgraph, VerbalizedFact
from ui_palette import type_palette
from ui_records import LiveGraph
from ui_text import clean, md_code, md_literal, slug


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


def summary_line(result: SearchResult) -> str:
    """Counts and time of one result; KG warnings are in the Trace tab, a tool mode's are shown above its result."""
    n_warn, kg_mode = len(result.warnings), result.mode == "kg"
    warned = f":orange[{n_warn} warning{'s' if n_warn > 1 else ''}{' — see Trace' if kg_mode else ''}]"
    if kg_mode:
        kinds = {k: sum(1 for f in result.facts if f.type == k) for k in ("local", "global")}
        parts = [
            f"**{len(result.facts)} facts** ({kinds['local']} local, {kinds['global']} global)",
            f"{len(result.subgraph.nodes)} entities",
            f"{len(result.seed_ids)} seeds",
            f"{len(result.paths)} paths",
        ]
    else:
        channels = [channel_of(f) for f in result.facts]
        parts = [
            f"**{MODE_LABELS.get(result.mode, md_literal(result.mode))} · {len(result.facts)} items** "
            f"({channels.count('document')} document, {channels.count('graph')} graph)",
            ", ".join(f"{md_literal(k)} {v}" for k, v in result.counts.items()),
            f"{len(result.subgraph.nodes)} entities" if result.subgraph.nodes else "",
        ]
    parts += [f"{total_ms(result):.0f} ms", warned if n_warn else ""]
    return " · ".join(p for p in parts if p)


def render_agent_context(markdown: str, file_stem: str, *, mode: str = "kg") -> None:
    """The Markdown exactly as the agent tool (or, for a tool mode, the CLI) returns it; with a copy button."""
    what = "`search_knowledge_graph` hands to an agent" if mode == "kg" else \
        f"{md_code(f'python -m retrieval search --mode {mode}')} prints"
    st.caption(f"What {what}, verbatim.")
    st.download_button(
        "Download .md", markdown.encode("utf-8", "replace"), file_name=f"{file_stem}.md", mime="text/markdown",
        icon=":material/download:",
    )
    st.code(clean(markdown), language="markdown", wrap_lines=True, height=520)


def file_stem(query: str) -> str:
    return f"kg-context-{slug(query, 48, 'query')}"


def render_overview(entity_types: list[tuple[str, int]], relation_types: list[tuple[str, int]],
                    schema: Subgraph) -> None:
    """What the graph holds, while no query is typed: its schema graph (entity types joined by relation
    types) beside the entity and relation types with their counts."""
    left, right = st.columns([3, 2], gap="medium")
    with left:
        render_graph(schema, max_nodes=60, height=430, key="kg-schema", stem="schema", quiet_labels=True,
                     palette=type_palette(entity_types),
                     cut_note=f"the others are in none of the {SCHEMA_EDGES} most frequent type → relation → type "
                              "triples: edge cap")
    for rows, what in ((entity_types, "entity type"), (relation_types, "relation type")):
        frame = pd.DataFrame([(clean(t), n) for t, n in rows], columns=[what, "count"])
        top = int(frame["count"].max()) if not frame.empty else 1
        right.dataframe(
            frame, hide_index=True, height=min(36 + 35 * len(frame), 250),
            column_config={"count": st.column_config.ProgressColumn("count", format="%d", min_value=0, max_value=top)},
        )


def cli_command(question: str, data_dir: Path, graph: str) -> str:
    """The terminal command that runs the same KG search (and prints what the agent tool returns)."""
    words = ["python", "-m", "retrieval", "search", question, "--data-dir", str(data_dir), "--graph", graph]
    return " ".join(shlex.quote(w) for w in words)


def render_elsewhere(schema: Subgraph, *, question: str, data_dir: Path, graph: str) -> None:
    """The same graph outside this page: the CLI (what an agent gets), the schema as GraphML, the other pages."""
    code, links = st.columns([3, 2], gap="medium", vertical_alignment="center")
    with code:
        st.caption("The same search from a terminal; it prints the Markdown an agent receives.")
        st.code(cli_command(question, data_dir, graph), language="bash", wrap_lines=True)
    with links:
        st.download_button(
            "Schema as GraphML", to_graphml(schema, {"graph": graph, "kind": "schema"}),
            file_name=f"{slug(graph, 64, 'graph')}-schema.graphml",
            mime="application/xml", icon=":material/download:",
        )
        st.page_link("pages/paths.py", label="Trace paths between two entities", icon=":material/route:")
        st.page_link("pages/memory.py", label="Browse saved subgraphs", icon=":material/inventory_2:")


def render_books(result: SearchResult, *, key: str, target: GradeTarget) -> None:
    """Multi-doc: one section per book, its chunks and relations in result order (ranks are overall ranks)."""
    rank = {f.id: i for i, f in enumerate(result.facts, 1)}
    by_id = {f.id: f for f in result.facts}
    st.caption(f"{len(result.groups)} books, best chunk first")
    rows = []
    for book, ids in result.groups.items():
        found = [fact_row(rank[i], by_id[i], result.query, channels=True) for i in ids if i in by_id]
        rows += [replace(r, head=book) if n == 0 else r for n, r in enumerate(found)]
    render_grader(rows, key=f"book-{key}", target=target)


def render_result(
    result: SearchResult, agent_md: str, *, key: str, labels: Callable[[], LabelStore],
    memory: Callable[[], GraphMemory], node_budget: int = 120, live: LiveGraph | None = None,
    answer_tab: Callable[[], None] | None = None,
) -> int | None:
    """Side by side: graph left, tabs right (tabs alone when a tool result has no subgraph).

    `agent_md` is the agent Markdown for KG, the CLI listing for the tool modes; the sources are the chunks the
    result carries; grades go to the label store `labels` opens and an export is saved to the Graph Memory
    `memory` opens; with `live` (the opened graph) the graph answers clicks (details), double-clicks (expansion)
    and context actions; `answer_tab` draws an Answer tab after Facts. Returns the picked fact index.
    """
    kg_mode = result.mode == "kg"
    has_graph = kg_mode or bool(result.subgraph.nodes)
    head, tool = st.columns([6, 1], vertical_alignment="center")
    head.markdown(summary_line(result))
    notice = st.container()
    if not kg_mode:
        render_warnings(result.warnings)  # degradations (a failed channel, text-only fallback) show up front
    picked = picked_row(f"facts-{key}", len(result.facts))
    if has_graph:
        left, right = st.columns([1, 1], gap="medium")
        with left:
            fact = result.facts[picked] if picked is not None else None
            _, view = render_view(result.subgraph, marks_for(result, fact), max_nodes=node_budget, height=600,
                                  live=live, key="kg-search", scores={"PPR in this search": result.entity_ppr},
                                  stem=file_stem(result.query))
        with tool:  # exports the view as it is now: expanded, without hidden nodes
            export_popover(memory, view, key=f"export-{key}", stem=file_stem(result.query),
                           title=result.query[:200], keywords=list(suggest_keywords(view)),
                           tags=["search"], metadata={"source": "search", "query": result.query,
                                                      "version": result.graph_version, "mode": result.mode})
        with notice:
            saved_notice(view, key=f"export-{key}")
    else:
        right = st.container()
    target = grading_target(labels, result.graph_version)
    with right:
        labels = ["Facts", *(["Answer"] if answer_tab else []), *(["Books"] if result.groups else []), "Sources",
                  "Agent context" if kg_mode else "Listing", "Trace"]
        tabs = dict(zip(labels, st.tabs(labels), strict=True))
        with tabs["Facts"]:
            picked = render_facts(result.facts, query=result.query, key=f"facts-{key}", target=target,
                                  channels=not kg_mode)
            if picked is not None:
                fact = result.facts[picked]
                if not kg_mode:
                    st.markdown(f"{channel_badge(fact)} {md_literal(citation_of(fact))}")
                render_fact_detail(picked, fact, result.chunks)
            else:
                st.caption("Pick a fact (click, or Enter) to highlight its path in the graph and see its sources."
                           if has_graph else "Pick a fact (click, or Enter) to see its sources.")
        if answer_tab is not None:
            with tabs["Answer"]:
                answer_tab()
        if "Books" in tabs:
            with tabs["Books"]:
                render_books(result, key=key, target=target)
        with tabs["Sources"]:
            render_sources(result.facts, result.chunks, query=result.query, key=f"sources-{key}", target=target,
                           picked=picked)
        with tabs["Agent context" if kg_mode else "Listing"]:
            render_agent_context(agent_md, file_stem(result.query), mode=result.mode)
        with tabs["Trace"]:
            render_trace(result)
    return picked
