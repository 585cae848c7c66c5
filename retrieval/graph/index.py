"""In-memory CSR view of one graph version, built once from `GraphStore.export_edges()`.

Also the helpers built lazily on it once per version and kept in `GraphIndex.extras`
(`GraphIndex.cached`): the entity-name matcher here, the PPR transition matrices in the search stages.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import ahocorasick
import numpy as np
import scipy.sparse as sp

from retrieval.models import Entity, Relation, Subgraph
from retrieval.stores.base import EdgeArrays, GraphStore

T = TypeVar("T")
# (old value, new index, IndexDelta) -> new value or None; see GraphIndex.cached and retrieval.graph.patch
Patcher = Callable[[Any, "GraphIndex", Any], Any]


@dataclass
class GraphIndex:
    """Entity ids/names by index, CSR adjacency (both directions) and node-chunk incidence."""

    arrays: EdgeArrays
    id_to_idx: dict[str, int]
    out_csr: sp.csr_matrix  # [i, j] = summed weight of edges i -> j
    und_csr: sp.csr_matrix  # symmetric: out + out.T
    chunk_ids: list[str]
    chunk_to_idx: dict[str, int]
    node_chunk: sp.csr_matrix  # [node, chunk] = 1 if the chunk mentions the node
    edge_order: np.ndarray  # edge indexes sorted by (src, dst) for edge lookups
    edge_keys: np.ndarray  # src * n + dst, in edge_order
    extras: dict[str, object] = field(default_factory=dict)  # lazily built helpers, keyed by name
    # how a helper follows an in-place change of the graph (`retrieval.graph.patch`); a helper without one is
    # dropped by a change and built again on its next use
    patchers: dict[str, Patcher] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    def cached(self, key: str, build: Callable[[], T], patch: Patcher | None = None) -> T:
        """`extras[key]`, built by `build()` on first use (once, even with concurrent callers). `patch(old value,
        new index, delta)` derives the value for a changed graph (None: build it again when next used)."""
        if key not in self.extras:
            with self._lock:
                if key not in self.extras:
                    self.extras[key] = build()
                    if patch is not None:
                        self.patchers[key] = patch
        return self.extras[key]  # type: ignore[return-value]

    @property
    def n_nodes(self) -> int:
        return len(self.arrays.node_ids)

    @property
    def n_edges(self) -> int:
        return len(self.arrays.src)

    def edges_between(self, i: int, j: int) -> list[int]:
        """Edge indexes (into arrays.relation_ids) for i -> j or j -> i."""
        hits: list[int] = []
        for s, t in ((i, j), (j, i)):
            key = s * self.n_nodes + t
            lo = np.searchsorted(self.edge_keys, key)
            hi = np.searchsorted(self.edge_keys, key, side="right")
            hits.extend(int(e) for e in self.edge_order[lo:hi])
        return hits


def get_entities(index: GraphIndex, graph: GraphStore, ids: Sequence[str]) -> list[Entity]:
    """`graph.get_entities(ids)`, their chunk links taken from the index (a hub's list is long to read)."""
    out = []
    for e in graph.get_entities(ids, chunks=False):
        i = index.id_to_idx.get(e.id)
        out.append(e.model_copy(update={"source_chunks": tuple(index.arrays.node_chunks[i])}) if i is not None else e)
    return out


def relation_positions(index: GraphIndex) -> dict[str, int]:
    """Relation id -> edge position in the index arrays (built once; an in-place change patches it)."""
    return index.cached("relation_pos", lambda: {rid: e for e, rid in enumerate(index.arrays.relation_ids)},
                        lambda old, new, delta: delta.relation_pos)


def relation_nodes(index: GraphIndex, relation_id: str) -> tuple[int | None, int | None]:
    """(source, target) node indexes of a relation (None, None if the index does not hold it)."""
    pos = relation_positions(index)
    e = pos.get(relation_id)
    return (None, None) if e is None else (int(index.arrays.src[e]), int(index.arrays.dst[e]))


def build_index(arrays: EdgeArrays) -> GraphIndex:
    """Build CSR matrices from the edge export (O(E log E))."""
    n = len(arrays.node_ids)
    id_to_idx = {nid: i for i, nid in enumerate(arrays.node_ids)}
    w = arrays.weight.astype(np.float64) if len(arrays.weight) else np.zeros(0)
    out = sp.csr_matrix((w, (arrays.src, arrays.dst)), shape=(n, n))
    out.sum_duplicates()
    und = (out + out.T).tocsr()
    chunk_ids = sorted({c for cs in arrays.node_chunks for c in cs})
    chunk_to_idx = {c: i for i, c in enumerate(chunk_ids)}
    rows = [i for i, cs in enumerate(arrays.node_chunks) for _ in cs]
    cols = [chunk_to_idx[c] for cs in arrays.node_chunks for c in cs]
    node_chunk = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, len(chunk_ids)))
    node_chunk.data[:] = 1.0
    order = np.lexsort((arrays.dst, arrays.src)) if len(arrays.src) else np.zeros(0, dtype=np.int64)
    keys = arrays.src[order].astype(np.int64) * n + arrays.dst[order].astype(np.int64)
    return GraphIndex(arrays, id_to_idx, out, und, chunk_ids, chunk_to_idx, node_chunk, order, keys)


