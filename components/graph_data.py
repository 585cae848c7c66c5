"""What the graph view draws, as data: marks (roles), the node budget, a stable layout, and the JSON payload the
live component receives. Rendering-free, so the pyvis export, the live view and the benchmark share it."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from retrieval.models import Entity, Relation, Subgraph
from ui_palette import PALETTE, color_of, type_key
from ui_text import clean, short

MAX_DRAWN_NODES = 5000  # the live view's own ceiling: beyond it the status line says what is left out
MAX_DRAWN_EDGES = 10_000
EDGE_LENGTH = 120  # px between neighbours in the computed layout
SEED, DEST, ON_PATH, PICKED = 1, 2, 4, 8  # role bits, as graph.js reads them


@dataclass(frozen=True)
class GraphMarks:
    """Which nodes/edges play a role: seeds, PPR destinations, traced paths, and the picked fact (focus)."""

    seeds: frozenset[str] = frozenset()
    destinations: frozenset[str] = frozenset()
    path_nodes: frozenset[str] = frozenset()
    path_edges: frozenset[str] = frozenset()
    focus_nodes: frozenset[str] = frozenset()
    focus_edges: frozenset[str] = frozenset()

    @classmethod
    def of(cls, **ids: Iterable[str]) -> GraphMarks:
        return cls(**{k: frozenset(v) for k, v in ids.items()})

    @property
    def focused(self) -> bool:
        return bool(self.focus_nodes or self.focus_edges)

    def node_roles(self, node_id: str) -> int:
        return ((SEED if node_id in self.seeds else 0) | (DEST if node_id in self.destinations else 0)
                | (ON_PATH if node_id in self.path_nodes else 0) | (PICKED if node_id in self.focus_nodes else 0))

    def edge_roles(self, edge_id: str) -> int:
        return (ON_PATH if edge_id in self.path_edges else 0) | (PICKED if edge_id in self.focus_edges else 0)


@dataclass(frozen=True)
class Legend:
    """The legend's words for each mark, so other pages can say 'start' or 'picked path' (constant text only)."""

    seed: str = "★ seed"
    destination: str = "◆ PPR destination"
    path: str = "◉ dark ring / edge: traced path"
    focus: str = "● orange: picked fact"

    def renamed(self, roles: Mapping[str, str]) -> Legend:
        """The same legend with some words replaced (old word -> new word)."""
        return Legend(**{k: roles.get(v, v) for k, v in vars(self).items()})

    def items(self, marks: GraphMarks) -> list[tuple[str, int]]:
        """(word, role bit) of the marks this view has, so the legend never shows an empty row."""
        have = [(self.seed, SEED, marks.seeds), (self.destination, DEST, marks.destinations),
                (self.path, ON_PATH, marks.path_nodes | marks.path_edges),
                (self.focus, PICKED, marks.focus_nodes | marks.focus_edges)]
        return [(word, bit) for word, bit, ids in have if ids]


@dataclass(frozen=True)
class GraphView:
    """What a drawing shows (and, for the pyvis export, its HTML)."""

    html: str
    shown_nodes: int
    total_nodes: int
    shown_edges: int
    focus_nodes: int
    focus_edges: int
    type_colors: dict[str, str] = field(default_factory=dict)
    left_edges: int = 0  # relations among the shown nodes left out by the edge cap

    @property
    def truncated(self) -> bool:
        return self.shown_nodes < self.total_nodes


EMPTY = GraphView(html="", shown_nodes=0, total_nodes=0, shown_edges=0, focus_nodes=0, focus_edges=0)


def type_colors(nodes: Iterable[Entity], palette: Mapping[str, str] | None = None) -> dict[str, str]:
    """The drawn types, most frequent in the view first (the legend's order), each in its colour: the graph's
    (`palette`, from `ui_palette.type_palette`, so a type keeps it on every page and after an expansion); without
    one (a view of no opened graph), the view's own types by frequency take the palette in order."""
    counts = Counter(type_key(n.type) for n in nodes)
    ordered = sorted(counts, key=lambda t: (-counts[t], t))
    if palette is not None:
        return {t: color_of(t, palette) for t in ordered}
    return {t: PALETTE[i % len(PALETTE)] for i, t in enumerate(ordered)}


def pick_nodes(subgraph: Subgraph, marks: GraphMarks, max_nodes: int) -> list[Entity]:
    """The node budget: focus, seeds, destinations and path nodes first, then the best-connected rest."""
    degree: Counter[str] = Counter()
    for e in subgraph.edges:
        degree[e.source_id] += 1
        degree[e.target_id] += 1

    def rank(n: Entity) -> tuple[int, int, str]:
        tier = (
            0 if n.id in marks.focus_nodes
            else 1 if n.id in marks.seeds
            else 2 if n.id in marks.destinations
            else 3 if n.id in marks.path_nodes
            else 4
        )
        return (tier, -degree[n.id], n.id)

    unique = {n.id: n for n in subgraph.nodes}
    return sorted(unique.values(), key=rank)[:max_nodes]


def kept_edges(subgraph: Subgraph, kept: set[str], cap: int = MAX_DRAWN_EDGES) -> tuple[list[Relation], int]:
    """Edges among the kept nodes (each id once), at most `cap` (marked ones are not preferred: the cap only
    bites on graphs far larger than a reader can follow), and how many the cap left out."""
    seen: set[str] = set()
    out = []
    for r in subgraph.edges:
        if r.source_id in kept and r.target_id in kept and r.id not in seen:
            seen.add(r.id)
            out.append(r)
    return out[:cap], max(0, len(out) - cap)


