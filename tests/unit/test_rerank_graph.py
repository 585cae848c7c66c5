"""Graph reranker: α+β validation, PageRank vs networkx, TTL cache, the α/β blend on a small graph."""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import pytest

from retrieval.embedding import Embedder
from retrieval.graph.index import GraphIndex, build_index
from retrieval.models import VerbalizedFact
from retrieval.rerank import GraphReranker, PageRankCache, compute_pagerank
from retrieval.stores.base import EdgeArrays


def arrays(edges: list[tuple[str, str, float]], nodes: list[str], chunks: dict[str, tuple[str, ...]]) -> EdgeArrays:
    pos = {n: i for i, n in enumerate(nodes)}
    return EdgeArrays(
        node_ids=nodes,
        node_names=[n.upper() for n in nodes],
        node_types=["entity"] * len(nodes),
        node_chunks=[chunks.get(n, ()) for n in nodes],
        src=np.array([pos[s] for s, _, _ in edges], dtype=np.int64),
        dst=np.array([pos[t] for _, t, _ in edges], dtype=np.int64),
        weight=np.array([w for _, _, w in edges], dtype=np.float64),
        relation_ids=[f"r{i}" for i in range(len(edges))],
        relation_types=["rel"] * len(edges),
    )


# a hub "h" everyone points at; "d" is dangling; "e" and "f" form a weighted cycle
NODES = ["a", "b", "c", "d", "e", "f", "h"]
EDGES = [("a", "h", 1.0), ("b", "h", 1.0), ("c", "h", 2.0), ("e", "h", 1.0), ("h", "d", 1.0), ("a", "b", 0.5),
         ("e", "f", 3.0), ("f", "e", 1.0), ("c", "a", 1.0)]
CHUNKS = {"h": ("c1",), "d": ("c1",), "e": ("c2",)}


@dataclass
class Graph:
    version: str
    index: GraphIndex
    name: str = "test"


@pytest.fixture
def graph() -> Graph:
    return Graph("v1", build_index(arrays(EDGES, NODES, CHUNKS)))


def fact(
    fid: str, entities: tuple[str, ...] = (), sim: float | None = None, chunks: tuple[str, ...] = ()
) -> VerbalizedFact:
    scores = {"similarity": sim} if sim is not None else {}
    return VerbalizedFact(
        id=fid, type="local", text=f"fact {fid}", scores=scores, entity_ids=entities, chunk_ids=chunks
    )


def test_pagerank_matches_networkx_on_weighted_graph_with_dangling_node(graph: Graph) -> None:
    g = nx.DiGraph()
    g.add_nodes_from(NODES)
    g.add_weighted_edges_from(EDGES)
    expected = nx.pagerank(g, alpha=0.85, tol=1e-12, max_iter=1000, weight="weight")
    ours = compute_pagerank(graph.index, damping=0.85, max_iter=1000, tol=1e-12)
    assert ours.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(ours, [expected[n] for n in NODES], atol=1e-9)
    assert [NODES[i] for i in np.argsort(-ours)] == sorted(NODES, key=lambda n: -expected[n])
    # the same from the raw edge export
    np.testing.assert_allclose(compute_pagerank(graph.index.arrays, 0.85, 1000, 1e-12), ours, atol=1e-12)


def test_pagerank_random_graph_same_ranking_as_networkx() -> None:
    rng = np.random.default_rng(7)
    n = 60
    edges = {(int(s), int(t)) for s, t in rng.integers(0, n, size=(240, 2)) if s != t}
    nodes = [f"n{i}" for i in range(n)]
    triples = [(f"n{s}", f"n{t}", float(rng.uniform(0.1, 2.0))) for s, t in sorted(edges)]
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_weighted_edges_from(triples)
    expected = nx.pagerank(g, alpha=0.85, tol=1e-13, max_iter=2000)
    ours = compute_pagerank(arrays(triples, nodes, {}), 0.85, 2000, 1e-13)
    np.testing.assert_allclose(ours, [expected[x] for x in nodes], atol=1e-9)


def test_pagerank_rejects_bad_damping(graph: Graph) -> None:
    with pytest.raises(ValueError, match="damping"):
        compute_pagerank(graph.index, damping=1.0)


@pytest.mark.parametrize(("alpha", "beta"), [(0.5, 0.6), (1.2, -0.2), (0.0, 0.0)])
def test_alpha_beta_must_sum_to_one(graph: Graph, alpha: float, beta: float) -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        GraphReranker(graph, alpha=alpha, beta=beta)
    GraphReranker(graph, alpha=0.3, beta=0.7 + 5e-7)  # within the 1e-6 tolerance


