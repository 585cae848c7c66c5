"""An in-place change of the graph applied to its in-memory index, in time that grows with the change.

`patch_index(index, changes)` gives the index the graph would export after `changes` (same nodes, edges, names,
chunk links; node and edge positions may differ): a removed node or edge is swapped with the last one
(swap-remove), so only the moved rows get new positions; names, chunk links and the helpers cached on the index
(name matcher, relation positions, and whatever a module registered a patcher for) are patched row by row.
Matrices whose structure changed (the CSR adjacency, the edge lookup order) are rebuilt by vectorised scipy /
numpy calls, tens of milliseconds on a million edges; nothing loops in Python over the whole graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from retrieval.graph.index import GraphIndex, relation_positions
from retrieval.models import GraphChanges
from retrieval.stores.base import EdgeArrays


@dataclass(frozen=True)
class IndexDelta:
    """What one patch did, for the patchers of cached helpers (`GraphIndex.cached`)."""

    old: GraphIndex
    order: np.ndarray  # new node position -> old position (-1: a new node)
    renamed: tuple[int, ...]  # new positions whose names or aliases changed (new nodes included)
    rechunked: tuple[int, ...]  # new positions whose chunk links changed (new nodes included)
    dead: tuple[int, ...]  # old positions of removed nodes
    edges_changed: bool  # adjacency (endpoints, weights, edges added or removed) changed
    relation_pos: dict[str, int] = field(default_factory=dict)

    @property
    def nodes_moved(self) -> bool:
        """Whether any surviving node has a new position (then node-indexed arrays must be reordered)."""
        old = self.order[self.order >= 0]
        return len(old) != self.old.n_nodes or bool((old != np.arange(len(old))).any())

    def carry(self, values: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """A per-node array of the old index in the new node order (`fill` for new nodes)."""
        out = np.full(len(self.order), fill, dtype=values.dtype)
        known = self.order >= 0
        out[known] = values[self.order[known]]
        return out


def _swap_remove(columns: list[list], positions: list[int]) -> list[int]:
    """Remove `positions` from every column (lists of equal length) by moving the last row into each hole,
    highest position first. Returns the positions that now hold a moved row."""
    filled = set()
    for pos in sorted(set(positions), reverse=True):
        last = len(columns[0]) - 1
        if pos != last:
            for col in columns:
                col[pos] = col[last]
            filled.add(pos)
        filled.discard(last)
        for col in columns:
            col.pop()
    return sorted(filled)


def patch_index(index: GraphIndex, changes: GraphChanges) -> GraphIndex:
    """The index after `changes` (see the module docstring). Relations touching a removed entity must be
    removed or re-pointed by `changes` too (as `GraphStore.write` requires)."""
    a = index.arrays
    n_old = a.node_ids.__len__()
    # --- nodes -------------------------------------------------------------------------------
    ids, names, types = list(a.node_ids), list(a.node_names), list(a.node_types)
    chunks = list(a.node_chunks)
    aliases: list[tuple[str, ...]] = list(a.node_aliases) if a.node_aliases else [()] * n_old
    order = list(range(n_old))
    id_to_idx = dict(index.id_to_idx)
    dead = sorted({index.id_to_idx[i] for i in changes.delete_entities if i in index.id_to_idx})
    for pos in dead:
        del id_to_idx[ids[pos]]
    for to in _swap_remove([ids, names, types, chunks, aliases, order], dead):
        id_to_idx[ids[to]] = to
    renamed: set[int] = set()
    rechunked: set[int] = set()
    for e in changes.entities:
        found = id_to_idx.get(e.id)
        if found is None:
            pos = id_to_idx[e.id] = len(ids)
            ids.append(e.id)
            names.append(e.name)
            types.append(e.type)
            chunks.append(tuple(e.source_chunks))
            aliases.append(tuple(e.aliases))
            order.append(-1)
            renamed.add(pos)
            rechunked.add(pos)
            continue
        pos = found
        if (names[pos], tuple(aliases[pos])) != (e.name, tuple(e.aliases)):
            renamed.add(pos)
        if tuple(chunks[pos]) != tuple(e.source_chunks):
            rechunked.add(pos)
        names[pos], types[pos], aliases[pos], chunks[pos] = e.name, e.type, tuple(e.aliases), tuple(e.source_chunks)
    moved_nodes = {to for to, old in enumerate(order) if old >= 0 and old != to}
    order_arr = np.asarray(order, dtype=np.int64)
    remap = np.full(n_old, -1, dtype=np.int64)
    known = order_arr >= 0
    remap[order_arr[known]] = np.flatnonzero(known)
    # --- edges -------------------------------------------------------------------------------
    pos_of = relation_positions(index)
    rel_ids, rel_types = list(a.relation_ids), list(a.relation_types)
    src, dst, weight = a.src.copy(), a.dst.copy(), a.weight.astype(np.float64, copy=True)
    if dead or moved_nodes:
        src, dst = remap[src], remap[dst]
    relation_pos = dict(pos_of) if (changes.relations or changes.delete_relations) else pos_of
    gone = sorted({pos_of[i] for i in changes.delete_relations if i in pos_of})
    for rid in changes.delete_relations:
        relation_pos.pop(rid, None)
    edges_changed = bool(gone) or bool(dead) or bool(moved_nodes)
    if gone:
        # swap-remove on the arrays too, so that edge positions move exactly as in the id lists
        cols: list[list] = [rel_ids, rel_types, list(range(len(rel_ids)))]
        filled = _swap_remove(cols, gone)
        kept = np.asarray(cols[2], dtype=np.int64)
        src, dst, weight = src[kept], dst[kept], weight[kept]
        for to in filled:
            relation_pos[rel_ids[to]] = to
    new_src: list[int] = []
    new_dst: list[int] = []
    new_w: list[float] = []
    for r in changes.relations:
        s_at, t_at = id_to_idx[r.source_id], id_to_idx[r.target_id]
        at = relation_pos.get(r.id)
        if at is None:
            relation_pos[r.id] = len(rel_ids)
            rel_ids.append(r.id)
            rel_types.append(r.relation_type)
            new_src.append(s_at)
            new_dst.append(t_at)
            new_w.append(float(r.weight))
            edges_changed = True
            continue
        if (int(src[at]), int(dst[at]), float(weight[at])) != (s_at, t_at, float(r.weight)):
            src[at], dst[at], weight[at] = s_at, t_at, float(r.weight)
            edges_changed = True
        rel_types[at] = r.relation_type
    if new_src:
        src = np.concatenate([src, np.asarray(new_src, dtype=np.int64)])
        dst = np.concatenate([dst, np.asarray(new_dst, dtype=np.int64)])
        weight = np.concatenate([weight, np.asarray(new_w, dtype=np.float64)])
    if len(src) and (src.min() < 0 or dst.min() < 0):
        raise ValueError("a relation still touches a removed entity; remove or re-point it in the same change")
    arrays = EdgeArrays(node_ids=ids, node_names=names, node_types=types, node_chunks=chunks, src=src, dst=dst,
                        weight=weight, relation_ids=rel_ids, relation_types=rel_types, node_aliases=aliases)
    # --- matrices ----------------------------------------------------------------------------
    n = len(ids)
    if edges_changed or n != n_old:
        out = sp.csr_matrix((weight, (src, dst)), shape=(n, n))
        out.sum_duplicates()
        und = (out + out.T).tocsr()
        edge_order = np.lexsort((dst, src)) if len(src) else np.zeros(0, dtype=np.int64)
        edge_keys = src[edge_order].astype(np.int64) * n + dst[edge_order].astype(np.int64)
    else:
        out, und, edge_order, edge_keys = index.out_csr, index.und_csr, index.edge_order, index.edge_keys
    chunk_ids, chunk_to_idx, node_chunk = _patch_chunks(index, order_arr, chunks, rechunked, bool(dead or moved_nodes))
    new = GraphIndex(arrays, id_to_idx, out, und, chunk_ids, chunk_to_idx, node_chunk, edge_order, edge_keys)
    delta = IndexDelta(old=index, order=order_arr, renamed=tuple(sorted(renamed | moved_nodes)),
                       rechunked=tuple(sorted(rechunked | moved_nodes)), dead=tuple(dead),
                       edges_changed=edges_changed, relation_pos=relation_pos)
    for key, helper in index.extras.items():
        patcher = index.patchers.get(key)
        if patcher is None:
            continue
        patched = patcher(helper, new, delta)
        if patched is not None:
            new.extras[key] = patched
            new.patchers[key] = patcher
    new.extras["relation_pos"] = relation_pos
    new.patchers["relation_pos"] = index.patchers.get("relation_pos") or (lambda old, new_index, d: d.relation_pos)
    return new


def _patch_chunks(
    index: GraphIndex, order: np.ndarray, chunks: list[tuple[str, ...]], changed: set[int], moved: bool
) -> tuple[list[str], dict[str, int], sp.csr_matrix]:
    """Chunk columns (new chunks appended) and node-chunk rows (moved rows reordered, changed rows rebuilt)."""
    if not changed and not moved and len(order) == index.n_nodes:
        return index.chunk_ids, index.chunk_to_idx, index.node_chunk
    chunk_ids, chunk_to_idx = index.chunk_ids, index.chunk_to_idx
    fresh = [c for pos in sorted(changed) for c in chunks[pos] if c not in chunk_to_idx]
    if fresh:
        chunk_ids = list(chunk_ids)
        chunk_to_idx = dict(chunk_to_idx)
        for c in dict.fromkeys(fresh):
            chunk_to_idx[c] = len(chunk_ids)
            chunk_ids.append(c)
    n, m = len(order), len(chunk_ids)
    rows = np.where(order >= 0, order, 0)
    base = sp.csr_matrix(index.node_chunk[rows], dtype=np.float64)
    base.resize((n, m))
    mask = np.ones(n)
    mask[order < 0] = 0.0
    mask[list(changed)] = 0.0
    links = [(pos, chunk_to_idx[c]) for pos in sorted(changed) for c in chunks[pos]]
    added = sp.csr_matrix((np.ones(len(links)), ([p for p, _ in links], [c for _, c in links])), shape=(n, m))
    node_chunk = (sp.diags(mask) @ base + added).tocsr()
    node_chunk.data[:] = 1.0
    return chunk_ids, chunk_to_idx, node_chunk
