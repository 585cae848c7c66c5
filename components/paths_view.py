"""Paths page widgets: entity picker, Explore (BFS + step-by-step expansion with history), why-connected paths
(each gradable in place)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pandas as pd
import streamlit as st

from components import link_params
from components.annotator import grading_target
from components.facts import rank_of, steps_markdown
from components.grader import GradeRow, GradeTarget, Tag, render_grader
from components.graph_instrument import ExpandHooks
from components.graph_roles import EXPLORE_ROLES, PATH_ROLES, draw_view
from components.graph_view import GraphMarks
from components.links import PATH_MODES
from components.memory_view import DIRECTIONS, export_popover, saved_notice
from components.sources import group_sources, quote
from components.trace import render_warnings
from retrieval.errors import ValidationError
from retrieval.evaluation.labels import LabelStore
from retrieval.explore.export import merge_subgraphs, suggest_keywords
from retrieval.explore.memory import GraphMemory
from retrieval.graph.runtime import KG
from retrieval.graph.traverse import MAX_DEPTH, MAX_HOPS, MAX_K, name_choices, path_steps, readable
from retrieval.items import path_item_id
from retrieval.models import Chunk, GraphPath, PathResult, Subgraph, TraversalResult, VerbalizedFact
from ui_records import EntityCatalog, LiveGraph
from ui_text import clean, md_code, md_literal, result_key, short, slug

EXTRA_IDS = "paths-extra-ids"
PARAMS = (  # the page's bound widgets (components/link_params.py)
    link_params.choice("mode", list(PATH_MODES.values()), "explore", "a Paths mode",
                       f"Paths opens on {PATH_MODES['explore']}"),
    link_params.Param("start", None), link_params.Param("a", None), link_params.Param("b", None),
    link_params.Param("pq", ""),
    link_params.number("k", 1, MAX_K, 5, integer=True, what="Paths (k) uses 5"),
    link_params.number("hops", 1, MAX_HOPS, 4, integer=True, what="Max hops uses 4"),
)
P = {p.key: p for p in PARAMS}


def _resolve_typed(kg: KG, key: str) -> None:
    """A name typed into a picker (not one of its options) picks the entity of exactly that name; otherwise nothing
    is picked and the closest names are offered (`name_choices`): the analyst chooses, nothing is swapped."""
    value = st.session_state.get(key)
    st.session_state.pop(f"{key}-choices", None)
    if not isinstance(value, str) or value in kg.index.id_to_idx:
        return
    try:
        found, close = name_choices(kg.index, value)
    except ValidationError:
        found, close = None, []
    if found is None:
        st.session_state[key] = None
        st.session_state[f"{key}-choices"] = (value, close)
        return
    _take(key, found)


def _take(key: str, entity_id: str) -> None:
    """Pick `entity_id` in picker `key` (a picked name outside the best-connected options joins them)."""
    extra = st.session_state.setdefault(EXTRA_IDS, [])
    if entity_id not in extra:
        extra.append(entity_id)
    st.session_state[key] = entity_id
    st.session_state.pop(f"{key}-choices", None)


def entity_picker(kg: KG, cat: EntityCatalog, label: str, key: str, help: str | None = None) -> str | None:
    """A selectbox that filters entity names as you type; a name it does not list is looked up on Enter: the entity
    of that name, else a choice among the closest names. A link naming no entity is said."""
    raw = st.query_params.get(key)
    wanted = cat.by_label.get(raw or "")
    if raw and wanted is None:
        link_params.render([link_params.note(key, f"{md_code(f'{key}={short(raw, 80)}')} in the link names no "
                                                  f"entity of this graph: {label.lower()} is not set.", None)])
    extra = st.session_state.setdefault(EXTRA_IDS, [])
    if wanted and wanted not in extra:
        extra.append(wanted)  # a shared link may name an entity outside the best-connected options
    shown = set(cat.options)
    options = [*cat.options, *(i for i in extra if i not in shown)]
    value = st.selectbox(
        label, options, index=None, format_func=cat.label, key=key, bind="query-params", help=help,
        placeholder=f"Type to search {cat.count:,} entities…", accept_new_options=True,
        on_change=_resolve_typed, args=(kg, key),
    )
    typed = st.session_state.get(f"{key}-choices")
    if typed:
        name, close = typed
        with st.container(border=True, key=f"{key}-did-you-mean"):
            st.markdown(f"No entity named “{md_literal(name)}”." + (" Did you mean:" if close else
                                                                      " Type another name."))
            with st.container(horizontal=True):
                for i, eid in enumerate(close):
                    name = cat.labels.get(eid, eid).rsplit(" (", 1)[0]
                    st.button(md_literal(name), key=f"{key}-choice-{i}", on_click=_take, args=(key, eid),
                              help=md_literal(cat.label(eid)))  # a label renders Markdown: data is escaped
    return value if isinstance(value, str) and value in kg.index.id_to_idx else None


# --- Explore: BFS, then step-by-step expansion with back/forward ------------------------------


@dataclass(frozen=True)
class ExploreParams:
    start: str
    depth: int
    direction: str
    relation_types: tuple[str, ...]
    entity_types: tuple[str, ...]
    budget: int

    @property
    def key(self) -> str:
        return "\x1f".join((self.start, str(self.depth), self.direction, *self.relation_types, str(self.budget)))


@dataclass
class History:
    """Expanded node ids in order; `pos` of them are applied (Back lowers it, Forward raises it)."""

    base: str
    steps: list[str] = field(default_factory=list)
    pos: int = 0


def explore_controls(kg: KG, cat: EntityCatalog) -> ExploreParams | None:
    top = st.columns([3, 1.1, 1.5, 1.1], vertical_alignment="bottom")
    with top[0]:
        start = entity_picker(kg, cat, "Start entity", "start", help="Type part of a name; Enter looks it up")
    depth = top[1].number_input("Depth", 1, MAX_DEPTH, 2, key="x-depth", help="Hops from the start entity")
    direction = top[2].segmented_control("Direction", ["both", "out", "in"], format_func=lambda d: DIRECTIONS[d],
                                         default="both", key="x-dir", required=True)
    budget = top[3].number_input("Node budget", 5, 1000, 60, 5, key="x-budget",
                                 help="Most entities the traversal returns; the rest is counted (showing N of M)")
    left, right = st.columns(2)
    rels = left.multiselect("Relation types", cat.relation_types, key="x-rels", placeholder="All relation types",
                            format_func=clean)
    types = right.multiselect("Entity types", cat.node_types, key="x-types", placeholder="All entity types",
                              format_func=clean, help="Hides entities of other types, except those on the way")
    if start is None:
        return None
    return ExploreParams(start, int(depth), str(direction or "both"), tuple(rels), tuple(types), int(budget))


def history_for(params: ExploreParams) -> History:
    """This session's expansion history; a new start or new filters begin a fresh one."""
    hist = st.session_state.get("paths-history")
    if not isinstance(hist, History) or hist.base != params.key:
        hist = History(params.key)
        st.session_state["paths-history"] = hist
    return hist


