"""Graph Memory widgets: the shared store and its counters, tenant/namespace scope, the graph list, one stored
graph (render, traverse, contents, export, delete), and the export/save toolbar that Paths (and Search) use."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd
import streamlit as st

from components.graph_roles import TRAVERSAL_ROLES, draw
from components.graph_view import GraphMarks
from components.trace import render_warnings
from retrieval.errors import RetrievalError, ValidationError
from retrieval.explore.export import save_to_memory, stored_subgraph, to_graphml, to_json
from retrieval.explore.memory import GraphMemory, check_id, list_namespaces
from retrieval.graph.traverse import MAX_DEPTH, Direction, chain, path_steps
from retrieval.models import MemoryGraphSummary, MemoryResult, StoredGraph, Subgraph
from ui_records import LiveGraph
from ui_text import clean, md_code, md_literal, result_key, short

DEFAULT = "default"
DIRECTIONS = {"out": "outgoing →", "both": "both ways", "in": "← incoming"}
ALL = "*"
GEN = "memory-gen"  # bumped by every write, so memoised reads of this session see it
COUNTERS = (
    ("graph_memory_searches_total", "Searches"),
    ("graph_memory_retrievals_total", "Retrievals"),
    ("graph_memory_traversals_total", "Traversals"),
)


def generation() -> int:
    return int(st.session_state.get(GEN, 0))


def bump() -> None:
    st.session_state[GEN] = generation() + 1


def once(name: str, params: tuple[Any, ...], call: Callable[[], MemoryResult]) -> MemoryResult:
    """Run a counted store call when its inputs change, not on every rerun (the counters count user actions)."""
    memo = st.session_state.setdefault("memory-memo", {})
    key = (*params, generation())
    if name not in memo or memo[name][0] != key:
        memo[name] = (key, call())
    result: MemoryResult = memo[name][1]
    return result


def split_words(text: str) -> list[str]:
    return list(dict.fromkeys(w.strip() for w in re.split(r"[,;\n]", text) if w.strip()))


# --- counters ---------------------------------------------------------------------------------


def counter_totals(memory: GraphMemory) -> dict[str, float]:
    """Each counter summed over its labels (tenant, namespace, outcome)."""
    totals = {name: 0.0 for name, _ in COUNTERS}
    for sample, value in memory.metrics().items():
        name = sample.split("{", 1)[0]
        if name in totals:
            totals[name] += value
    return totals


def render_counters(memory: GraphMemory) -> None:
    totals = counter_totals(memory)
    for col, (name, label) in zip(st.columns(len(COUNTERS)), COUNTERS, strict=True):
        col.metric(label, f"{totals[name]:.0f}", help=f"`{name}` since the server started, all tenants")


# --- scope and list ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    tenant: str
    namespace: str | None  # None: every namespace of the tenant


def free_tenants(memory: GraphMemory) -> bool:
    """Local mode: any tenant can be typed. Team mode: a user sees only the tenants their grants name."""
    return memory.gate is None or memory.gate.identity.local


def scope_picker(memory: GraphMemory) -> Scope | None:
    """Tenant and namespace from those on disk (team mode: those this user may read), or typed new (local mode); an
    invalid id shows the store's error, a tenant not granted (a crafted link) the refusal."""
    left, right = st.columns(2)
    tenants, free = memory.tenants(), free_tenants(memory)
    wanted = st.query_params.get("tenant")
    if not free and memory.gate is not None and wanted is not None and wanted not in tenants:
        try:  # a link naming a tenant not granted: refused (and logged), then the picker shows one that is
            memory.gate.check("memory_read", tenant=wanted, detail="a link named this tenant")
        except RetrievalError as exc:
            st.warning(md_literal(exc), icon=":material/lock:")
    if not tenants:
        st.info("No graph-memory tenant is granted to you.", icon=":material/lock:")
        return None
    tenant = left.selectbox("Tenant", tenants, index=tenants.index(DEFAULT) if DEFAULT in tenants else 0, key="tenant",
                            bind="query-params", accept_new_options=free,
                            help="Type a new tenant id to start one" if free else "The tenants granted to you")
    try:
        if not free and memory.gate is not None:
            memory.gate.check("memory_read", tenant=str(tenant))
        tenant = check_id("tenant", tenant)
        spaces = [ALL, *sorted({*list_namespaces(memory.root, tenant), DEFAULT})]
    except RetrievalError as exc:
        st.error(md_literal(exc), icon=":material/error:")
        return None
    ns = right.selectbox("Namespace", spaces, index=spaces.index(DEFAULT), key="ns", bind="query-params",
                         accept_new_options=True, format_func=lambda s: "All namespaces" if s == ALL else s)
    if ns != ALL:
        try:
            check_id("namespace", ns)
        except ValidationError as exc:
            st.error(md_literal(exc), icon=":material/error:")
            return None
    return Scope(tenant, None if ns == ALL else str(ns))


