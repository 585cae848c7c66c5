"""The Map: every entity of the graph in one WebGL view (components/assets/map/map.js; semantic zoom in the
browser), with a search, a path question or a traversal lit on it, and the same hands as the live graph view:
a click opens the same details panel (graph_instrument.details, panel.js), a double-click or "Open here" opens
the entity's neighbourhood in the live view (Paths › Explore), and the context actions (path ends, search from
here, its communities) are the live view's own events (graph_instrument.apply_event / navigate)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import streamlit as st

from components import graph_instrument as gi
from components import graph_live
from retrieval.graph.runtime import KG
from retrieval.models import PathResult, SearchResult, Subgraph
from ui_map import MapBody, message
from ui_records import LiveGraph
from ui_text import short

HEIGHT = 720
FEATURES = {"open": True, "paths": True, "search": True, "communities": True, "expand": False}


@dataclass(frozen=True)
class Lights:
    """What a retrieval lights on the map: seeds, destinations, traced paths, and PPR mass as heat."""

    label: str  # said in the status line
    seeds: tuple[str, ...] = ()
    destinations: tuple[str, ...] = ()
    path_nodes: tuple[str, ...] = ()
    path_edges: tuple[tuple[str, str], ...] = ()
    mass: dict[str, float] = field(default_factory=dict)  # entity -> PPR mass, best first

    @property
    def scores(self) -> dict[str, dict[str, float]]:
        """What the details panel shows of each entity."""
        return {"PPR in this search": self.mass} if self.mass else {}


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'s' * (n != 1)}"


def search_lights(result: SearchResult) -> Lights:
    """A search's marks: its seeds, PPR destinations, the traced paths (nodes and hops) and the whole graph's PPR
    mass; a tool mode without PPR lights the entities of its subgraph."""
    nodes = [p.source_node.id for p in result.paths] + [n.id for p in result.paths for n in p.intermediate_nodes] + [
        p.destination_node.id for p in result.paths]
    edges = tuple((e.source_id, e.target_id) for p in result.paths for e in p.edges)
    dests = result.destination_ids or (() if result.seed_ids else tuple(n.id for n in result.subgraph.nodes))
    words = [_count(len(result.seed_ids), "seed"), _count(len(result.destination_ids), "destination"),
             _count(len(result.paths), "traced path")]
    if result.ppr_mass:
        words.append(f"PPR mass on {len(result.ppr_mass):,} entities as heat")
    return Lights(f"Search “{short(result.query, 60)}”: " + ", ".join(words), tuple(result.seed_ids), tuple(dests),
                  tuple(dict.fromkeys(nodes)), edges, dict(result.ppr_mass))


def path_lights(result: PathResult) -> Lights:
    """A why-connected question's marks: both ends as seeds, every path's nodes and hops."""
    nodes = [n.id for p in result.paths for n in p.nodes]
    edges = tuple((e.source_id, e.target_id) for p in result.paths for e in p.edges)
    ends = f"{short(result.source.name, 40)} → {short(result.target.name, 40)}"
    label = f"Paths {ends}: {_count(len(result.paths), 'path')}"
    return Lights(label, (result.source.id, result.target.id), (), tuple(dict.fromkeys(nodes)), edges)


def traversal_lights(start: str, subgraph: Subgraph, name: str) -> Lights:
    """An explored neighbourhood's marks: its start as the seed, the entities reached as destinations."""
    reached = tuple(n.id for n in subgraph.nodes if n.id != start)
    edges = tuple((e.source_id, e.target_id) for e in subgraph.edges)
    return Lights(f"Neighbourhood of {short(name, 60)}: {_count(len(reached), 'entity')} reached", (start,), reached,
                  (), edges)


def _wire(lights: Lights, at: Mapping[str, int]) -> dict[str, Any]:
    """The marks as entity rows of the map (entities the graph does not hold are left out)."""
    def rows(ids: Iterable[str]) -> list[int]:
        return [at[i] for i in ids if i in at]

    return {
        "rev": gi.digest(lights.label, lights.seeds, lights.destinations, lights.path_nodes, lights.path_edges,
                         sorted(lights.mass.items())),
        "label": lights.label, "seeds": rows(lights.seeds), "dest": rows(lights.destinations),
        "path_nodes": rows(lights.path_nodes),
        "path_edges": [[at[a], at[b]] for a, b in lights.path_edges if a in at and b in at],
        "heat": [[at[i], v] for i, v in lights.mass.items() if i in at],
    }


def _on_event(key: str, scene: str, ids: list[str]) -> None:
    """A browser event, its entity row (`idx`) turned into the entity id the live view's events carry."""
    value = st.session_state.get(key)
    event = value.get("event") if isinstance(value, Mapping) else None
    if not isinstance(event, Mapping):
        return
    event = dict(event)
    idx = event.get("idx")
    if isinstance(idx, int) and 0 <= idx < len(ids):
        event["id"] = ids[idx]
    gi.apply_event(gi.state_for(key, scene), event)


def _panel(kg: KG, selected: tuple[str, str], scores: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """The live view's details panel for an entity; on the map each relation's other end is a map row (to centre
    on it), and there is no "N of M neighbours shown" (every entity is on the map)."""
    panel = gi.details(kg, Subgraph(), selected, scores)
    if panel.get("kind") == "node" and "error" not in panel:
        panel["neighbours"] = None
        at = kg.index.id_to_idx
        for r in panel["relations"]:
            r["other_at"] = at.get(r["other_id"])
    return panel


def render_map(body: MapBody, lights: Lights | None, *, live: LiveGraph, key: str = "kg-map",
               height: int = HEIGHT) -> None:
    """Draw the map of `live.kg` (its encoded `body`, app_state.map_body) with `lights`, and answer its events."""
    kg = live.kg
    scene = f"{kg.version}:{body.rev}"
    state = gi.state_for(key, scene)
    if state.nav is not None:
        gi.navigate(kg, state)
    scores = lights.scores if lights else {}
    details = None
    if state.selected:
        memo_key = (scene, state.selected, tuple((k, v.get(state.selected[1])) for k, v in scores.items()))
        memo = st.session_state.get(f"{key}::details")
        if isinstance(memo, tuple) and memo[0] == memo_key:
            details = memo[1]
        else:
            details = _panel(kg, state.selected, scores)
            if "error" not in details:
                st.session_state[f"{key}::details"] = (memo_key, details)
    start = ""
    if state.path_start and state.path_start in kg.index.id_to_idx:
        start = kg.index.arrays.node_names[kg.index.id_to_idx[state.path_start]]
    extra = {
        "details": details,
        "lights": _wire(lights, kg.index.id_to_idx) if lights else None,
        "notice": f"Path start: {short(start, 60)} — right-click another entity: Use as path end" if start else "",
        "seq": state.last_seq,
    }
    view = {"key": key, "height": height, "features": FEATURES, "graph": kg.name}
    graph_live.mount_map(key, message(body, view), extra, partial(_on_event, key, scene, kg.index.arrays.node_ids))