def _go(hist: History, delta: int) -> None:
    hist.pos = min(max(hist.pos + delta, 0), len(hist.steps))


def push(hist: History, node: str) -> None:
    hist.steps = [*hist.steps[: hist.pos], node]  # a new branch drops the forward history, as a browser does
    hist.pos = len(hist.steps)


def _expand(hist: History, key: str) -> None:
    node = st.session_state.get(key)
    if node:
        push(hist, node)


def hooks(hist: History) -> ExpandHooks:
    """The graph's double-click and Back/Forward drive this page's own expansion history."""
    return ExpandHooks(expand=lambda node: push(hist, node), back=lambda: _go(hist, -1),
                       forward=lambda: _go(hist, 1), can_back=hist.pos > 0, can_forward=hist.pos < len(hist.steps))


def parents(root: str, parts: Sequence[TraversalResult]) -> dict[str, tuple[str, str]]:
    """node id -> (previous node id, relation id) on the first traversal path that reached it from `root`."""
    out: dict[str, tuple[str, str]] = {}
    for part in parts:
        for p in part.paths:
            for prev, node, edge in zip(p.nodes, p.nodes[1:], p.edges, strict=False):
                if node.id != root:
                    out.setdefault(node.id, (prev.id, edge.id))
    return out


def chain(node: str, links: Mapping[str, tuple[str, str]]) -> tuple[list[str], list[str]]:
    """Node and relation ids from the start to `node`, following `parents` links."""
    nodes, edges = [node], []
    while nodes[-1] in links and links[nodes[-1]][0] not in nodes:
        prev, edge = links[nodes[-1]]
        nodes.append(prev)
        edges.append(edge)
    return nodes[::-1], edges[::-1]


