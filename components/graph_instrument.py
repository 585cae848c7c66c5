"""The graph as an instrument: one live component per page whose clicks, double-clicks and context actions come
back as events. This module keeps each view's state (selection, expansions with back/forward, hidden and pinned
nodes, a chosen path start), answers the events (details from the engine, neighbours within a budget with
"N of M shown", page switches) and sends the browser the data to draw."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import streamlit as st

from components import graph_edit, graph_live
from components.graph_data import EMPTY, GraphMarks, GraphView, Legend, digest, drawing, ids_of, pick_nodes, status_line
from components.links import paths_params, search_params
from retrieval.errors import NotFoundError, RetrievalError
from retrieval.explore.details import entity_details, relation_details, view_entity_details, view_relation_details
from retrieval.explore.export import merge_subgraphs
from retrieval.graph.runtime import KG
from retrieval.graph.traverse import MAX_BUDGET, neighbour_summary
from retrieval.models import Chunk, EntityDetails, RelationDetails, Subgraph
from ui_records import LiveGraph
from ui_text import clean, entity_label, reading, short, slug

EXPAND_STEP = 20  # neighbours a double-click adds (best-connected first); another adds the next ones
SOURCE_TEXT = 700  # characters of a source chunk shown in the panel


@dataclass(frozen=True)
class Step:
    """One expansion: the node, an optional relation type, and how many rounds of EXPAND_STEP it asks for."""

    node: str
    rel: str | None = None
    rounds: int = 1


@dataclass
class ViewState:
    """One graph view's state in this session; a new scene (another search, another base graph) starts afresh."""

    scene: str
    selected: tuple[str, str] | None = None  # ("node" | "edge", id)
    steps: list[Step] = field(default_factory=list)
    pos: int = 0  # steps[:pos] are applied (Back lowers it, Forward raises it)
    hidden: list[str] = field(default_factory=list)
    pinned: dict[str, tuple[int, int]] = field(default_factory=dict)
    path_start: str | None = None
    nav: tuple[str, str, str] | None = None  # ("paths", a, b) | ("search" | "communities", id, "") for the next run
    last_seq: float = 0.0  # the browser numbers its events increasingly: one already applied is not applied again
    edit: graph_edit.EditState = field(default_factory=graph_edit.EditState)

    @property
    def active(self) -> list[Step]:
        return self.steps[: self.pos]


@dataclass(frozen=True)
class ExpandHooks:
    """A page that owns its expansion history (Paths' Explore): double-click and Back/Forward go to it."""

    expand: Callable[[str], None]
    back: Callable[[], None]
    forward: Callable[[], None]
    can_back: bool
    can_forward: bool


def state_for(key: str, scene: str) -> ViewState:
    slot = f"{key}::state"
    state = st.session_state.get(slot)
    if not isinstance(state, ViewState) or state.scene != scene:
        state = ViewState(scene)
        st.session_state[slot] = state
    return state


def apply_event(state: ViewState, event: Mapping[str, Any], hooks: ExpandHooks | None = None) -> None:
    """Change the view's state by one browser event (select, expand, undo, redo, hide, unhide, pin, unpin,
    path_start, path_end, search, communities, open); unknown events and malformed ids change nothing."""
    kind, node, seq = event.get("type"), event.get("id"), event.get("seq")
    if isinstance(seq, int | float):
        if seq <= state.last_seq:
            return
        state.last_seq = float(seq)
    ok = isinstance(node, str) and node != ""
    if kind == "select":
        what = event.get("kind")
        state.selected = (what, node) if what in ("node", "edge") and ok else None  # type: ignore[assignment]
    elif kind == "expand" and ok:
        rel = event.get("rel") if isinstance(event.get("rel"), str) else None
        state.selected = ("node", node)
        if hooks is not None:
            hooks.expand(node)
            return
        rounds = 1 + sum(1 for s in state.active if s.node == node and s.rel == rel)
        state.steps = [*state.active, Step(node, rel, rounds)]  # a new branch drops the forward history
        state.pos = len(state.steps)
    elif kind in ("undo", "redo"):
        if hooks is not None:
            (hooks.back if kind == "undo" else hooks.forward)()
            return
        state.pos = max(0, state.pos - 1) if kind == "undo" else min(len(state.steps), state.pos + 1)
    elif kind == "hide" and ok:
        if node not in state.hidden:
            state.hidden.append(node)
        if state.selected and state.selected[1] == node:
            state.selected = None
    elif kind == "unhide":
        state.hidden.clear()
    elif kind == "pin" and ok:
        x, y = event.get("x"), event.get("y")
        state.pinned[node] = (int(x), int(y)) if isinstance(x, int | float) and isinstance(y, int | float) else (0, 0)
    elif kind == "unpin" and ok:
        state.pinned.pop(node, None)
    elif kind == "path_start" and ok:
        state.path_start = node
    elif kind == "path_end" and ok:
        if state.path_start and state.path_start != node:
            state.nav = ("paths", state.path_start, node)
        else:
            state.path_start = node  # an end without a start: take it as the start, ask for the other end
    elif kind in ("search", "communities", "open") and ok:
        state.nav = (kind, node, "")