def _listing(memory: GraphMemory, scope: Scope) -> MemoryResult:
    """Every graph in scope, newest first, read from the namespace indexes (a listing, not a search)."""
    names = [scope.namespace] if scope.namespace else list_namespaces(memory.root, scope.tenant)
    found: list[MemoryGraphSummary] = []
    for ns in names:
        listed = memory.list_graphs(scope.tenant, ns)
        if not listed.ok:
            return listed
        found.extend(listed.graphs)
    found.sort(key=lambda g: g.created_at, reverse=True)
    return MemoryResult(ok=True, graphs=tuple(found))


def known_tags(memory: GraphMemory, scope: Scope) -> list[str]:
    listed = _listing(memory, scope)
    return sorted({t for g in listed.graphs for t in g.tags})


def find_graphs(memory: GraphMemory, scope: Scope, query: str, tags: Sequence[str]) -> MemoryResult:
    """Keyword/tag search when either is given (counted); otherwise the plain listing (not a search)."""
    if query.strip() or tags:
        return once("search", (scope, query.strip(), tuple(tags)),
                    lambda: memory.search_graphs(scope.tenant, query, scope.namespace, list(tags), limit=100))
    return _listing(memory, scope)


def graphs_frame(graphs: Sequence[MemoryGraphSummary], scores: bool) -> pd.DataFrame:
    rows = [{
        "title": clean(g.title) or "(untitled)", "namespace": g.namespace, "nodes": g.node_count,
        "edges": g.edge_count, "tags": ", ".join(map(clean, g.tags)), "keywords": ", ".join(map(clean, g.keywords)),
        "saved": g.created_at[:19].replace("T", " "), "score": g.score if scores else None, "graph id": g.graph_id,
    } for g in graphs]
    return pd.DataFrame(rows, columns=["title", "namespace", "nodes", "edges", "tags", "keywords", "saved", "score",
                                       "graph id"])


def render_graph_list(graphs: Sequence[MemoryGraphSummary], *, scores: bool, key: str,
                      namespaces: bool = True) -> MemoryGraphSummary | None:
    """The list (node and edge counts); the picked row is opened, and `?gid=` picks one on arrival."""
    if not graphs:
        st.info("No stored graph matches. Save one from **Paths** (Export → Save to Graph Memory).",
                icon=":material/inventory_2:")
        return None
    frame = graphs_frame(graphs, scores)
    wanted = [i for i, g in enumerate(graphs) if g.graph_id == st.query_params.get("gid")]
    event = st.dataframe(
        frame, hide_index=True, on_select="rerun", selection_mode="single-row", key=f"m-list-{key}-{generation()}",
        selection_default={"selection": {"rows": wanted[:1]}} if wanted else None,
        column_order=[c for c in frame.columns if (scores or c != "score") and (namespaces or c != "namespace")],
        height=min(38 + 35 * len(frame), 250),
        column_config={
            "title": st.column_config.TextColumn("title", width=260),
            "nodes": st.column_config.NumberColumn("nodes", width=60),
            "edges": st.column_config.NumberColumn("edges", width=60),
            "score": st.column_config.NumberColumn("score", format="%.2f", width=60,
                                                   help="keyword overlap with the search"),
            "graph id": st.column_config.TextColumn("graph id", width=120),
        },
    )
    rows = list(event.selection.rows) if event is not None and hasattr(event, "selection") else []
    if rows and 0 <= rows[0] < len(graphs):
        st.query_params["gid"] = graphs[rows[0]].graph_id  # the URL names the open graph
        return graphs[rows[0]]
    st.query_params.pop("gid", None)
    st.caption("Pick a graph to open it.")
    return None


