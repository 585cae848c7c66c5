"""Where every entity of a graph version sits on its map: computed once per version, stored with it, reused by
every view that draws those entities.

Force-directed and hierarchical, so that communities stay together as regions (`retrieval.graph.communities`):
- the entities of each leaf group (a level-1 community, or a level-0 community's members outside its level-1
  ones) are laid out by Fruchterman-Reingold on the relations inside the group (Fruchterman & Reingold,
  "Graph drawing by force-directed placement", Softw. Pract. Exp. 21, 1991; igraph) in a disc whose area grows
  with the group's size;
- the groups inside a level-0 community, then the level-0 communities themselves, are discs placed the same
  way on the graph of the relations between them (weighted by how many), pushed apart until no two overlap;
  parts of that graph that do not touch are packed around them, largest first (front-chain circle packing).
An entity in no community sits in the region of its most strongly related neighbour that has one; the rest
form unlabelled regions of their own (one per connected group; entities without relations share one).
The same graph always gets the same map (every random start is seeded).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from retrieval.errors import StoreError
from retrieval.models import Community

LAYOUT_FILE = "layout.npz"
SCHEMA = 1  # bump when the stored arrays change meaning: an older file is then computed again
UNIT = 10.0  # layout units per entity spacing: a group of n entities fills a disc of radius UNIT * sqrt(n)
GAP = 0.12  # space between neighbouring discs, as a share of the smaller radius (plus one UNIT)
SEPARATE_MAX = 1000  # discs of one connected part pushed apart pairwise up to this many; beyond, packed
SEED = 7

ProgressFn = Callable[[str, int, int], None]  # (stage, done, total)


@dataclass(frozen=True)
class Region:
    """The disc one community (or one group of entities in none: `id` '') occupies on the map."""

    id: str
    level: int
    parent: int  # index of the level-0 region holding a level-1 one; -1 at level 0
    x: float
    y: float
    r: float
    size: int  # entities placed in it


@dataclass(frozen=True)
class Layout:
    """Positions of every entity of one graph version, and the regions of its communities."""

    node_ids: tuple[str, ...]
    xy: np.ndarray  # float32 (n, 2), in layout units
    region: np.ndarray  # int32 (n,): the level-0 region each entity is placed in (-1: none)
    subregion: np.ndarray  # int32 (n,): its level-1 region (-1: none)
    regions: tuple[Region, ...]
    seconds: float = 0.0
    warnings: tuple[str, ...] = ()
    _at: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def index_of(self) -> dict[str, int]:
        """Entity id -> row of `xy` (built once)."""
        if not self._at and self.node_ids:
            self._at.update((nid, i) for i, nid in enumerate(self.node_ids))
        return self._at

    def positions(self, ids: Sequence[str]) -> dict[str, tuple[float, float]]:
        """Stored (x, y) of the entities among `ids` that the layout holds."""
        at = self.index_of()
        return {i: (float(self.xy[at[i], 0]), float(self.xy[at[i], 1])) for i in ids if i in at}

    def rows(self, ids: Sequence[str]) -> np.ndarray | None:
        """Rows of `xy` for `ids` in their order (another store may export entities in another order); None when
        the layout lacks one of them (it belongs to another version)."""
        at = self.index_of()
        try:
            rows = np.fromiter((at[i] for i in ids), dtype=np.int64, count=len(ids))
        except KeyError:
            return None
        return rows


# --- discs ----------------------------------------------------------------------------------------


def _sunflower(m: int, radius: float) -> np.ndarray:
    """m evenly spread points filling a disc (Vogel's spiral): for entities without relations between them."""
    j = np.arange(m, dtype=np.float64)
    rho = radius * np.sqrt((j + 0.5) / m)
    theta = j * math.pi * (3.0 - math.sqrt(5.0))
    return np.column_stack([rho * np.cos(theta), rho * np.sin(theta)])


# igraph draws its random numbers from one process-wide generator (Python's `random` by default), even when a
# layout starts from given positions: each layout runs under this lock with a generator seeded for it.
_IGRAPH_RNG = threading.Lock()


def force_layout(m: int, pairs: np.ndarray, *, start: np.ndarray | None = None, weights: np.ndarray | None = None,
                 niter: int | None = None, start_temp: float | None = None) -> np.ndarray:
    """Fruchterman-Reingold positions of m nodes joined by `pairs` (igraph; its grid variant beyond 300 nodes),
    from `start` (default: seeded random points spread over √m) and a seeded igraph generator, so the same graph
    always gets the same picture. Also the live graph view's layout (components/graph_data.py)."""
    import random

    import igraph as ig

    graph = ig.Graph(n=m, edges=np.asarray(pairs).reshape(-1, 2).tolist())
    if start is None:
        spread = math.sqrt(m)
        start = np.random.default_rng(SEED).uniform(-spread, spread, size=(m, 2))
    kwargs: dict[str, object] = {"weights": weights.tolist()} if weights is not None else {}
    if start_temp is not None:
        kwargs["start_temp"] = start_temp
    with _IGRAPH_RNG:
        ig.set_random_number_generator(random.Random(SEED))
        try:
            coords = graph.layout_fruchterman_reingold(
                seed=np.asarray(start, dtype=np.float64).tolist(), niter=niter or (300 if m <= 2000 else 150),
                grid="grid" if m > 300 else "nogrid", **kwargs).coords
        finally:
            ig.set_random_number_generator(random)
    return np.asarray(coords, dtype=np.float64)


def _fr(m: int, pairs: np.ndarray, weights: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    spread = math.sqrt(m)
    return force_layout(m, pairs, start=rng.uniform(-spread, spread, size=(m, 2)), weights=weights)


def leaf_layout(m: int, pairs: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Local positions of a group of m entities (their relations as local index pairs) inside a disc centred on
    (0, 0), and the disc's radius."""
    radius = UNIT * math.sqrt(m) if m > 1 else UNIT * 0.5
    if m == 1:
        return np.zeros((1, 2)), radius
    if not len(pairs):
        return _sunflower(m, radius * 0.95), radius
    coords = _fr(m, pairs, None, rng)
    coords -= np.median(coords, axis=0)
    dist = np.hypot(coords[:, 0], coords[:, 1])
    reach = float(np.quantile(dist, 0.9)) or float(dist.max()) or 1.0
    coords *= 0.85 * radius / reach
    dist = np.hypot(coords[:, 0], coords[:, 1])
    far = dist > 0.97 * radius  # outliers (a detached pair) go to the rim, not outside the disc
    coords[far] *= (0.97 * radius / dist[far])[:, None]
    return coords, radius


def _place(b: int, a: int, c: int, x: np.ndarray, y: np.ndarray, r: np.ndarray) -> None:
    """Put disc c against discs a and b (tangent to both)."""
    dx, dy = x[b] - x[a], y[b] - y[a]
    d2 = dx * dx + dy * dy
    if d2 <= 0:
        x[c], y[c] = x[a] + r[c], y[a]
        return
    a2, b2 = (r[a] + r[c]) ** 2, (r[b] + r[c]) ** 2
    if a2 > b2:
        u = (d2 + b2 - a2) / (2 * d2)
        v = math.sqrt(max(0.0, b2 / d2 - u * u))
        x[c], y[c] = x[b] - u * dx - v * dy, y[b] - u * dy + v * dx
    else:
        u = (d2 + a2 - b2) / (2 * d2)
        v = math.sqrt(max(0.0, a2 / d2 - u * u))
        x[c], y[c] = x[a] + u * dx - v * dy, y[a] + u * dy + v * dx


def pack(radii: np.ndarray) -> np.ndarray:
    """Centres for discs packed tightly around (0, 0), largest first, none overlapping: the front-chain
    algorithm of Wang, Wang, Dai & Wang, "Visualization of large hierarchical data by circle packing", CHI 2006
    (as d3-hierarchy's packSiblings places them)."""
    k = len(radii)
    order = np.argsort(-radii, kind="stable")
    r = [float(v) + GAP * float(v) / 2 + UNIT / 2 for v in radii[order]]  # each keeps half the gap around it
    x, y = np.zeros(k), np.zeros(k)
    rr = np.array(r)
    if k >= 2:
        x[0], x[1] = -r[1], r[0]
    if k >= 3:
        _place(1, 0, 2, x, y, rr)
        nxt, prv = [0] * k, [0] * k
        nxt[0], nxt[1], nxt[2] = 1, 2, 0  # the front chain 0 -> 1 -> 2 -> 0
        prv[0], prv[1], prv[2] = 2, 0, 1
        a, b = 0, 1
        i = 3
        while i < k:
            _place(a, b, i, x, y, rr)
            j, m, sj, sm = nxt[b], prv[a], r[b], r[a]
            hit = False
            while True:
                if sj <= sm:
                    if _overlaps(j, i, x, y, rr):
                        b, nxt[a], prv[j] = j, j, a
                        hit = True
                        break
                    sj += r[j]
                    j = nxt[j]
                else:
                    if _overlaps(m, i, x, y, rr):
                        a, nxt[m], prv[b] = m, b, m
                        hit = True
                        break
                    sm += r[m]
                    m = prv[m]
                if j == nxt[m]:
                    break
            if hit:
                continue
            prv[i], nxt[i] = a, b
            nxt[a] = prv[b] = i
            b = i
            best, score = a, _score(a, nxt[a], x, y, rr)
            c = nxt[i]
            while c != b:
                sc = _score(c, nxt[c], x, y, rr)
                if sc < score:
                    best, score = c, sc
                c = nxt[c]
            a, b = best, nxt[best]
            i += 1
    out = np.zeros((k, 2))
    out[order, 0], out[order, 1] = x, y
    return out


def _overlaps(a: int, b: int, x: np.ndarray, y: np.ndarray, r: np.ndarray) -> bool:
    dr = r[a] + r[b] - 1e-6
    return bool(dr > 0 and dr * dr > (x[b] - x[a]) ** 2 + (y[b] - y[a]) ** 2)


def _score(a: int, b: int, x: np.ndarray, y: np.ndarray, r: np.ndarray) -> float:
    """How far the point between two chained discs is from the origin (the chain grows where it is least)."""
    ab = r[a] + r[b]
    dx, dy = (x[a] * r[b] + x[b] * r[a]) / ab, (y[a] * r[b] + y[b] * r[a]) / ab
    return float(dx * dx + dy * dy)


def _separate(centres: np.ndarray, radii: np.ndarray, rounds: int = 80) -> np.ndarray:
    """Push overlapping discs apart (each pair along its centre line, the smaller disc moving more)."""
    c = centres.copy()
    area = radii**2
    need = radii[:, None] + radii[None, :] + GAP * np.minimum(radii[:, None], radii[None, :]) + UNIT
    np.fill_diagonal(need, 0.0)
    for _ in range(rounds):
        delta = c[:, None, :] - c[None, :, :]
        dist = np.hypot(delta[..., 0], delta[..., 1])
        overlap = need - dist
        np.fill_diagonal(overlap, 0.0)
        if (overlap <= 1e-6).all():
            break
        overlap = np.clip(overlap, 0.0, None)
        unit = delta / np.where(dist > 1e-9, dist, 1.0)[..., None]
        same = dist <= 1e-9  # coincident centres: part them along a fixed direction
        unit[same] = (1.0, 0.0)
        share = area[None, :] / (area[:, None] + area[None, :])  # i moves by the other's share
        c += ((overlap * share)[..., None] * unit).sum(axis=1) * 0.55
    return c


def _compact(centres: np.ndarray, radii: np.ndarray, rounds: int = 6) -> np.ndarray:
    """Discs without overlap, then drawn together towards their middle and parted again a few times: the
    arrangement stays, the empty space between linked discs goes."""
    c = _separate(centres, radii)
    for _ in range(rounds):
        middle = (c * (radii**2)[:, None]).sum(axis=0) / (radii**2).sum()
        c = _separate(middle + (c - middle) * 0.8, radii, rounds=40)
    return c


def place_discs(radii: np.ndarray, pairs: np.ndarray, weights: np.ndarray,
                rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """Centres for discs of `radii` joined by weighted `pairs`: each connected part by Fruchterman-Reingold on
    its links (pushed apart until no two overlap, then drawn together), the parts packed around each other.
    Returns the centres around (0, 0) and the radius of a disc enclosing them all."""
    k = len(radii)
    if k == 1:
        return np.zeros((1, 2)), float(radii[0])
    if len(pairs):
        adj = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(k, k))
        n_parts, part = connected_components(adj, directed=False)
    else:
        n_parts, part = k, np.arange(k)
    local = np.zeros((k, 2))
    part_r = np.zeros(n_parts)
    members = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[members], np.arange(n_parts + 1))
    pair_part = part[pairs[:, 0]] if len(pairs) else np.zeros(0, dtype=np.int64)
    pair_order = np.argsort(pair_part, kind="stable")
    pair_bounds = np.searchsorted(pair_part[pair_order], np.arange(n_parts + 1))
    for p in range(n_parts):
        idx = members[bounds[p]: bounds[p + 1]]
        r = radii[idx]
        if len(idx) == 1:
            part_r[p] = r[0]
            continue
        sel = pair_order[pair_bounds[p]: pair_bounds[p + 1]]
        if len(idx) > SEPARATE_MAX:
            c = pack(r)
        else:
            pos = {int(g): j for j, g in enumerate(idx)}
            sub = np.array([[pos[int(a)], pos[int(b)]] for a, b in pairs[sel]], dtype=np.int64)
            c = _fr(len(idx), sub, np.log1p(weights[sel]), rng)
            # linked discs start about touching: the median link as long as the median sum of two radii
            link = np.hypot(*(c[sub[:, 0]] - c[sub[:, 1]]).T)
            want = float(np.median(r[sub[:, 0]] + r[sub[:, 1]]))
            c *= want / max(float(np.median(link)), 1e-9)
            c = _compact(c, r)
        c -= (c * (r**2)[:, None]).sum(axis=0) / (r**2).sum()  # centred on its area-weighted middle
        local[idx] = c
        part_r[p] = float((np.hypot(c[:, 0], c[:, 1]) + r).max())
    offsets = pack(part_r)
    centres = local + offsets[part]
    centres -= (centres * (radii**2)[:, None]).sum(axis=0) / (radii**2).sum()
    return centres, float((np.hypot(centres[:, 0], centres[:, 1]) + radii).max())


# --- the whole graph ------------------------------------------------------------------------------


def _undirected(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct entity pairs (a < b) joined by at least one relation, with their summed positive weights."""
    a = np.minimum(src, dst).astype(np.int64)
    b = np.maximum(src, dst).astype(np.int64)
    keep = a != b
    w = np.where(weight > 0, weight, 1.0)[keep] if len(weight) else np.ones(int(keep.sum()))
    keys, inv = np.unique(a[keep] * n + b[keep], return_inverse=True)
    return np.column_stack([keys // n, keys % n]), np.bincount(inv, weights=w).astype(np.float64)


def _membership(node_ids: Sequence[str], communities: Sequence[Community]) -> tuple[np.ndarray, np.ndarray,
                                                                                     list[Community],
                                                                                     list[Community]]:
    """Each entity's level-0 and level-1 community (indexes into the returned lists; -1 none). A level-1
    community counts only inside its own parent."""
    at = {nid: i for i, nid in enumerate(node_ids)}
    top = np.full(len(node_ids), -1, dtype=np.int64)
    sub = np.full(len(node_ids), -1, dtype=np.int64)
    level0 = [c for c in communities if c.level == 0]
    level1 = [c for c in communities if c.level == 1]
    k0 = {c.id: k for k, c in enumerate(level0)}
    for k, c in enumerate(level0):
        rows = np.fromiter((at.get(e, -1) for e in c.entity_ids), dtype=np.int64)
        rows = rows[rows >= 0]
        rows = rows[top[rows] == -1]
        top[rows] = k
    for k, c in enumerate(level1):
        parent = k0.get(c.parent or "")
        if parent is None:
            continue
        rows = np.fromiter((at.get(e, -1) for e in c.entity_ids), dtype=np.int64)
        rows = rows[rows >= 0]
        rows = rows[(top[rows] == parent) & (sub[rows] == -1)]
        sub[rows] = k
    return top, sub, level0, level1


def _adopt(top: np.ndarray, pairs: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Where each entity is placed: its level-0 community, else that of its most strongly related neighbour
    in one (-1: neither)."""
    place = top.copy()
    if not len(pairs):
        return place
    ends = np.concatenate([pairs, pairs[:, ::-1]])
    w = np.concatenate([weights, weights])
    loose = (top[ends[:, 0]] < 0) & (top[ends[:, 1]] >= 0)
    ends, w = ends[loose], w[loose]
    order = np.lexsort((-w, ends[:, 0]))
    first = np.unique(ends[order, 0], return_index=True)[1]
    chosen = ends[order][first]
    place[chosen[:, 0]] = top[chosen[:, 1]]
    return place


def compute_layout(node_ids: Sequence[str], src: np.ndarray, dst: np.ndarray, weight: np.ndarray,
                   communities: Sequence[Community], progress: ProgressFn | None = None) -> Layout:
    """The map layout of a graph (entities, relations as index arrays, its communities): see the module doc."""
    start = time.perf_counter()
    say = progress or (lambda stage, done, total: None)
    n = len(node_ids)
    rng = np.random.default_rng(SEED)
    if n == 0:
        return Layout((), np.zeros((0, 2), np.float32), np.zeros(0, np.int32), np.zeros(0, np.int32), ())
    say("layout", 0, n)
    pairs, weights = _undirected(n, np.asarray(src), np.asarray(dst), np.asarray(weight, dtype=np.float64))
    top, sub, level0, level1 = _membership(node_ids, communities)
    place = _adopt(top, pairs, weights)
    # entities placed in no community: one region per connected group of them, and one for those alone
    loose = np.flatnonzero(place < 0)
    extra_regions: list[np.ndarray] = []
    if len(loose):
        inside = (place[pairs[:, 0]] < 0) & (place[pairs[:, 1]] < 0) if len(pairs) else np.zeros(0, bool)
        lp = pairs[inside]
        at_loose = np.full(n, -1, dtype=np.int64)
        at_loose[loose] = np.arange(len(loose))
        adj = sp.coo_matrix((np.ones(len(lp)), (at_loose[lp[:, 0]], at_loose[lp[:, 1]])),
                            shape=(len(loose), len(loose)))
        n_parts, part = connected_components(adj, directed=False)
        sizes = np.bincount(part, minlength=n_parts)
        alone = sizes[part] == 1
        groups = [loose[part == p] for p in np.flatnonzero(sizes > 1)]
        if alone.any():
            groups.append(loose[alone])
        for g in groups:
            place[g] = len(level0) + len(extra_regions)
            extra_regions.append(g)
    n_top = len(level0) + len(extra_regions)
    # leaf groups: (top region, level-1 community or -1 for the rest of the top region)
    subs = np.where((sub >= 0) & (top == place), sub, -1)
    leaf_key = place * (len(level1) + 1) + (subs + 1)
    leaves, leaf_of = np.unique(leaf_key, return_inverse=True)
    leaf_top = leaves // (len(level1) + 1)
    leaf_sub = leaves % (len(level1) + 1) - 1
    n_leaves = len(leaves)
    order = np.argsort(leaf_of, kind="stable")
    bounds = np.searchsorted(leaf_of[order], np.arange(n_leaves + 1))
    # relations inside one leaf, grouped by leaf (one sort)
    same = leaf_of[pairs[:, 0]] == leaf_of[pairs[:, 1]] if len(pairs) else np.zeros(0, bool)
    inner = pairs[same]
    inner_leaf = leaf_of[inner[:, 0]]
    inner_order = np.argsort(inner_leaf, kind="stable")
    inner_bounds = np.searchsorted(inner_leaf[inner_order], np.arange(n_leaves + 1))
    local_row = np.zeros(n, dtype=np.int64)
    local_row[order] = np.arange(n) - bounds[leaf_of[order]]
    xy = np.zeros((n, 2))
    leaf_r = np.zeros(n_leaves)
    done = 0
    for f in range(n_leaves):
        rows = order[bounds[f]: bounds[f + 1]]
        lp = inner[inner_order[inner_bounds[f]: inner_bounds[f + 1]]]
        coords, leaf_r[f] = leaf_layout(len(rows), local_row[lp] if len(lp) else np.zeros((0, 2), np.int64), rng)
        xy[rows] = coords
        done += len(rows)
        if f % 64 == 0:
            say("layout", min(done, n - 1), n)
    # leaves inside each top region, then the top regions, each as discs joined by the relations between them
    leaf_pairs, leaf_w = _group_links(leaf_of[pairs[:, 0]], leaf_of[pairs[:, 1]], weights) if len(pairs) else (
        np.zeros((0, 2), np.int64), np.zeros(0))
    leaf_centre = np.zeros((n_leaves, 2))
    top_r = np.full(n_top, UNIT)
    leaf_order = np.argsort(leaf_top, kind="stable")
    leaf_bounds = np.searchsorted(leaf_top[leaf_order], np.arange(n_top + 1))
    leaf_local = np.zeros(n_leaves, dtype=np.int64)  # a leaf's place among the leaves of its top region
    leaf_local[leaf_order] = np.arange(n_leaves) - leaf_bounds[leaf_top[leaf_order]]
    pair_top = leaf_top[leaf_pairs[:, 0]]
    inside_top = np.flatnonzero(pair_top == leaf_top[leaf_pairs[:, 1]])
    inside_top = inside_top[np.argsort(pair_top[inside_top], kind="stable")]
    top_bounds = np.searchsorted(pair_top[inside_top], np.arange(n_top + 1))
    for t in range(n_top):
        ls = leaf_order[leaf_bounds[t]: leaf_bounds[t + 1]]
        if not len(ls):
            continue
        sel = inside_top[top_bounds[t]: top_bounds[t + 1]]
        centres, top_r[t] = place_discs(leaf_r[ls], leaf_local[leaf_pairs[sel]], leaf_w[sel], rng)
        leaf_centre[ls] = centres
    top_pairs, top_w = _group_links(leaf_top[leaf_pairs[:, 0]], leaf_top[leaf_pairs[:, 1]], leaf_w) if len(
        leaf_pairs) else (np.zeros((0, 2), np.int64), np.zeros(0))
    top_centre, _ = place_discs(top_r, top_pairs, top_w, rng)
    leaf_abs = leaf_centre + top_centre[leaf_top]
    xy += leaf_abs[leaf_of]
    # regions: level 0 (communities, then the groups in none), then level 1
    placed = np.bincount(place, minlength=n_top)
    regions = [Region(c.id, 0, -1, float(top_centre[k, 0]), float(top_centre[k, 1]), float(top_r[k]),
                      int(placed[k])) for k, c in enumerate(level0)]
    regions += [Region("", 0, -1, float(top_centre[t, 0]), float(top_centre[t, 1]), float(top_r[t]),
                       len(extra_regions[t - len(level0)])) for t in range(len(level0), n_top)]
    sub_region = np.full(n, -1, dtype=np.int32)
    for leaf in np.flatnonzero(leaf_sub >= 0).tolist():
        child = level1[int(leaf_sub[leaf])]
        sub_region[order[bounds[leaf]: bounds[leaf + 1]]] = len(regions)
        regions.append(Region(child.id, 1, int(leaf_top[leaf]), float(leaf_abs[leaf, 0]), float(leaf_abs[leaf, 1]),
                              float(leaf_r[leaf]), int(bounds[leaf + 1] - bounds[leaf])))
    say("layout", n, n)
    return Layout(tuple(node_ids), xy.astype(np.float32), place.astype(np.int32), sub_region, tuple(regions),
                  seconds=time.perf_counter() - start)


def _group_links(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Relations between different groups, as distinct (low, high) group pairs with summed weights."""
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keep = lo != hi
    if not keep.any():
        return np.zeros((0, 2), np.int64), np.zeros(0)
    m = int(hi.max()) + 1
    keys, inv = np.unique(lo[keep].astype(np.int64) * m + hi[keep], return_inverse=True)
    return np.column_stack([keys // m, keys % m]), np.bincount(inv, weights=w[keep])


# --- stored with the version ----------------------------------------------------------------------


def save_layout(directory: Path, layout: Layout) -> None:
    """Write `layout.npz` into a version directory atomically (a temp file in it, fsync, rename)."""
    directory = Path(directory)
    regions = layout.regions
    meta = {"schema": SCHEMA, "seconds": layout.seconds, "region_ids": [r.id for r in regions]}
    ids = json.dumps(list(layout.node_ids), ensure_ascii=False).encode("utf-8", "surrogatepass")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".layout-", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(
                fh,
                ids=np.frombuffer(ids, dtype=np.uint8),
                meta=np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8),
                xy=layout.xy.astype(np.float32), region=layout.region.astype(np.int32),
                subregion=layout.subregion.astype(np.int32),
                region_level=np.array([r.level for r in regions], dtype=np.int32),
                region_parent=np.array([r.parent for r in regions], dtype=np.int32),
                region_geom=np.array([[r.x, r.y, r.r] for r in regions], dtype=np.float64).reshape(-1, 3),
                region_size=np.array([r.size for r in regions], dtype=np.int64),
            )
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, directory / LAYOUT_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_layout(directory: Path) -> Layout | None:
    """The stored layout of a version (None when it has none, or one of an older schema)."""
    path = Path(directory) / LAYOUT_FILE
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            meta = json.loads(bytes(f["meta"]).decode("utf-8"))
            if meta.get("schema") != SCHEMA:
                return None
            ids = json.loads(bytes(f["ids"]).decode("utf-8", "surrogatepass"))
            geom, level, parent, size = f["region_geom"], f["region_level"], f["region_parent"], f["region_size"]
            regions = tuple(Region(rid, int(level[i]), int(parent[i]), float(geom[i, 0]), float(geom[i, 1]),
                                   float(geom[i, 2]), int(size[i])) for i, rid in enumerate(meta["region_ids"]))
            return Layout(tuple(ids), f["xy"], f["region"], f["subregion"], regions,
                          seconds=float(meta.get("seconds", 0.0)))
    except (OSError, ValueError, KeyError) as exc:
        raise StoreError(f"cannot read the stored map layout {path}: {exc}") from exc


def cover(layout: Layout, node_ids: Sequence[str], src: np.ndarray, dst: np.ndarray) -> Layout:
    """`layout` for exactly `node_ids` (in their order), after a curation changed the graph in place: an entity it
    holds keeps its place; a new one (added documents) sits beside its placed neighbours (their mean, nudged by a
    seeded offset so two are not drawn on one spot) in the first one's regions, else on a ring outside the map."""
    at = layout.index_of()
    n = len(node_ids)
    rows = np.fromiter((at.get(i, -1) for i in node_ids), dtype=np.int64, count=n)
    xy = np.zeros((n, 2), dtype=np.float32)
    region = np.full(n, -1, dtype=np.int32)
    subregion = np.full(n, -1, dtype=np.int32)
    known = rows >= 0
    xy[known] = layout.xy[rows[known]]
    region[known] = layout.region[rows[known]]
    subregion[known] = layout.subregion[rows[known]]
    new = np.flatnonzero(~known)
    if len(new):
        rng = np.random.default_rng(SEED)
        extent = float(np.abs(layout.xy).max()) + UNIT if len(layout.xy) else UNIT
        # one pass over the relations: each new entity's placed neighbours (their sum, count and the first one)
        a, b = np.concatenate([src, dst]).astype(np.int64), np.concatenate([dst, src]).astype(np.int64)
        keep = ~known[a] & known[b]
        a, b = a[keep], b[keep]
        total = np.zeros((n, 2), dtype=np.float64)
        np.add.at(total, a, xy[b])
        count = np.bincount(a, minlength=n)
        first = np.full(n, -1, dtype=np.int64)
        ids, pos = np.unique(a, return_index=True)  # each new entity's first placed neighbour, in relation order
        first[ids] = b[pos]
        for k, i in enumerate(new):
            if count[i]:
                xy[i] = total[i] / count[i] + rng.normal(0.0, UNIT / 2, 2)
                region[i], subregion[i] = region[first[i]], subregion[first[i]]
            else:
                angle = 2 * math.pi * k / len(new)
                xy[i] = (extent * math.cos(angle), extent * math.sin(angle))
    return Layout(tuple(node_ids), xy, region, subregion, layout.regions, layout.seconds, layout.warnings)


def covers(layout: Layout, node_ids: Sequence[str]) -> int:
    """How many of `node_ids` the layout lacks."""
    at = layout.index_of()
    return sum(1 for i in node_ids if i not in at)


def layout_for(directory: Path, node_ids: Sequence[str], src: np.ndarray, dst: np.ndarray, weight: np.ndarray,
               communities: Sequence[Community], progress: ProgressFn | None = None,
               base: Layout | None = None) -> Layout:
    """The version's layout (`base`, the one in use, else the stored one) when it covers these entities, or nearly
    (a curation added a few: `cover` places them beside their neighbours, at most a tenth); else computed now and
    stored for the next time (a version directory that cannot be written keeps it in memory only, said in
    `warnings`)."""
    stored = base if base is not None else load_layout(directory)
    if stored is not None:
        missing = covers(stored, node_ids)
        if missing == 0 and len(stored.node_ids) == len(node_ids):
            return stored
        if missing <= max(50, len(node_ids) // 10):
            return cover(stored, node_ids, src, dst)
    layout = compute_layout(node_ids, src, dst, weight, communities, progress)
    try:
        save_layout(directory, layout)
    except OSError as exc:
        return Layout(layout.node_ids, layout.xy, layout.region, layout.subregion, layout.regions, layout.seconds,
                      (f"the map layout could not be stored with the version ({exc.strerror or exc}): it is "
                       "computed again next time",))
    return layout
