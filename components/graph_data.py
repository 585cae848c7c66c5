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


LABEL_CHAR = 7.0  # px per character of a node label (13 px font); labels are cut at 32 characters
LABEL_HEIGHT = 18.0  # px of a label line under its node
NODE_BOX = 24.0  # px a node itself takes
DECLUTTER_MAX = 600  # nodes whose labels are kept apart; beyond, labels only show zoomed in (drawThreshold)
FRAME = (1000.0, 460.0)  # px a graph view about holds: a labelled layout is first scaled to fit it


@lru_cache(maxsize=64)
def layout(node_ids: tuple[str, ...], pairs: tuple[tuple[int, int], ...],
           start: tuple[tuple[float, float], ...] | None = None,
           labels: tuple[int, ...] | None = None) -> tuple[tuple[int, int], ...]:
    """Positions (px) for the nodes, scaled so that neighbours sit about EDGE_LENGTH apart: Fruchterman-Reingold
    (`retrieval.graph.layout.force_layout`, seeded: the same graph always gets the same picture), from the
    graph's stored map positions when `start` gives them (a cooler run that keeps their arrangement: an entity
    sits where the Map has it, its community together), else from random points spread over √n (points bunched
    together would put every node in one grid cell: 18 s instead of 0.6 s at 5,000 nodes). With `labels` (each
    node's label length), nodes are then pushed apart until no two labels overlap (`declutter`)."""
    import numpy as np

    from retrieval.graph.layout import force_layout

    n = len(node_ids)
    if n == 0:
        return ()
    if n == 1:
        return ((0, 0),)
    seed = None
    if start is not None:  # the stored positions, at the scale a random start would have
        seed = np.asarray(start, dtype=np.float64)
        seed -= seed.mean(axis=0)
        reach = float(np.sqrt((seed**2).sum(axis=1).mean())) or 1.0
        seed *= math.sqrt(n) / reach
    coords = force_layout(n, np.asarray(pairs, dtype=np.int64).reshape(-1, 2), start=seed,
                          niter=(150 if seed is not None else 500 if n <= 1000 else 300),
                          start_temp=math.sqrt(n) / 40 if seed is not None else None)
    if seed is not None:  # igraph may hand the picture back turned or mirrored: turn it as the Map has it
        coords = _aligned(coords, seed)
    lengths = sorted(math.dist(coords[a], coords[b]) for a, b in pairs if a != b)
    unit = lengths[len(lengths) // 2] if lengths else 1.0
    scale = EDGE_LENGTH / unit if unit > 0 else EDGE_LENGTH
    if labels is not None and n <= DECLUTTER_MAX:
        # labelled: no bigger than the view holds at full size (a long chain would shrink every label out of
        # sight when fitted), then parted until no two labels overlap, which makes room where it is needed
        # (a few nodes fill it: their relations' labels need the room)
        span = np.ptp(coords, axis=0)
        fit = min(FRAME[0] / max(float(span[0]), 1e-9), FRAME[1] / max(float(span[1]), 1e-9))
        scale = min(fit, scale * 3 if n <= 30 else scale)
        coords = declutter(coords * scale, np.asarray(labels, dtype=np.float64))
    else:
        coords = coords * scale
    return tuple((round(float(x)), round(float(y))) for x, y in coords)


def _aligned(coords: Any, target: Any) -> Any:
    """`coords` rotated (or mirrored) about their middle to match `target` best (orthogonal Procrustes)."""
    import numpy as np

    a = coords - coords.mean(axis=0)
    u, _, vt = np.linalg.svd(a.T @ (target - target.mean(axis=0)))
    return a @ (u @ vt)


def declutter(coords: Any, label_chars: Any, rounds: int = 300) -> Any:
    """Move nodes apart until no two of their boxes (the node and its label under it) overlap: each overlapping
    pair is parted along the axis where they overlap least (a simple overlap removal, stopping when none is
    left); any pair still overlapping after `rounds` is then settled one node at a time, each moved down below
    what it hits."""
    import numpy as np

    c = np.asarray(coords, dtype=np.float64).copy()
    half_w = np.maximum(NODE_BOX, LABEL_CHAR * np.minimum(label_chars, 32)) / 2 + 3
    half_h = (NODE_BOX + LABEL_HEIGHT) / 2 + 2  # every box hangs the same way under its node: centres compare
    rng = np.random.default_rng(7)
    for _ in range(rounds):
        dx = c[:, None, 0] - c[None, :, 0]
        dy = c[:, None, 1] - c[None, :, 1]
        over_x = half_w[:, None] + half_w[None, :] - np.abs(dx)
        over_y = 2 * half_h - np.abs(dy)
        hit = (over_x > 0) & (over_y > 0)
        np.fill_diagonal(hit, False)
        if not hit.any():
            return c
        along_x = over_x < over_y
        same = (dx == 0) & (dy == 0)
        sign_x = np.where(dx == 0, np.where(same, rng.choice([-1.0, 1.0], size=dx.shape), 1.0), np.sign(dx))
        sign_y = np.where(dy == 0, 1.0, np.sign(dy))
        c[:, 0] += np.where(hit & along_x, over_x * sign_x, 0.0).sum(axis=1) * 0.75  # each of the two: half
        c[:, 1] += np.where(hit & ~along_x, over_y * sign_y, 0.0).sum(axis=1) * 0.75
    for i in range(1, len(c)):  # what is left, settled in order: each node below the earlier boxes it hits
        while True:
            hits = (np.abs(c[:i, 0] - c[i, 0]) < half_w[:i] + half_w[i]) & (np.abs(c[:i, 1] - c[i, 1]) < 2 * half_h)
            if not hits.any():
                break
            c[i, 1] = c[:i][hits, 1].max() + 2 * half_h + 0.5  # (the half pixel: rounding must not tie)
    return c


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
    stored: Mapping[str, tuple[float, float]] | None = None,
    palette: Mapping[str, str] | None = None,
) -> Drawing:
    """Nodes (id, name, type, description, roles, position) and edges (id, ends, type, description, roles) as
    compact JSON-ready data. Nodes of `base` (None: all) get the computed layout, from their `stored` map
    positions where the graph has them (`layout`), labels kept apart; the others (added by an expansion) carry
    the `anchors` node they grew from, and the browser places them around it. `palette`: the graph's type colours
    (`ui_palette`)."""
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
    start = None
    if stored and len(placed) > 2 and sum(p in stored for p in placed) * 2 >= len(placed):
        # the stored map positions; a node the map lacks starts where its drawn neighbours are, on average
        start = tuple(_start(placed, pairs, stored))
    labels = tuple(len(short(n.name, 32)) for n in nodes if n.id in at)
    coords = dict(zip(placed, layout(tuple(placed), pairs, start, labels), strict=True))
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
    pair_total = Counter((min(r.source_id, r.target_id), max(r.source_id, r.target_id)) for r in edges)
    out_edges = []
    for r in edges:
        pair = (min(r.source_id, r.target_id), max(r.source_id, r.target_id))
        item = {"i": r.id, "f": r.source_id, "o": r.target_id, "y": rel_at[clean(r.relation_type)],
                "r": marks.edge_roles(r.id), "k": pair_seen[pair]}
        if pair_total[pair] > 1:
            item["K"] = pair_total[pair]  # parallel relations (or loops) of one pair fan out: k of K
        pair_seen[pair] += 1
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


def _start(placed: list[str], pairs: tuple[tuple[int, int], ...],
           stored: Mapping[str, tuple[float, float]]) -> list[tuple[float, float]]:
    known = [stored[p] for p in placed if p in stored]
    centre = (sum(x for x, _ in known) / len(known), sum(y for _, y in known) / len(known))
    out: list[tuple[float, float] | None] = [stored.get(p) for p in placed]
    for i, pos in enumerate(out):
        if pos is None:
            near = [out[b if a == i else a] for a, b in pairs if i in (a, b)]
            near = [q for q in near if q is not None]
            out[i] = (sum(x for x, _ in near) / len(near) + 1.0, sum(y for _, y in near) / len(near) + 1.0) \
                if near else centre
    return [p if p is not None else centre for p in out]


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