# --- one stored graph -------------------------------------------------------------------------


def open_graph(memory: GraphMemory, summary: MemoryGraphSummary) -> StoredGraph | None:
    got = once("get", (summary.tenant, summary.namespace, summary.graph_id),
               lambda: memory.get_graph(summary.tenant, summary.graph_id, summary.namespace))
    if not got.ok or got.graph is None:
        st.error(md_literal(got.error or "cannot read the graph"), icon=":material/error:")
        return None
    return got.graph


def graph_caption(g: StoredGraph) -> str:
    parts = [f"{len(g.nodes)} nodes · {len(g.edges)} edges", f"{md_literal(g.tenant)} / {md_literal(g.namespace)}",
             f"saved {md_literal(g.created_at[:19].replace('T', ' '))}"]
    source = g.metadata.get("source")
    if isinstance(source, str) and source:
        graph = g.metadata.get("graph")
        on = f" on graph {md_literal(graph)}" if isinstance(graph, str) else ""
        parts.append(f"from {md_literal(source)}{on}")
    if g.tags:
        parts.append("tags " + " ".join(md_code(t) for t in g.tags))
    return " · ".join(parts)


def traversal_marks(result: MemoryResult | None) -> GraphMarks:
    t = result.traversal if result is not None and result.ok else None
    if t is None:
        return GraphMarks()
    return GraphMarks.of(seeds=[t.start_id], focus_nodes=[n.id for n in t.subgraph.nodes],
                         focus_edges=[e.id for e in t.subgraph.edges])


def traverse_form(memory: GraphMemory, g: StoredGraph) -> MemoryResult | None:
    """Start node, depth, direction and relation filter; the last traversal of this graph stays shown."""
    names = {n.id: f"{clean(short(n.name, 60))} ({clean(short(n.type, 24))})" for n in g.nodes}
    rels = sorted({e.relation_type for e in g.edges})
    with st.form(f"m-trav-{g.graph_id}", border=False):
        start = st.selectbox("Start node", list(names), format_func=lambda i: names[i])
        c1, c2 = st.columns(2)
        depth = c1.number_input("Depth", 1, MAX_DEPTH, 2)
        direction = c2.selectbox("Direction", ["both", "out", "in"], format_func=lambda d: DIRECTIONS[d])
        chosen = st.multiselect("Relation filter", rels, placeholder="All relation types", format_func=clean)
        go = st.form_submit_button("Traverse", icon=":material/route:", type="primary")
    slot = f"m-trav-result-{g.graph_id}"
    if go and start is not None:
        st.session_state[slot] = memory.traverse_graph(g.tenant, g.graph_id, start, int(depth), chosen or None,
                                                       g.namespace, direction=cast(Direction, direction))
    result: MemoryResult | None = st.session_state.get(slot)
    if result is None:
        st.caption("Traverse from a node to see the paths it reaches; they light up in the graph.")
        return None
    if not result.ok:
        st.error(md_literal(result.error), icon=":material/error:")
        return result
    t = result.traversal
    assert t is not None
    render_warnings(t.warnings)
    st.markdown(f"**{t.showing}** nodes within {t.max_depth} hops of **{md_literal(names.get(t.start_id, ''))}**")
    frame = pd.DataFrame([{"hops": p.hops, "reaches": clean(p.nodes[-1].name),
                           "path": clean(chain(path_steps(p.nodes, p.edges)))} for p in t.paths],
                         columns=["hops", "reaches", "path"])
    st.dataframe(frame, hide_index=True, height=min(38 + 35 * len(frame), 320),
                 column_config={"hops": st.column_config.NumberColumn(width=48),
                                "reaches": st.column_config.TextColumn(width=150)})
    if st.button("Clear traversal", key=f"m-clear-{g.graph_id}", type="tertiary", icon=":material/close:"):
        st.session_state.pop(slot, None)
        st.rerun()
    return result