@lru_cache(maxsize=64)
def layout(node_ids: tuple[str, ...], pairs: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """Positions (px) for the nodes: Fruchterman-Reingold (igraph; its grid variant beyond 300 nodes), from
    seeded random starting points spread over √n (the same graph always gets the same picture; points bunched
    together would put every node in one grid cell: 18 s instead of 0.6 s at 5,000 nodes), scaled so that
    neighbours sit about EDGE_LENGTH apart."""
    import igraph as ig
    import numpy as np

    n = len(node_ids)
    if n == 0:
        return ()
    if n == 1:
        return ((0, 0),)
    graph = ig.Graph(n=n, edges=list(pairs))
    spread = math.sqrt(n)
    start = np.random.default_rng(7).uniform(-spread, spread, size=(n, 2)).tolist()
    coords = graph.layout_fruchterman_reingold(seed=start, niter=500 if n <= 1000 else 300,
                                               grid="grid" if n > 300 else "nogrid").coords
    lengths = sorted(math.dist(coords[a], coords[b]) for a, b in pairs if a != b)
    unit = lengths[len(lengths) // 2] if lengths else 1.0
    scale = EDGE_LENGTH / unit if unit > 0 else EDGE_LENGTH
    return tuple((round(x * scale), round(y * scale)) for x, y in coords)


@dataclass(frozen=True)
class Drawing:
    """One payload for the live component and what it shows."""

    payload: dict[str, Any]
    view: GraphView


def drawing(
    subgraph: Subgraph,
    marks: GraphMarks,
    *,
    max_nodes: int,
    legend: Legend,
    base: frozenset[str] | None = None,
    anchors: Mapping[str, str] | None = None,
    palette: Mapping[str, str] | None = None,
) -> Drawing:
    """Nodes (id, name, type, description, roles, position) and edges (id, ends, type, description, roles) as
    compact JSON-ready data. Nodes of `base` (None: all) get the computed layout; the others (added by an
    expansion) carry the `anchors` node they grew from, and the browser places them around it. `palette`: the
    graph's type colours (`ui_palette`)."""
    nodes = pick_nodes(subgraph, marks, min(max_nodes, MAX_DRAWN_NODES))
    kept = {n.id for n in nodes}
    edges, left_edges = kept_edges(subgraph, kept)
    colors = type_colors(nodes, palette)
    types = list(colors)
    type_at = {t: i for i, t in enumerate(types)}
    rels = sorted({clean(r.relation_type) for r in edges})
    rel_at = {t: i for i, t in enumerate(rels)}
    placed = [n.id for n in nodes if base is None or n.id in base]
    at = {nid: i for i, nid in enumerate(placed)}
    pairs = tuple(sorted({(at[r.source_id], at[r.target_id]) for r in edges
                          if r.source_id in at and r.target_id in at}))
    coords = dict(zip(placed, layout(tuple(placed), pairs), strict=True))
    anchors = anchors or {}
    out_nodes = []
    for n in nodes:
        item: dict[str, Any] = {"i": n.id, "n": short(n.name, 200), "t": type_at[type_key(n.type)],
                                "r": marks.node_roles(n.id)}
        if n.description:
            item["d"] = short(n.description, 300)
        if n.id in coords:
            item["x"], item["y"] = coords[n.id]
        elif n.id in anchors:
            item["a"] = anchors[n.id]
        out_nodes.append(item)
    pair_seen: Counter[tuple[str, str]] = Counter()
    out_edges = []
    for r in edges:
        pair = (min(r.source_id, r.target_id), max(r.source_id, r.target_id))
        item = {"i": r.id, "f": r.source_id, "o": r.target_id, "y": rel_at[clean(r.relation_type)],
                "r": marks.edge_roles(r.id), "k": pair_seen[pair]}
        pair_seen[pair] += 1  # parallel relations between one pair fan out instead of overlapping
        if r.description:
            item["d"] = short(r.description, 300)
        out_edges.append(item)
    payload = {"nodes": out_nodes, "edges": out_edges, "types": [[t, colors[t]] for t in types], "rels": rels,
               "roles": legend.items(marks), "focused": marks.focused}
    total = max(subgraph.total_nodes, len({n.id for n in subgraph.nodes}))
    view = GraphView(html="", shown_nodes=len(nodes), total_nodes=total, shown_edges=len(edges),
                     focus_nodes=len(kept & marks.focus_nodes), focus_edges=sum(1 for r in edges
                                                                               if r.id in marks.focus_edges),
                     type_colors=colors, left_edges=left_edges)
    return Drawing(payload, view)


def digest(*parts: object) -> str:
    """A short content hash (scene and revision ids the browser compares)."""
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        h.update(json.dumps(p, sort_keys=True, default=str).encode("utf-8", "surrogatepass"))
        h.update(b"\x1e")
    return h.hexdigest()


def ids_of(subgraph: Subgraph) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(n.id for n in subgraph.nodes), tuple(e.id for e in subgraph.edges)


def status_line(view: GraphView, *, why: str = "node budget", extra: Sequence[str] = ()) -> str:
    """'N nodes · E relations', or 'Showing N of M nodes (why)' when some are left out, and the edge cap's cut."""
    head = f"Showing {view.shown_nodes} of {view.total_nodes} nodes ({why})" if view.truncated else \
        f"{view.shown_nodes} nodes"
    parts = [head, f"{view.shown_edges} relations"]
    if view.left_edges:
        parts.append(f"{view.left_edges} more relations left out (edge cap {MAX_DRAWN_EDGES:,})")
    return " · ".join([*parts, *extra])


def warm_layout(subgraph: Subgraph) -> None:
    """Lay a subgraph out once, so igraph's slower first call is paid when a graph opens, not in its first view."""
    drawing(subgraph, GraphMarks(), max_nodes=120, legend=Legend())