EDIT_EVENTS = frozenset({"edit_node", "edit_edge", "mark", "merge_preview", "merge", "relate_start", "relate",
                         "cancel", "offer_merge"})


def _on_event(key: str, scene: str, hooks: ExpandHooks | None, live: LiveGraph | None = None) -> None:
    value = st.session_state.get(key)
    event = value.get("event") if isinstance(value, Mapping) else None
    if not isinstance(event, Mapping):
        return
    state = state_for(key, scene)
    if event.get("type") in EDIT_EVENTS:
        seq = event.get("seq")
        if not isinstance(seq, int | float) or seq <= state.last_seq:
            return  # an edit is applied once, never replayed by a rerun
        state.last_seq = float(seq)
        if live is not None and live.curation is not None:
            select = graph_edit.handle(live.kg, live.curation, state.edit, event)
            if select is not None:
                state.selected = ("node", select)
        return
    apply_event(state, event, hooks)


# --- expansion ----------------------------------------------------------------------------------


def grow(live: LiveGraph, base: Subgraph, steps: list[Step]) -> tuple[Subgraph, dict[str, str], list[str]]:
    """The base view plus each step's neighbours and every relation among them; the node each new node grew
    from (its anchor); warnings (a node the graph does not hold)."""
    kg = live.kg
    parts, anchors, warnings = [base], {}, []
    seen = {n.id for n in base.nodes}
    for s in steps:
        if s.node not in kg.index.id_to_idx:
            warnings.append(f"{short(s.node, 60)} is not in graph {kg.name}: it cannot be expanded")
            continue
        already = neighbour_summary(kg.index, s.node, seen).shown  # the budget counts them: add STEP new ones
        part = live.expand(s.node, min(already + s.rounds * EXPAND_STEP, MAX_BUDGET), "both",
                           (s.rel,) if s.rel else ())
        for n in part.subgraph.nodes:
            if n.id not in seen:
                anchors[n.id] = s.node
                seen.add(n.id)
        parts.append(part.subgraph)
    if len(parts) == 1:
        return base, anchors, warnings
    merged = merge_subgraphs(parts)
    closing = live.edges(tuple(sorted(n.id for n in merged.nodes)), ())
    return merge_subgraphs([merged], closing.edges), anchors, warnings


# --- details for the panel ----------------------------------------------------------------------


def _source(c: Chunk) -> dict[str, str]:
    return {"id": clean(c.id), "book": clean(c.original_document), "chapter": clean(c.chapter),
            "text": short(reading(c.text), SOURCE_TEXT)}


def node_panel(d: EntityDetails, *, score_words: Mapping[str, float], neighbours: dict[str, Any] | None,
               graph: str) -> dict[str, Any]:
    e = d.entity
    facts = [["degree", f"{d.degree:,} relation{'s' * (d.degree != 1)}" + ("" if d.in_graph else " in this view")]]
    facts += [[k, f"{v:.4f}"] for k, v in score_words.items()]
    if d.relation_types:
        facts.append(["types", ", ".join(f"{clean(t)} {n}" for t, n in list(d.relation_types.items())[:6])])
    facts.append(["id", clean(e.id)])
    return {
        "kind": "node", "id": e.id, "name": clean(e.name), "type": clean(e.type), "description": clean(e.description),
        "aliases": [clean(a) for a in e.aliases], "facts": facts,
        "note": "" if d.in_graph else f"Not in graph {clean(graph)}: described from this view's records.",
        "relations": [{"type": clean(r.relation.relation_type), "other": clean(r.other_name), "other_id": r.other_id,
                       "out": r.outgoing, "desc": short(r.relation.description, 400)} for r in d.relations],
        "relations_total": d.relations_total, "neighbours": neighbours,
        "sources": [_source(c) for c in d.sources], "sources_total": d.sources_total,
    }