def render_contents(g: StoredGraph) -> None:
    names = {n.id: n.name for n in g.nodes}
    st.dataframe(pd.DataFrame([{"name": clean(n.name), "type": clean(n.type), "description": clean(n.description)}
                               for n in g.nodes]), hide_index=True, height=240)
    st.dataframe(pd.DataFrame([{"from": clean(names.get(e.source_id, e.source_id)), "relation": clean(e.relation_type),
                                "to": clean(names.get(e.target_id, e.target_id)), "description": clean(e.description)}
                               for e in g.edges], columns=["from", "relation", "to", "description"]),
                 hide_index=True, height=240)


def render_delete(memory: GraphMemory, g: StoredGraph) -> None:
    """Two steps: ask, then confirm (or cancel); the store checks the user's role on the tenant (team mode)."""
    pending = st.session_state.get("m-delete") == g.graph_id
    refusal = memory.gate.permit("memory_delete", tenant=g.tenant).refusal if memory.gate is not None else ""
    if not pending:
        if st.button("Delete this graph…", icon=":material/delete:", key="m-del-ask", help=refusal or None):
            st.session_state["m-delete"] = g.graph_id
            st.rerun()
        return
    st.warning(f"Delete **{md_literal(g.metadata.get('title') or g.graph_id)}** ({len(g.nodes)} nodes) for good?",
               icon=":material/warning:")
    yes, no = st.columns(2)
    if yes.button("Delete", type="primary", icon=":material/delete_forever:", key="m-del-yes"):
        result = memory.delete_graph(g.tenant, g.graph_id, g.namespace)
        st.session_state.pop("m-delete", None)
        if result.ok:
            st.query_params.pop("gid", None)
            bump()
            st.toast(f"Deleted graph {g.graph_id}", icon=":material/delete:")
            st.rerun()
        st.error(md_literal(result.error), icon=":material/error:")
    if no.button("Cancel", key="m-del-no"):
        st.session_state.pop("m-delete", None)
        st.rerun()


def render_stored_graph(memory: GraphMemory, g: StoredGraph, live: LiveGraph | None = None) -> None:
    """The graph on the left; traverse, contents, export and delete on the right. With `live` (the opened graph),
    a click on a node it holds shows the engine's details and a double-click expands it."""
    title = g.metadata.get("title")
    st.markdown(f"#### {md_literal(title if isinstance(title, str) and title else g.graph_id)}")
    st.caption(graph_caption(g))
    left, right = st.columns([11, 9], gap="medium")
    with right:
        trav_tab, contents_tab, export_tab, delete_tab = st.tabs(["Traverse", "Contents", "Export", "Delete"])
        with trav_tab:
            traversal = traverse_form(memory, g)
        with contents_tab:
            render_contents(g)
        with export_tab:
            render_downloads(stored_subgraph(g), dict(g.metadata), f"memory-{g.graph_id}", key=f"m-dl-{g.graph_id}")
        with delete_tab:
            render_delete(memory, g)
    with left:
        draw(stored_subgraph(g), traversal_marks(traversal), TRAVERSAL_ROLES, max_nodes=300, height=600, live=live,
             key="kg-memory", stem=f"memory-{g.graph_id}")


# --- export toolbar (Paths, and Search if it wants it) ----------------------------------------