# --- entity-name matching -----------------------------------------------------------------------

_NON_WORD = re.compile(r"[\W_]+")
# Words that are never entity mentions on their own (question words, pronouns, determiners, auxiliaries).
STOP_WORDS = frozenset(
    """a an the this that these those who whom whose what which when where why how is are was were be been
    being am do does did done have has had of in on at to for from by with about as into onto than then
    and or not no nor but if so it its he she him her his hers they them their theirs we us our you your
    i me my mine one ones there here can could would should will shall may might must also all any some
    other such same own more most many much very just only s t""".split()
)


def normalise_name(text: str) -> str:
    """Lower-case, accents folded, any non-alphanumeric run to one space (HippoRAG's phrase normalisation,
    Unicode-aware: "Aschenbrödel" and "Aschenbrodel" match)."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text).lower() if not unicodedata.combining(c))
    return " ".join(_NON_WORD.sub(" ", folded).split())


@dataclass(frozen=True)
class Mention:
    """An entity name (or alias) found in a text, as a span of the normalised text."""

    idx: int  # node index
    name: str  # the normalised name matched
    start: int
    end: int


@dataclass
class NameMatcher:
    """Aho-Corasick automaton over normalised entity names and aliases, matched on word boundaries."""

    automaton: ahocorasick.Automaton | None

    def find(self, text: str) -> list[Mention]:
        """Maximal mentions in `text`: a match inside a longer match is dropped; stop words never match."""
        if self.automaton is None:
            return []
        padded = f" {normalise_name(text)} "
        found: list[Mention] = []
        for end, (name, nodes) in self.automaton.iter(padded):
            start = end - len(name) - 1  # the pattern is " name ", so boundaries are spaces
            found.extend(Mention(idx, name, start, end - 1) for idx in nodes)
        # A span lies inside another iff an earlier one, in (start, longest first) order, reaches its end:
        # one sort instead of comparing every pair (names nested like "a", "a a", ... made that quadratic).
        inner: set[tuple[int, int]] = set()
        reach = -1
        for start, end in sorted({(m.start, m.end) for m in found}, key=lambda span: (span[0], -span[1])):
            if end <= reach:
                inner.add((start, end))
            reach = max(reach, end)
        return sorted((m for m in found if (m.start, m.end) not in inner), key=lambda m: (m.start, m.idx))


def _build_matcher(arrays: EdgeArrays) -> NameMatcher:
    by_name: dict[str, list[int]] = {}
    aliases = arrays.node_aliases or [()] * len(arrays.node_names)
    for i, (name, alts) in enumerate(zip(arrays.node_names, aliases, strict=True)):
        for surface in (name, *alts):
            key = normalise_name(surface)
            if len(key) >= 2 and key not in STOP_WORDS:
                nodes = by_name.setdefault(key, [])
                if not nodes or nodes[-1] != i:
                    nodes.append(i)
    if not by_name:
        return NameMatcher(None)
    automaton = ahocorasick.Automaton()
    for key, nodes in by_name.items():
        automaton.add_word(f" {key} ", (key, tuple(nodes)))
    automaton.make_automaton()
    return NameMatcher(automaton)


def name_matcher(index: GraphIndex) -> NameMatcher:
    """The name matcher of this graph version (built on first use, then cached on the index)."""
    return index.cached("name_matcher", lambda: _build_matcher(index.arrays), patch_matcher)


def _keys(name: str, aliases: tuple[str, ...]) -> set[str]:
    out = set()
    for surface in (name, *aliases):
        key = normalise_name(surface)
        if len(key) >= 2 and key not in STOP_WORDS:
            out.add(key)
    return out


def patch_matcher(matcher: NameMatcher, new: GraphIndex, delta: Any) -> NameMatcher | None:
    """The matcher after an in-place change (`retrieval.graph.patch.IndexDelta`): the changed nodes' words are
    re-pointed in the automaton itself, then its failure links are made again (~20 ms for 100k names)."""
    automaton = matcher.automaton
    if automaton is None:
        return None  # built again on first use
    old = delta.old.arrays
    old_aliases = old.node_aliases or [()] * len(old.node_names)
    touched: dict[str, set[int]] = {}

    def members(key: str) -> set[int]:
        if key not in touched:
            word = f" {key} "
            touched[key] = set(automaton.get(word)[1]) if automaton.exists(word) else set()
        return touched[key]

    changed_new = set(delta.renamed)
    changed_old = set(delta.dead) | {int(delta.order[p]) for p in changed_new if delta.order[p] >= 0}
    for pos in changed_old:
        for key in _keys(old.node_names[pos], tuple(old_aliases[pos])):
            members(key).discard(pos)
    aliases = new.arrays.node_aliases or [()] * new.n_nodes
    for pos in changed_new:
        for key in _keys(new.arrays.node_names[pos], tuple(aliases[pos])):
            members(key).add(pos)
    if not touched:
        return matcher
    for key, nodes in touched.items():
        word = f" {key} "
        if automaton.exists(word):
            automaton.remove_word(word)
        if nodes:
            automaton.add_word(word, (key, tuple(sorted(nodes))))
    automaton.make_automaton()
    return matcher


# --- schema ---------------------------------------------------------------------------------------


SCHEMA_EDGES = 30  # type triples the schema view keeps, most frequent first


def schema(index: GraphIndex, max_edges: int = SCHEMA_EDGES) -> Subgraph:
    """The graph's schema: one node per entity type (description: its entity count) and one edge per
    (source type, relation type, target type) with its relation count, the `max_edges` most frequent."""
    arrays = index.arrays
    if not len(arrays.src):
        return Subgraph()
    types, node_code, type_n = np.unique(np.asarray(arrays.node_types, dtype=object).astype(str),
                                         return_inverse=True, return_counts=True)
    rels, rel_code = np.unique(np.asarray(arrays.relation_types, dtype=object).astype(str), return_inverse=True)
    key = (node_code[arrays.src].astype(np.int64) * len(rels) + rel_code) * len(types) + node_code[arrays.dst]
    keys, counts = np.unique(key, return_counts=True)
    top = np.lexsort((keys, -counts))[:max_edges]
    node = {t: f"type:{t}" for t in types.tolist()}
    edges = []
    for k, n in zip(keys[top].tolist(), counts[top].tolist(), strict=True):
        (s, r), d = divmod(k // len(types), len(rels)), k % len(types)
        src, rel, dst = str(types[s]), str(rels[r]), str(types[d])
        edges.append(Relation(id=f"{src}\x1f{rel}\x1f{dst}", source_id=node[src], target_id=node[dst],
                              relation_type=rel, weight=float(n),
                              description=f"{n:,} relation{'s' * (n != 1)}: {src} {rel} {dst}"))
    used = {e.source_id for e in edges} | {e.target_id for e in edges}
    nodes = tuple(Entity(id=node[t], name=t, type=t, description=f"{n:,} entit{'ies' if n != 1 else 'y'}")
                  for t, n in zip(types.tolist(), type_n.tolist(), strict=True) if node[t] in used)
    return Subgraph(nodes=nodes, edges=tuple(edges), total_nodes=len(types), truncated=len(keys) > max_edges)