def edge_panel(d: RelationDetails, graph: str) -> dict[str, Any]:
    r = d.relation
    facts = [["weight", f"{r.weight:g}"]]
    if r.valid_at or r.invalid_at:
        facts.append(["valid", f"{clean(r.valid_at or '…')} – {clean(r.invalid_at or '…')}"])
    facts.append(["id", clean(r.id)])
    return {
        "kind": "edge", "id": r.id, "type": clean(r.relation_type), "from": clean(d.source.name),
        "to": clean(d.target.name), "description": clean(r.description), "facts": facts,
        "note": "" if d.in_graph else f"Not in graph {clean(graph)}: described from this view's records.",
        "sources": [_source(c) for c in d.sources], "sources_total": d.sources_total,
    }


def details(kg: KG | None, view: Subgraph, selected: tuple[str, str], scores: Mapping[str, Mapping[str, float]],
            live: LiveGraph | None = None, edit: graph_edit.EditState | None = None) -> dict[str, Any]:
    """The panel's data for the selected node or edge: from the engine when the opened graph holds it, else from
    the view's own records; an error line when neither does (a stale selection). With curation (`live`), the
    record's edit block too (revision, history, merge marks and preview, the last edit's outcome)."""
    panel = _details(kg, view, selected, scores)
    if live is not None and live.curation is not None and edit is not None and "error" not in panel and \
            kg is not None and (selected[1] in kg.index.id_to_idx or selected[0] == "edge"):
        a = kg.index.arrays
        names = {i: a.node_names[kg.index.id_to_idx[i]] for i in [*edit.marks, edit.relate_from or ""]
                 if i in kg.index.id_to_idx}
        panel["edit"] = graph_edit.panel(kg, live.curation, edit, selected[0], selected[1], names)
    elif live is not None and live.curation is not None and edit is not None and edit.notice:
        panel["edit_notice"] = [edit.notice, edit.error]
    return panel


def _details(kg: KG | None, view: Subgraph, selected: tuple[str, str], scores: Mapping[str, Mapping[str, float]],
             ) -> dict[str, Any]:
    kind, item = selected
    graph = kg.name if kg is not None else ""
    vectors = kg.vectors if kg is not None else None
    try:
        if kind == "edge":
            try:
                if kg is None:
                    raise NotFoundError(item)
                return edge_panel(relation_details(kg.index, kg.graph, kg.vectors, item), graph)
            except NotFoundError:
                return edge_panel(view_relation_details(view, item, vectors), graph)
        in_graph = kg is not None and item in kg.index.id_to_idx
        d = (entity_details(kg.index, kg.graph, kg.vectors, item) if in_graph and kg is not None
             else view_entity_details(view, item, vectors))
        shown = {n.id for n in view.nodes}
        neighbours = None
        if in_graph and kg is not None:
            s = neighbour_summary(kg.index, item, shown)
            neighbours = {"shown": s.shown, "total": s.total, "rest": list(s.left_by_type.items())[:8]}
        words = {name: float(vals[item]) for name, vals in scores.items() if item in vals}
        return node_panel(d, score_words=words, neighbours=neighbours, graph=graph)
    except (NotFoundError, RetrievalError) as exc:
        return {"kind": kind, "id": item, "error": f"Nothing to show: {clean(exc)}"}


# --- navigation -----------------------------------------------------------------------------------