def _type_filter(sub: Subgraph, links: Mapping[str, tuple[str, str]], types: tuple[str, ...],
                 keep: set[str]) -> tuple[Subgraph, int]:
    """Entities of `types` plus `keep`, and every entity on the traversal path to one of them."""
    if not types:
        return sub, 0
    wanted = set(types)
    kept = set(keep)
    for n in sub.nodes:
        if n.type in wanted:
            kept.update(chain(n.id, links)[0])
    nodes = tuple(n for n in sub.nodes if n.id in kept)
    edges = tuple(e for e in sub.edges if e.source_id in kept and e.target_id in kept)
    return sub.model_copy(update={"nodes": nodes, "edges": edges}), len(sub.nodes) - len(nodes)


@dataclass(frozen=True)
class ExploreView:
    subgraph: Subgraph
    base: TraversalResult
    steps: tuple[TraversalResult, ...]
    links: Mapping[str, tuple[str, str]]
    hidden: int  # entities hidden by the entity-type filter


def explore_view(live: LiveGraph, params: ExploreParams, hist: History) -> ExploreView:
    base = live.bfs(params.start, params.depth, params.direction, params.relation_types, params.budget)
    step_budget = max(10, min(params.budget, 40))
    steps = tuple(live.expand(node, step_budget, params.direction, params.relation_types)
                  for node in hist.steps[: hist.pos])
    merged = merge_subgraphs([base.subgraph, *(s.subgraph for s in steps)])
    closing = live.edges(tuple(sorted(n.id for n in merged.nodes)), params.relation_types)
    merged = merge_subgraphs([merged], closing.edges)
    links = parents(params.start, (base, *steps))
    shown, hidden = _type_filter(merged, links, params.entity_types, {params.start, *hist.steps[: hist.pos]})
    return ExploreView(shown.model_copy(update={"total_nodes": len(shown.nodes)}), base, steps, links, hidden)


def _pick_row(table: str, ids: list[str]) -> None:
    rows = st.session_state[table]["selection"]["rows"]
    if rows and rows[0] < len(ids):
        st.session_state["x-node"] = ids[rows[0]]  # a callback may set another widget's value


def view_frame(view: ExploreView) -> pd.DataFrame:
    names = {n.id: n.name for n in view.subgraph.nodes}
    rels = {e.id: e.relation_type for e in view.subgraph.edges}
    rows = []
    for n in view.subgraph.nodes:
        nodes, edges = chain(n.id, view.links)
        prev = ""
        if edges:
            prev = f"{clean(short(names.get(nodes[-2], nodes[-2]), 40))} · {clean(rels.get(edges[-1], ''))}"
        rows.append({"entity": clean(n.name), "type": clean(n.type), "hops": len(edges), "reached via": prev})
    return pd.DataFrame(rows, columns=["entity", "type", "hops", "reached via"])


def render_view_table(view: ExploreView, hist: History) -> None:
    """Entities in view; picking a row selects it for expansion and highlights its path from the start."""
    ids = [n.id for n in view.subgraph.nodes]
    table = f"x-table-{result_key(hist.base)}-{hist.pos}"
    st.dataframe(view_frame(view), hide_index=True, on_select=partial(_pick_row, table, ids), key=table,
                 selection_mode="single-row", height=430,
                 column_config={"entity": st.column_config.TextColumn(width=190),
                                "type": st.column_config.TextColumn(width=86),
                                "hops": st.column_config.NumberColumn(width=48),
                                "reached via": st.column_config.TextColumn(width=220)})


def render_history(hist: History, cat: EntityCatalog, view: ExploreView) -> str | None:
    """The node to expand next, Expand, Back / Forward and the trail of expansions; returns the picked node."""
    ids = [n.id for n in view.subgraph.nodes]
    if st.session_state.get("x-node") not in ids:
        st.session_state.pop("x-node", None)
    picked = st.selectbox("Expand the neighbours of", ids, index=None, key="x-node", format_func=cat.label,
                          placeholder="Pick an entity in the view (or a row below)…")
    cols = st.columns([1.2, 1, 1.1, 2], vertical_alignment="center")
    cols[0].button("Expand", icon=":material/hub:", type="primary", on_click=_expand, args=(hist, "x-node"),
                   key="x-expand", disabled=picked is None, use_container_width=True)
    cols[1].button("Back", icon=":material/undo:", disabled=hist.pos == 0, on_click=_go, args=(hist, -1),
                   key="x-back", help="Undo the last expansion", use_container_width=True)
    cols[2].button("Forward", icon=":material/redo:", disabled=hist.pos >= len(hist.steps), on_click=_go,
                   args=(hist, 1), key="x-fwd", help="Redo an expansion you went back from", use_container_width=True)
    if picked is not None:  # jump to the picked entity's communities and claims
        cols[3].page_link("pages/communities.py", label="Its communities", icon=":material/groups:",
                          query_params={"graph": st.query_params.get("graph", ""), "entity": picked})
    trail = [f"**{md_literal(short(cat.label(view.base.start_id), 40))}**"]
    for i, node in enumerate(hist.steps):
        item = f"\\+ {md_literal(short(cat.label(node), 40))}"
        if i < len(view.steps):
            item += f" ({view.steps[i].showing})"
        trail.append(f"**{item}**" if i == hist.pos - 1 else item if i < hist.pos else f":gray[{item}]")
    st.caption("History: " + " → ".join(trail))
    return picked