def render_downloads(subgraph: Subgraph, metadata: Mapping[str, Any], stem: str, *, key: str) -> None:
    one, two = st.columns(2)
    one.download_button("JSON", to_json(subgraph, metadata).encode("utf-8"), file_name=f"{stem}.json",
                        mime="application/json", icon=":material/data_object:", key=f"{key}-json",
                        on_click="ignore", use_container_width=True)
    two.download_button("GraphML", to_graphml(subgraph, metadata), file_name=f"{stem}.graphml",
                        mime="application/graphml+xml", icon=":material/account_tree:", key=f"{key}-graphml",
                        on_click="ignore", use_container_width=True)


def export_popover(memory: Callable[[], GraphMemory], subgraph: Subgraph, *, key: str, stem: str, title: str,
                   keywords: Sequence[str], tags: Sequence[str], metadata: Mapping[str, Any]) -> None:
    """An Export popover: JSON, GraphML, and a form that saves the shown subgraph to Graph Memory (`memory` gives the
    store: in team mode seen through the user's gate, so the tenants offered are those they may write to)."""
    digest = result_key(*(n.id for n in subgraph.nodes), "\x1e", *(e.id for e in subgraph.edges))
    with st.popover("Export", icon=":material/ios_share:", key=f"{key}-pop"):
        st.markdown(f"**Download** the {len(subgraph.nodes)} entities and {len(subgraph.edges)} relations shown")
        render_downloads(subgraph, metadata, stem, key=key)
        st.markdown("**Save to Graph Memory**")
        last_tenant, last_ns = st.session_state.get("memory-last-scope", (DEFAULT, DEFAULT))
        store = memory()
        writable = None if free_tenants(store) else store.tenants("memory_write")
        with st.form(f"{key}-save-{digest}", border=False):  # a new subgraph gets fresh defaults
            name = st.text_input("Title", title, max_chars=200)
            c1, c2 = st.columns(2)
            if writable is None:
                tenant = c1.text_input("Tenant", last_tenant, key=f"{key}-tenant")
            else:  # team mode: only the tenants this user may write to (the store checks again on save)
                tenant = str(c1.selectbox("Tenant", writable, key=f"{key}-tenant", placeholder="none granted",
                                          index=writable.index(last_tenant) if last_tenant in writable else
                                          (0 if writable else None))
                             or "")
            ns = c2.text_input("Namespace", last_ns, key=f"{key}-ns")
            kw = st.text_input("Keywords", ", ".join(keywords), help="Comma-separated; what a search matches")
            tg = st.text_input("Tags", ", ".join(tags), help="Comma-separated; a search can require them")
            save = st.form_submit_button("Save to Graph Memory", type="primary", icon=":material/save:")
    if save:
        result = save_to_memory(store, tenant.strip(), ns.strip(), subgraph, keywords=split_words(kw),
                                tags=split_words(tg), metadata={**metadata, "title": name.strip()})
        st.session_state[f"{key}-saved"] = (digest, result, tenant.strip(), ns.strip())
        if result.ok:
            st.session_state["memory-last-scope"] = (tenant.strip(), ns.strip())
            bump()


def saved_notice(subgraph: Subgraph, *, key: str) -> None:
    """After a save of this very subgraph: its graph_id and a link that opens it on the Graph Memory page."""
    saved = st.session_state.get(f"{key}-saved")
    digest = result_key(*(n.id for n in subgraph.nodes), "\x1e", *(e.id for e in subgraph.edges))
    if saved is None or saved[0] != digest:
        return
    _, result, tenant, ns = saved
    if not result.ok:
        st.error(f"Not saved: {md_literal(result.error)}", icon=":material/error:")
        return
    with st.container(border=True, key=f"{key}-saved-box", horizontal=True, vertical_alignment="center"):
        st.markdown(f":green[:material/check_circle:] Saved to Graph Memory as {md_code(result.graph_id)} "
                    f"in {md_literal(tenant)} / {md_literal(ns)}")
        st.page_link("pages/memory.py", label="Open in Graph Memory", icon=":material/inventory_2:",
                     query_params={"tenant": tenant, "ns": ns, "gid": result.graph_id})