def test_blend_scores_and_order(graph: Graph) -> None:
    pr = compute_pagerank(graph.index)
    idx = {n: i for i, n in enumerate(NODES)}
    cands = [fact("x", ("a", "b"), 0.9), fact("y", ("h",), 0.2), fact("z", ("e", "zzz-unknown"), 0.5),
             fact("w", (), 0.4, chunks=("c1",)), fact("v", ("not-in-graph",), 0.95)]
    before = [c.model_dump() for c in cands]
    out = GraphReranker(graph, alpha=0.4, beta=0.6).rerank("q", cands, top_k=4)
    assert [c.model_dump() for c in cands] == before  # inputs untouched
    assert len(out.candidates) == 4 and out.warnings == []
    cand_pr = {"x": (pr[idx["a"]] + pr[idx["b"]]) / 2, "y": pr[idx["h"]], "z": pr[idx["e"]],
               "w": (pr[idx["h"]] + pr[idx["d"]]) / 2, "v": 0.0}  # w: entities of chunk c1
    top = max(cand_pr.values())
    sims = {"x": 0.9, "y": 0.2, "z": 0.5, "w": 0.4, "v": 0.95}
    final = {k: 0.4 * sims[k] + 0.6 * cand_pr[k] / top for k in sims}
    assert [c.id for c in out.candidates] == sorted(final, key=lambda k: -final[k])[:4]
    for c in out.candidates:
        assert c.scores["pagerank"] == pytest.approx(cand_pr[c.id])
        assert c.scores["graph_alpha_term"] == pytest.approx(0.4 * sims[c.id])
        assert c.scores["graph_beta_term"] == pytest.approx(0.6 * cand_pr[c.id] / top)
        assert c.scores["graph_score"] == pytest.approx(final[c.id])
        assert c.scores["similarity"] == sims[c.id]


def test_alpha_one_is_similarity_order_and_beta_one_is_pagerank_order(graph: Graph) -> None:
    cands = [fact("x", ("a",), 0.1), fact("y", ("h",), 0.3), fact("z", ("d",), 0.9), fact("u", ("f",), 0.5)]
    base = GraphReranker(graph, alpha=1.0, beta=0.0)
    assert [c.id for c in base.rerank("q", cands, 4).candidates] == ["z", "u", "y", "x"]
    by_pr = base.with_weights(0.0, 1.0)
    assert by_pr.cache is base.cache
    pr = by_pr.rerank("q", cands, 4).candidates
    assert [c.scores["pagerank"] for c in pr] == sorted((c.scores["pagerank"] for c in pr), reverse=True)
    assert pr[0].scores["pagerank_norm"] == 1.0
    assert [c.id for c in pr] != ["z", "u", "y", "x"]


def test_similarity_fallback_embeds_or_warns(graph: Graph, embedder: Embedder) -> None:
    cands = [fact("x", ("a",)), fact("y", ("h",), 0.3)]
    warned = GraphReranker(graph).rerank("q", cands, 2)
    assert any("lack a similarity score" in w for w in warned.warnings)
    scored = GraphReranker(graph, embedder, alpha=1.0, beta=0.0).rerank("fact x", cands, 2)
    assert scored.warnings == []
    x = next(c for c in scored.candidates if c.id == "x")
    q, t = embedder.embed(["fact x", "fact x"])
    assert x.scores["graph_alpha_term"] == pytest.approx(float(q @ t), abs=1e-5)


def test_pagerank_cache_hits_within_ttl_and_expires(graph: Graph) -> None:
    now = [1000.0]
    cache = PageRankCache(ttl_s=60, timer=lambda: now[0])
    rr = GraphReranker(graph, cache=cache)
    first = rr.pagerank()
    assert rr.pagerank() is first and (cache.hits, cache.misses) == (1, 1)
    rr.with_weights(0.5, 0.5).rerank("q", [fact("x", ("a",), 0.1)], 1)  # shares the cache
    assert (cache.hits, cache.misses) == (2, 1)
    now[0] += 61
    again = rr.pagerank()
    assert again is not first and cache.misses == 2
    np.testing.assert_array_equal(again, first)
    other = GraphReranker(Graph("v2", graph.index), cache=cache)  # a new graph version is a new entry
    other.pagerank()
    assert cache.misses == 3
    assert not first.flags.writeable  # shared between sessions: read-only