def explore_marks(params: ExploreParams, hist: History, view: ExploreView, picked: str | None) -> GraphMarks:
    last = view.steps[-1].subgraph if view.steps else Subgraph()
    before = {n.id for n in merge_subgraphs([view.base.subgraph, *(s.subgraph for s in view.steps[:-1])]).nodes}
    focus_nodes, focus_edges = chain(picked, view.links) if picked else ([], [])
    return GraphMarks.of(
        seeds=[params.start],
        destinations=hist.steps[: hist.pos],
        path_nodes=[n.id for n in last.nodes if n.id not in before],
        path_edges=[e.id for e in last.edges] if view.steps else [],
        focus_nodes=focus_nodes,
        focus_edges=focus_edges,
    )


def explore_summary(view: ExploreView) -> str:
    parts = [f"**{len(view.subgraph.nodes)} entities** · {len(view.subgraph.edges)} relations in view",
             f"start: {view.base.showing} within {view.base.max_depth} hop{'s' if view.base.max_depth > 1 else ''}"]
    if view.steps:
        parts.append(f"{len(view.steps)} expansion{'s' if len(view.steps) > 1 else ''}")
    if view.hidden:
        parts.append(f"{view.hidden} hidden by the entity-type filter")
    return " · ".join(parts)


def warnings_of(*results: TraversalResult | PathResult) -> list[str]:
    return list(dict.fromkeys(w for r in results for w in r.warnings))


# --- Why are these connected? -----------------------------------------------------------------


@dataclass(frozen=True)
class WhyParams:
    a: str
    b: str
    query: str
    k: int
    hops: int
    relation_types: tuple[str, ...]


def why_controls(kg: KG, cat: EntityCatalog) -> WhyParams | None:
    left, right = st.columns(2)
    with left:
        a = entity_picker(kg, cat, "From entity", "a")
    with right:
        b = entity_picker(kg, cat, "To entity", "b")
    cols = st.columns([3, 0.8, 0.8, 2.4], vertical_alignment="bottom")
    query = cols[0].text_input("Rank by question (optional)", key="pq", max_chars=500, bind="query-params",
                               placeholder="e.g. how does pricing affect demand?",
                               help="Among paths of equal length, prefer those whose relations read like this")
    link_params.render([link_params.check(P["k"]), link_params.check(P["hops"])])
    k = cols[1].number_input("Paths (k)", 1, MAX_K, 5, key="k", bind="query-params")
    hops = cols[2].number_input("Max hops", 1, MAX_HOPS, 4, key="hops", bind="query-params")
    rels = cols[3].multiselect("Relation types", cat.relation_types, key="w-rels", placeholder="All relation types",
                               format_func=clean)
    if a is None or b is None:
        return None
    if a == b:
        st.warning("Pick two different entities.", icon=":material/info:")
        return None
    return WhyParams(a, b, query.strip(), int(k), int(hops), tuple(rels))


def why_query(result: PathResult) -> str:
    """The question path grades are stored for: the one typed, else `How is A connected to B?`."""
    return result.query or f"How is {result.source.name} connected to {result.target.name}?"


def path_id(path: GraphPath) -> str:
    return path_item_id([n.id for n in path.nodes], [e.id for e in path.edges])


