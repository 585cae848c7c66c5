"""Duplicate candidates: pairs of entities that are likely one, ranked, each with its evidence.

Candidates come from three cheap blockings, so no pair of the whole graph is compared: the stored entity vectors'
nearest neighbours (`name: description`, the Entities collection: no text is embedded again), entities sharing a
name word, and entities with two or more neighbours in common. Each pair is then scored on four signals:

- names: RapidFuzz, the mean of the token-set ratio (a name inside the other, `CRUZ` in `TAYLOR CRUZ`, scores 1)
  and the token-sort ratio (how much of the longer name the shorter one covers);
- descriptions: cosine of the two stored vectors;
- neighbours: the entities each is related to (the pair itself left out), shared over all, each weighted by
  1/log(2 + its degree) (Adamic & Adar 2003: a rare common neighbour says more than a hub) and shrunk towards 0
  by adding SMOOTH to the whole (one shared neighbour between two leaves is weak evidence);
- sources: the chunks mentioning each, shared over all, weighted by 1/log(2 + entities in the chunk), shrunk the
  same way.

score = 0.3·names + 0.35·descriptions + 0.25·neighbours + 0.1·sources, halved when both types are known and
differ. Names alone do not decide: a person under a first name and under a role has unrelated names but
agreeing descriptions and neighbours. Pairs an analyst marked "not duplicates" are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rapidfuzz import fuzz

from retrieval.curation.compile import UNKNOWN_TYPES
from retrieval.graph.index import STOP_WORDS, GraphIndex, normalise_name
from retrieval.graph.runtime import KG
from retrieval.models import Record
from retrieval.stores.base import ENTITIES

WEIGHTS = {"names": 0.3, "descriptions": 0.35, "neighbours": 0.25, "sources": 0.1}
NEAREST = 10  # vector neighbours asked per entity
MIN_COSINE = 0.5  # a vector neighbour below this is no candidate by itself
MAX_BUCKET = 200  # a name word shared by more entities blocks nothing (too common)
MAX_QUERIES = 5_000  # entities searched for neighbours on a large graph: the best connected ones
MIN_SCORE = 0.35
SMOOTH = 1.0  # added to the weighted union of neighbours / sources


class Evidence(Record):
    """One signal of a candidate pair: its value in [0, 1] and what it rests on."""

    signal: str
    value: float
    detail: str


class Candidate(Record):
    """Two entities that are likely one: `keep` is the proposed survivor (longer name, then more relations)."""

    keep: str
    other: str
    keep_name: str
    other_name: str
    keep_type: str = ""
    other_type: str = ""
    score: float
    evidence: tuple[Evidence, ...] = ()


def _neighbours(index: GraphIndex, i: int) -> set[int]:
    und = index.und_csr
    return set(und.indices[und.indptr[i]:und.indptr[i + 1]].tolist()) - {i}


def _chunks(index: GraphIndex, i: int) -> set[int]:
    nc = index.node_chunk
    return set(nc.indices[nc.indptr[i]:nc.indptr[i + 1]].tolist())


def _overlap(a: set[int], b: set[int], weight: np.ndarray) -> float:
    """Weighted, smoothed Jaccard: sum of weights shared / (sum over the union + SMOOTH)."""
    union = a | b
    if not union:
        return 0.0
    return float(weight[list(a & b)].sum() / (weight[list(union)].sum() + SMOOTH)) if a & b else 0.0


def _chunk_weights(index: GraphIndex) -> np.ndarray:
    """1 / log(2 + entities a chunk mentions), per chunk column."""
    return index.cached("duplicates.chunk_weights",
                        lambda: 1.0 / np.log(2.0 + np.asarray((index.node_chunk != 0).sum(axis=0)).ravel()))


def _blocks(index: GraphIndex, scope: Sequence[int]) -> set[tuple[int, int]]:
    """Pairs sharing a name word (buckets of rare words only) or two or more neighbours."""
    names = index.arrays.node_names
    buckets: dict[str, list[int]] = {}
    for i in range(index.n_nodes):
        for word in set(normalise_name(names[i]).split()):
            if len(word) > 1 and word not in STOP_WORDS:
                buckets.setdefault(word, []).append(i)
    wanted = set(scope)
    pairs: set[tuple[int, int]] = set()
    for members in buckets.values():
        if len(members) > MAX_BUCKET:
            continue
        for a in members:
            if a in wanted:
                pairs.update((min(a, b), max(a, b)) for b in members if b != a)
    und = index.und_csr.astype(bool).astype(np.int32)
    rows = und[list(scope)] if len(scope) else und[:0]
    common = (rows @ und.T).tocoo()  # neighbours in common, scope x all
    for r, c, n in zip(common.row.tolist(), common.col.tolist(), common.data.tolist(), strict=True):
        a = scope[r]
        if n >= 2 and a != c:
            pairs.add((min(a, c), max(a, c)))
    return pairs


def find_duplicates(kg: KG, *, limit: int = 50, min_score: float = MIN_SCORE,
                    entity_ids: Sequence[str] | None = None,
                    not_duplicates: set[tuple[str, str]] | None = None) -> list[Candidate]:
    """The `limit` likeliest duplicate pairs (of `entity_ids`, or the whole graph), best first."""
    with kg.reading():
        return _find(kg, limit, min_score, entity_ids, not_duplicates or set())


def _find(kg: KG, limit: int, min_score: float, entity_ids: Sequence[str] | None,
          refused: set[tuple[str, str]]) -> list[Candidate]:
    index = kg.index
    a = index.arrays
    n = index.n_nodes
    if n < 2:
        return []
    degree = np.diff(index.und_csr.indptr)
    if entity_ids is not None:
        scope = [index.id_to_idx[i] for i in entity_ids if i in index.id_to_idx]
    elif n > MAX_QUERIES:
        scope = np.argsort(-degree, kind="stable")[:MAX_QUERIES].tolist()
    else:
        scope = list(range(n))
    pairs = _blocks(index, scope)
    vecs = kg.vectors.vectors(ENTITIES, [a.node_ids[i] for i in scope])
    cosine: dict[tuple[int, int], float] = {}
    for i, hits in zip(scope, kg.vectors.search(ENTITIES, vecs, NEAREST + 1, payload=False), strict=True):
        for h in hits:
            j = index.id_to_idx.get(h.id)
            if j is None or j == i:
                continue
            key = (min(i, j), max(i, j))
            cosine[key] = max(cosine.get(key, -1.0), float(h.score))
            if h.score >= MIN_COSINE:
                pairs.add(key)
    missing = sorted({i for p in pairs if p not in cosine for i in p})
    if missing:
        stored = dict(zip(missing, kg.vectors.vectors(ENTITIES, [a.node_ids[i] for i in missing]), strict=True))
        for p in pairs:
            if p not in cosine:
                cosine[p] = float(stored[p[0]] @ stored[p[1]])
    out = []
    for i, j in pairs:
        ids = tuple(sorted((a.node_ids[i], a.node_ids[j])))
        if ids in refused:
            continue
        cand = _score(index, i, j, cosine.get((i, j), 0.0), degree)
        if cand.score >= min_score:
            out.append(cand)
    out.sort(key=lambda c: (-c.score, c.keep_name, c.other_name))
    return out[:limit]


def _score(index: GraphIndex, i: int, j: int, cos: float, degree: np.ndarray) -> Candidate:
    a = index.arrays
    ni, nj = a.node_names[i], a.node_names[j]
    # the proposed survivor: the fuller name, then the better connected
    if (len(ni.split()), degree[i], ni) < (len(nj.split()), degree[j], nj):
        i, j, ni, nj = j, i, nj, ni
    key_i, key_j = normalise_name(ni), normalise_name(nj)
    name = (fuzz.token_set_ratio(key_i, key_j) + fuzz.token_sort_ratio(key_i, key_j)) / 200.0
    ngh_i, ngh_j = _neighbours(index, i) - {j}, _neighbours(index, j) - {i}
    shared = sorted(ngh_i & ngh_j, key=lambda k: -degree[k])
    ch_i, ch_j = _chunks(index, i), _chunks(index, j)
    signals = {
        "names": name,
        "descriptions": max(cos, 0.0),
        "neighbours": _overlap(ngh_i, ngh_j, 1.0 / np.log(2.0 + degree)),
        "sources": _overlap(ch_i, ch_j, _chunk_weights(index)),
    }
    score = sum(WEIGHTS[k] * v for k, v in signals.items())
    ti, tj = a.node_types[i], a.node_types[j]
    typed = ti.strip().lower() not in UNKNOWN_TYPES and tj.strip().lower() not in UNKNOWN_TYPES
    if typed and ti != tj:
        score *= 0.5
    inside = set(key_j.split()) <= set(key_i.split())
    evidence = (
        Evidence(signal="names", value=name, detail=(f"{nj!r} is part of {ni!r}" if inside else
                                                     f"name similarity {name:.2f}")),
        Evidence(signal="descriptions", value=signals["descriptions"],
                 detail=f"cosine {cos:.2f} of the stored name+description vectors"),
        Evidence(signal="neighbours", value=signals["neighbours"],
                 detail=f"{len(shared)} of {len(ngh_i | ngh_j)} related entities shared" +
                 (": " + ", ".join(a.node_names[k] for k in shared[:5]) if shared else "")),
        Evidence(signal="sources", value=signals["sources"],
                 detail=f"{len(ch_i & ch_j)} of {len(ch_i | ch_j)} source chunks shared"),
        *([Evidence(signal="types", value=0.0, detail=f"types differ: {ti} / {tj} (score halved)")]
          if typed and ti != tj else []),
    )
    return Candidate(keep=a.node_ids[i], other=a.node_ids[j], keep_name=ni, other_name=nj, keep_type=ti,
                     other_type=tj, score=round(float(score), 4), evidence=evidence)