def navigate(kg: KG, state: ViewState) -> None:
    """Open Paths (both ends chosen, or a neighbourhood to explore: "open"), Communities or Search (from an
    entity); the pending move is cleared first."""
    nav, state.nav = state.nav, None
    if nav is None:
        return
    what, a, b = nav
    names, types = kg.index.arrays.node_names, kg.index.arrays.node_types

    def label(node: str) -> str:
        i = kg.index.id_to_idx.get(node)
        return entity_label(names[i], types[i]) if i is not None else node

    if what == "paths":
        state.path_start = None
        st.switch_page("pages/paths.py", query_params=paths_params(kg.name, label(a), label(b)))
    if what == "open":  # its neighbourhood in the live view, on Paths › Explore
        st.switch_page("pages/paths.py", query_params={"graph": kg.name, "start": label(a)})
    if what == "communities":  # the entity's smallest community opens with it in focus; the rest are listed
        try:
            mine = sorted(kg.communities.of_entity(a), key=lambda c: (c.size, c.level, c.id))
        except RetrievalError:
            mine = []  # the Communities page says what is wrong with the sidecar
        opened = {"community": mine[0].id} if mine else {}
        st.switch_page("pages/communities.py", query_params={"graph": kg.name, "entity": a, **opened})
    i = kg.index.id_to_idx.get(a)
    if i is not None:
        st.switch_page("pages/search.py", query_params=search_params(kg.name, names[i]))


# --- the entry point ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Built:
    """The graph part of a view, kept between reruns: a click changes only the details, not this."""

    graph_json: str  # the payload's graph fields as a JSON object
    shown: GraphView
    view: Subgraph
    status: str
    warnings: tuple[str, ...]


def map_context(kg: KG, view: Subgraph) -> dict[str, Any]:
    """What the graph's Map shares with this view: the stored positions of its entities (when the version has
    its layout)."""
    stored = kg.stored_layout()
    return {"stored": stored.positions([n.id for n in view.nodes]) if stored is not None else None}


def build(subgraph: Subgraph, marks: GraphMarks, state: ViewState, *, live: LiveGraph | None, max_nodes: int,
          legend: Legend, hooks: ExpandHooks | None, base_ids: frozenset[str] | None,
          anchors: Mapping[str, str] | None, cut_note: str, palette: Mapping[str, str] | None = None) -> Built:
    """Base (within the node budget) plus this view's expansions, laid out and turned into the payload's data."""
    base_nodes = pick_nodes(subgraph, marks, max_nodes)
    kept = {n.id for n in base_nodes}
    base = subgraph.model_copy(update={"nodes": tuple(base_nodes), "edges": tuple(
        e for e in subgraph.edges if e.source_id in kept and e.target_id in kept)})
    view, grown, warnings = base, dict(anchors or {}), []
    if live is not None and hooks is None and state.active:
        view, more, warnings = grow(live, base, state.active)
        grown.update(more)
    drawn = drawing(view, marks, max_nodes=len(view.nodes) or 1, legend=legend,
                    base=base_ids if base_ids is not None else frozenset(kept), anchors=grown,
                    palette=palette or (live.colors if live is not None else None),
                    **map_context(live.kg, view) if live is not None else {})
    added = len(view.nodes) - len(base.nodes)
    unique = len({n.id for n in subgraph.nodes})
    shown = replace(drawn.view, total_nodes=max(subgraph.total_nodes, unique) + added)
    extra = [f"{added} added by {len(state.active)} expansion{'s' * (len(state.active) != 1)}"] if added else []
    why = "node budget" if len(base_nodes) < unique else cut_note or "the rest is outside this subgraph"
    status = status_line(shown, why=why, extra=extra)
    graph = {"rev": digest(drawn.payload, sorted(state.hidden), status), **drawn.payload, "hidden": state.hidden,
             "pinned": {k: list(v) for k, v in state.pinned.items()}, "status": status}
    return Built(json.dumps(graph, separators=(",", ":")), shown, view, status, tuple(warnings))