def path_rows(result: PathResult) -> list[GradeRow]:
    """Ranked paths as gradable rows: the whole path text, its hops and sources, its scores."""
    query = why_query(result)
    rows = []
    for i, p in enumerate(result.paths, 1):
        scores = [("score", f"{p.score:.3f}"), ("PPR mass", f"{p.ppr_mass:.4f}")]
        if p.query_similarity is not None:
            scores.append(("query sim.", f"{p.query_similarity:.3f}"))
        rows.append(GradeRow(
            key=f"{i}|{path_id(p)}", query=query, item_id=path_id(p), text=readable(path_steps(p.nodes, p.edges)),
            rank=str(i),
            tags=(Tag(f"{p.hops} hop{'s' if p.hops != 1 else ''}"),),
            meta=f"{len(p.chunk_ids)} source chunk{'s' if len(p.chunk_ids) != 1 else ''}", scores=tuple(scores),
        ))
    return rows


def render_paths_table(result: PathResult, key: str, target: GradeTarget) -> int | None:
    """Ranked paths as a grading list; picking one (click or Enter) returns its index."""
    st.caption(f"Grades are stored for the question “{md_literal(why_query(result))}”.")
    return rank_of(render_grader(path_rows(result), key=key, target=target, selectable=True), len(result.paths))


def render_path_detail(index: int, path: GraphPath, chunks: Mapping[str, Chunk]) -> None:
    with st.container(border=True, key="picked-path"):
        sim = "" if path.query_similarity is None else f" · query {path.query_similarity:.3f}"
        st.markdown(f"**Path #{index + 1}** · {path.hops} hop{'s' if path.hops != 1 else ''} · "
                    f"score {path.score:.3f} · PPR {path.ppr_mass:.4f}{sim} — highlighted in the graph")
        st.markdown(steps_markdown(path_steps(path.nodes, path.edges)))
        if not path.chunk_ids:
            st.caption("No source chunk is recorded for these relations.")
        for n, cid in enumerate(path.chunk_ids):
            c = chunks.get(cid)
            where = " › ".join(md_literal(x) for x in (c.original_document, c.chapter) if x) if c else ""
            with st.expander(where or md_literal(cid), expanded=n == 0, icon=":material/menu_book:"):
                st.markdown(quote(c.text) if c else f"chunk {md_literal(cid)} not found in DocumentChunks")


def as_facts(result: PathResult) -> list[VerbalizedFact]:
    """Paths as VerbalizedFacts, so that the Search page's source grouping applies unchanged."""
    return [VerbalizedFact(id=path_id(p), type="local", text=p.text, steps=path_steps(p.nodes, p.edges),
                           sources=p.sources, chunk_ids=p.chunk_ids)
            for p in result.paths]


def render_path_sources(result: PathResult, chunks: dict[str, Chunk]) -> None:
    """Book → chapter → chunk text, with the paths citing each chunk."""
    groups = group_sources(as_facts(result), chunks)
    if not groups:
        st.info("No source text: these paths cite no source chunks.")
        return
    for g in groups:
        by = f" — {md_literal(g.author)}" if g.author else ""
        st.markdown(f"##### :material/menu_book: {md_literal(g.book)}{by}")
        for chapter, cites in g.chapters.items():
            st.markdown(f"**{md_literal(chapter)}**")
            for cite in cites:
                label = f"{md_literal(short(cite.chunk_id, 48))} · path {', '.join(f'#{i + 1}' for i in cite.facts)}"
                with st.expander(label):
                    st.markdown(quote(cite.chunk.text) if cite.chunk else "chunk text not found")


def path_marks(result: PathResult, picked: int | None) -> GraphMarks:
    path = result.paths[picked] if picked is not None else None
    return GraphMarks.of(
        seeds=[result.source.id, result.target.id],
        focus_nodes=[n.id for n in path.nodes] if path else (),
        focus_edges=[e.id for e in path.edges] if path else (),
    )


def paths_summary(result: PathResult) -> str:
    if not result.paths:
        return (f"No path between **{md_literal(result.source.name)}** and **{md_literal(result.target.name)}** "
                f"within {result.max_hops} hops.")
    hops = sorted({p.hops for p in result.paths})
    span = f"{hops[0]}" if len(hops) == 1 else f"{hops[0]}–{hops[-1]}"
    return (f"**{len(result.paths)} path{'s' if len(result.paths) > 1 else ''}** between "
            f"**{md_literal(result.source.name)}** and **{md_literal(result.target.name)}** · {span} hops · "
            f"{result.candidates} candidates ranked · {len(result.subgraph.nodes)} entities")


def path_chunk_ids(result: PathResult) -> tuple[str, ...]:
    return tuple(dict.fromkeys(c for p in result.paths for c in p.chunk_ids))