def render(
    subgraph: Subgraph,
    marks: GraphMarks,
    *,
    key: str,
    live: LiveGraph | None = None,
    max_nodes: int = 120,
    height: int = 560,
    legend: Legend | None = None,
    scores: Mapping[str, Mapping[str, float]] | None = None,
    hooks: ExpandHooks | None = None,
    scene: str | None = None,
    base_ids: frozenset[str] | None = None,
    anchors: Mapping[str, str] | None = None,
    cut_note: str = "",
    stem: str = "graph",
    palette: Mapping[str, str] | None = None,
    quiet_labels: bool = False,
) -> tuple[GraphView, Subgraph]:
    """Draw `subgraph` in the live component `key` and answer its events; with `live` (the opened graph) clicks
    show the engine's details, double-clicks expand and the context actions open other pages. Returns what is
    drawn and the view's subgraph (base plus expansions, without hidden nodes: what an export of "the current
    view" holds). `palette`: the graph's type colours for a view without `live` (the schema); `quiet_labels`: label
    only the relations of the node in focus (hovered or selected), for views of many relations between few nodes
    (a schema, a community), whose labels would pile up into a knot."""
    kg = live.kg if live is not None else None
    ids = ids_of(subgraph)
    scene = scene or digest(ids, max_nodes)
    state = state_for(key, scene)
    if kg is not None and state.nav is not None:
        navigate(kg, state)
    legend = legend or Legend()
    sig = digest(scene, ids, max_nodes, [vars(legend)], [sorted(v) for v in vars(marks).values()],
                 [(s.node, s.rel, s.rounds) for s in state.active], state.hidden, sorted(state.pinned),
                 sorted(base_ids or ()), sorted((anchors or {}).items()), cut_note, kg.revision if kg else "",
                 sorted((palette or {}).items()))
    memo = st.session_state.get(f"{key}::built")
    if not (isinstance(memo, tuple) and memo[0] == sig):
        memo = (sig, build(subgraph, marks, state, live=live, max_nodes=max_nodes, legend=legend, hooks=hooks,
                           base_ids=base_ids, anchors=anchors, cut_note=cut_note, palette=palette))
        st.session_state[f"{key}::built"] = memo
    built: Built = memo[1]
    start_name = ""
    if state.path_start:
        start_name = next((n.name for n in built.view.nodes if n.id == state.path_start), state.path_start)
    head = {"key": key, "scene": scene, "height": height, "stem": slug(stem, 64, "graph"), "quiet": quiet_labels,
            "features": {"expand": kg is not None, "paths": kg is not None, "search": kg is not None,
                         "communities": kg is not None,
                         "edit": live is not None and live.curation is not None}}
    graph = json.dumps(head, separators=(",", ":"))[:-1] + "," + built.graph_json[1:]  # one JSON object
    extra = {
        "details": _details_once(key, sig, kg, built.view, state.selected, scores or {}, live, state.edit)
        if state.selected else None,
        "notice": f"Path start: {short(start_name, 60)} — right-click another node: Use as path end"
        if start_name else "; ".join(built.warnings),
        "can_undo": hooks.can_back if hooks else state.pos > 0,
        "can_redo": hooks.can_forward if hooks else state.pos < len(state.steps),
        "seq": state.last_seq,
    }
    graph_live.mount(key, graph.encode("ascii"), extra, partial(_on_event, key, scene, hooks, live))
    st.caption(built.status + " · click a node for details, double-click to expand, right-click for more")
    hidden = set(state.hidden)
    view = built.view
    current = view.model_copy(update={"nodes": tuple(n for n in view.nodes if n.id not in hidden), "edges": tuple(
        e for e in view.edges if e.source_id not in hidden and e.target_id not in hidden)})
    return built.shown, current


def _details_once(key: str, sig: str, kg: KG | None, view: Subgraph, selected: tuple[str, str],
                  scores: Mapping[str, Mapping[str, float]], live: LiveGraph | None = None,
                  edit: graph_edit.EditState | None = None) -> dict[str, Any]:
    """`details`, kept while the view, the selection and the edit state stay the same: a rerun for anything else
    (a grade, a widget) does not query the stores again. A stale-selection error is not kept, so the next run
    retries."""
    item = selected[1]
    memo_key = (sig, selected, tuple((name, vals.get(item)) for name, vals in sorted(scores.items())),
                repr(edit), kg.revision if kg is not None else "")
    memo = st.session_state.get(f"{key}::details")
    if isinstance(memo, tuple) and memo[0] == memo_key:
        return memo[1]  # type: ignore[no-any-return]
    panel = details(kg, view, selected, scores, live, edit)
    if "error" not in panel:
        st.session_state[f"{key}::details"] = (memo_key, panel)
    return panel


def render_empty(message: str) -> GraphView:
    st.info(message)
    return EMPTY