# --- the two layouts --------------------------------------------------------------------------


def stem(*parts: str) -> str:
    """A safe download file name stem from entity names."""
    return slug("-".join(parts), 64, "subgraph")


def _toolbar(summary: str) -> tuple[Any, Any]:
    """The summary line, and the slots for Export and its saved notice (filled once the view is drawn)."""
    head, tool = st.columns([6, 1], vertical_alignment="center")
    head.markdown(summary)
    return tool, st.container()


def _export(memory: Callable[[], GraphMemory], slots: tuple[Any, Any], subgraph: Subgraph, key: str,
            **export: Any) -> None:
    tool, notice = slots
    with tool:
        export_popover(memory, subgraph, key=key, **export)
    with notice:
        saved_notice(subgraph, key=key)


def render_explore(memory: Callable[[], GraphMemory], live: LiveGraph, cat: EntityCatalog,
                   params: ExploreParams) -> None:
    """Summary and export on top; the graph left; expansion controls, history and the entity table right (an
    export is saved to the Graph Memory `memory` opens)."""
    kg = live.kg
    hist = history_for(params)
    view = explore_view(live, params, hist)
    start = view.base.subgraph.nodes[0].name  # BFS order: the start comes first
    slots = _toolbar(explore_summary(view))
    render_warnings(warnings_of(view.base, *view.steps))
    left, right = st.columns([13, 8], gap="medium")
    with right:
        picked = render_history(hist, cat, view)
        render_view_table(view, hist)
    with left:
        _, shown = draw_view(view.subgraph, explore_marks(params, hist, view, picked), EXPLORE_ROLES,
                             max_nodes=min(max(len(view.subgraph.nodes), 1), 1000), height=640, live=live,
                             key="kg-paths-explore", hooks=hooks(hist), scene=params.key,
                             base_ids=frozenset(n.id for n in view.base.subgraph.nodes),
                             anchors={node: link[0] for node, link in view.links.items()},
                             stem=stem("neighbourhood", start))
    _export(memory, slots, shown, "explore-export", stem=stem("neighbourhood", start),
            title=f"Neighbourhood of {start}", keywords=suggest_keywords(shown, [start]), tags=["explore"],
            metadata={"source": "paths/explore", "graph": kg.name, "version": kg.version, "start": params.start,
                      "depth": params.depth, "expanded": hist.steps[: hist.pos]})


def render_why(memory: Callable[[], GraphMemory], labels: Callable[[], LabelStore], live: LiveGraph,
               result: PathResult, chunks: dict[str, Chunk]) -> None:
    """Summary and export on top; the paths graph left; ranked paths, the picked one's story and sources right
    (grades go to the label store `labels` opens, an export to the Graph Memory `memory` opens)."""
    kg = live.kg
    a, b = result.source.name, result.target.name
    slots = _toolbar(paths_summary(result))
    render_warnings(result.warnings)
    export = {"stem": stem("paths", a, b), "title": f"Why connected: {a} ↔ {b}", "tags": ["paths"],
              "metadata": {"source": "paths/why", "graph": kg.name, "version": kg.version, "from": result.source.id,
                           "to": result.target.id, "query": result.query, "k": result.k,
                           "max_hops": result.max_hops}}
    if not result.paths:
        _export(memory, slots, result.subgraph, "why-export", keywords=suggest_keywords(result.subgraph, [a, b]),
                **export)
        return
    left, right = st.columns([11, 9], gap="medium")
    with right:
        paths_tab, sources_tab = st.tabs(["Ranked paths", "Sources"])
        with paths_tab:
            picked = render_paths_table(result, key="why-" + result_key(kg.revision, result.source.id,
                                                                      result.target.id, result.query,
                                                                      str(result.k), str(result.max_hops)),
                                        target=grading_target(labels, kg.version))
            if picked is None:
                st.caption("Pick a path to highlight it in the graph and read it hop by hop with its sources.")
            else:
                render_path_detail(picked, result.paths[picked], chunks)
        with sources_tab:
            render_path_sources(result, chunks)
    with left:
        sub = result.subgraph  # its total counts the searched region; here only the paths are drawn
        _, shown = draw_view(sub.model_copy(update={"total_nodes": len(sub.nodes)}), path_marks(result, picked),
                             PATH_ROLES, max_nodes=300, height=600, live=live, key="kg-paths-why", stem=export["stem"])
    _export(memory, slots, shown, "why-export", keywords=suggest_keywords(shown, [a, b]), **export)
