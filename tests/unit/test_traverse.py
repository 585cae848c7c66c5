"""Traversal on a hand-made CSR: budgeted BFS, expansion on a 10k-leaf hub, k shortest simple paths."""

from __future__ import annotations

import time

import numpy as np
import pytest

from retrieval.embedding import Embedder
from retrieval.errors import NotFoundError, ValidationError
from retrieval.graph.index import GraphIndex, build_index
from retrieval.graph.ppr import personalized_pagerank
from retrieval.graph.traverse import bfs, expand, k_shortest_paths, verbalize
from retrieval.stores.base import EdgeArrays


def make_index(edges: list[tuple[str, str, str]], weights: dict[int, float] | None = None) -> GraphIndex:
    """Index from (source, relation type, target) triples; node ids are the names."""
    names = list(dict.fromkeys(n for s, _, t in edges for n in (s, t)))
    pos = {n: i for i, n in enumerate(names)}
    return build_index(
        EdgeArrays(
            node_ids=names,
            node_names=[n.upper() for n in names],
            node_types=["entity"] * len(names),
            node_chunks=[(f"chunk-{n}",) for n in names],
            src=np.array([pos[s] for s, _, _ in edges], dtype=np.int64),
            dst=np.array([pos[t] for _, _, t in edges], dtype=np.int64),
            weight=np.array([(weights or {}).get(i, 1.0) for i in range(len(edges))], dtype=np.float64),
            relation_ids=[f"r{i}" for i in range(len(edges))],
            relation_types=[r for _, r, _ in edges],
        )
    )


# a -> b -> c -> d chain, a branch a -[likes]-> x -> y, and z -> a pointing in
CHAIN = [("a", "knows", "b"), ("b", "knows", "c"), ("c", "knows", "d"), ("a", "likes", "x"), ("x", "knows", "y"),
         ("z", "knows", "a")]


def test_bfs_respects_depth_and_gives_one_shortest_path_to_each_node() -> None:
    index = make_index(CHAIN)
    one = bfs(index, "a", 1)
    assert one.depths == {"a": 0, "b": 1, "x": 1}
    two = bfs(index, "a", 2)
    assert two.depths == {"a": 0, "b": 1, "x": 1, "c": 2, "y": 2}
    assert (two.shown, two.total, two.showing) == (4, 4, "showing 4 of 4")
    paths = {p.nodes[-1].id: p for p in two.paths}
    assert [n.id for n in paths["c"].nodes] == ["a", "b", "c"]
    assert paths["c"].text == "A --[knows]--> B --[knows]--> C"
    assert {e.id for e in two.subgraph.edges} == {"r0", "r1", "r3", "r4"}
    assert bfs(index, "a", 0).depths == {"a": 0}


def test_bfs_direction_and_relation_filter() -> None:
    index = make_index(CHAIN)
    assert set(bfs(index, "a", 3, direction="in").depths) == {"a", "z"}
    both = bfs(index, "a", 1, direction="both")
    assert set(both.depths) == {"a", "b", "x", "z"}
    assert next(p for p in both.paths if p.nodes[-1].id == "z").text == "A <--[knows]-- Z"
    likes = bfs(index, "a", 3, relation_types=["likes"])
    assert likes.depths == {"a": 0, "x": 1}  # x -> y is "knows", so y is not reached
    assert [e.relation_type for e in likes.subgraph.edges] == ["likes"]


def test_relation_filter_is_data_only() -> None:
    index = make_index(CHAIN)
    hostile = ["knows' OR 1=1 --", "}) MATCH (n) DETACH DELETE n //"]
    result = bfs(index, "a", 3, relation_types=hostile)
    assert result.depths == {"a": 0}
    assert "no relation of type" in result.warnings[0]


def test_bfs_budget_keeps_ancestors_and_counts_exactly() -> None:
    # a binary tree of depth 4: 30 descendants; a budget of 5 shows a prefix of BFS order
    edges = [(f"n{i}", "child", f"n{2 * i + c}") for i in range(1, 16) for c in (0, 1)]
    index = make_index(edges)
    result = bfs(index, "n1", 4, node_budget=5)
    assert (result.shown, result.total) == (5, 30)
    assert result.subgraph.truncated and result.subgraph.total_nodes == 31
    shown = set(result.depths)
    for path in result.paths:
        assert {n.id for n in path.nodes} <= shown  # every ancestor is shown too
        assert path.hops == result.depths[path.nodes[-1].id]


def test_star_with_10000_leaves_is_capped_by_the_budget() -> None:
    edges = [("hub", "has", f"leaf{i}") for i in range(10_000)]
    index = make_index(edges)
    t0 = time.perf_counter()
    result = expand(index, "hub", node_budget=50)
    elapsed = time.perf_counter() - t0
    assert (result.shown, result.total, result.showing) == (50, 10_000, "showing 50 of 10000")
    assert len(result.subgraph.nodes) == 51 and len(result.subgraph.edges) == 50
    assert result.subgraph.truncated
    # from a leaf, the hub and its other leaves are 1 and 2 hops away (undirected)
    leaf = bfs(index, "leaf7", 2, direction="both", node_budget=200)
    assert (leaf.shown, leaf.total) == (200, 10_000)
    assert leaf.depths["hub"] == 1
    assert elapsed < 5.0, elapsed  # generous: a hub must never freeze the UI


def test_induced_edge_cap_keeps_every_path() -> None:
    # a clique: all paths are one hop, but the induced subgraph is dense
    names = [f"k{i}" for i in range(30)]
    index = make_index([(s, "r", t) for s in names for t in names if s != t])
    result = bfs(index, "k0", 1, node_budget=29, max_edges=40)
    assert len(result.paths) == 29
    assert len(result.subgraph.edges) == 40
    assert any("edges among the shown nodes" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_depth": 7}, "max_depth"),
        ({"max_depth": -1}, "max_depth"),
        ({"node_budget": 0}, "node_budget"),
        ({"node_budget": 10_001}, "node_budget"),
        ({"direction": "sideways"}, "direction"),
        ({"relation_types": [1, 2]}, "relation types"),
    ],
)
def test_bfs_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        bfs(make_index(CHAIN), "a", **kwargs)


def test_unknown_start_is_not_found() -> None:
    with pytest.raises(NotFoundError, match="nope"):
        bfs(make_index(CHAIN), "nope", 1)


# Known answer: a-b-d and a-c-d (2 hops), a-e-f-d (3 hops, with d -> f reversed), a-g-h-i-d (4 hops).
# a -> c weighs 3, so PPR from {a, d} puts more mass on c than on b.
PATHS = [("a", "knows", "b"), ("b", "knows", "d"), ("a", "funds", "c"), ("c", "funds", "d"), ("a", "meets", "e"),
         ("e", "meets", "f"), ("d", "meets", "f"), ("a", "x", "g"), ("g", "x", "h"), ("h", "x", "i"), ("i", "x", "d"),
         ("a", "knows", "b")]


def test_k_shortest_paths_known_answer() -> None:
    index = make_index(PATHS, weights={2: 3.0})
    result = k_shortest_paths(index, "a", "d", k=5, max_hops=4)
    assert [[n.id for n in p.nodes] for p in result.paths] == [
        ["a", "c", "d"],
        ["a", "b", "d"],
        ["a", "e", "f", "d"],
        ["a", "g", "h", "i", "d"],
    ]
    assert [p.hops for p in result.paths] == [2, 2, 3, 4]
    assert result.paths[0].ppr_mass > result.paths[1].ppr_mass > 0
    assert result.paths[2].text == "A --[meets]--> E --[meets]--> F <--[meets]-- D"
    assert result.paths[0].chunk_ids == ()  # hand-made relations carry no chunks
    assert result.candidates == 4
    assert {n.id for n in result.subgraph.nodes} == {"a", "b", "c", "d", "e", "f", "g", "h", "i"}

    assert [len(p.nodes) for p in k_shortest_paths(index, "a", "d", k=5, max_hops=3).paths] == [3, 3, 4]
    assert [[n.id for n in p.nodes] for p in k_shortest_paths(index, "a", "d", k=1).paths] == [["a", "c", "d"]]
    only_x = k_shortest_paths(index, "a", "d", relation_types=["x"])
    assert [[n.id for n in p.nodes] for p in only_x.paths] == [["a", "g", "h", "i", "d"]]


def test_k_shortest_paths_no_path_and_validation() -> None:
    index = make_index([*PATHS, ("lonely", "r", "island")])
    result = k_shortest_paths(index, "a", "island")
    assert result.paths == () and "no path within 4 hops" in result.warnings
    with pytest.raises(ValidationError, match="k must"):
        k_shortest_paths(index, "a", "d", k=21)
    with pytest.raises(ValidationError, match="max_hops"):
        k_shortest_paths(index, "a", "d", max_hops=7)
    with pytest.raises(ValidationError, match="same entity"):
        k_shortest_paths(index, "a", "a")


@pytest.mark.integration  # loads the real MiniLM
def test_query_similarity_reorders_paths_of_equal_length(embedder: Embedder) -> None:
    from retrieval.models import Relation

    index = make_index(PATHS, weights={2: 3.0})

    class Details:
        descriptions = {"r0": "Alice bought a house from Bob", "r1": "Bob sold the house to Dana",
                        "r2": "Alice funds Carol's startup", "r3": "Carol's startup pays Dana"}

        def get_entities(self, ids):  # noqa: ANN001, ANN202
            return []

        def get_relations(self, ids):  # noqa: ANN001, ANN202
            a = index.arrays
            return [Relation(id=r, source_id=a.node_ids[int(a.src[i])], target_id=a.node_ids[int(a.dst[i])],
                             relation_type=a.relation_types[i], description=self.descriptions.get(r, ""))
                    for r in ids for i in [a.relation_ids.index(r)]]

    plain = k_shortest_paths(index, "a", "d", k=2, details=Details())
    assert [n.id for n in plain.paths[0].nodes] == ["a", "c", "d"]
    ranked = k_shortest_paths(index, "a", "d", k=2, details=Details(), query="who bought the house?",
                              embedder=embedder)
    assert [n.id for n in ranked.paths[0].nodes] == ["a", "b", "d"]
    assert ranked.paths[0].query_similarity > ranked.paths[1].query_similarity
    assert ranked.paths[0].text == (
        "A --[knows: Alice bought a house from Bob]--> B --[knows: Bob sold the house to Dana]--> D"
    )
    assert any("missing from the graph store" in w for w in ranked.warnings)  # entities came from the index


def test_personalized_pagerank_is_a_distribution_favouring_seeds() -> None:
    index = make_index(CHAIN)
    p = personalized_pagerank(index.und_csr, {index.id_to_idx["a"]: 1.0}, 0.5)
    assert p.sum() == pytest.approx(1.0)
    assert p.argmax() == index.id_to_idx["a"]
    assert p[index.id_to_idx["b"]] > p[index.id_to_idx["c"]] > p[index.id_to_idx["d"]] > 0


def test_verbalize_without_descriptions() -> None:
    index = make_index(CHAIN)
    path = bfs(index, "a", 1, relation_types=["likes"]).paths[0]
    assert verbalize(path.nodes, path.edges) == "A --[likes]--> X"


def test_hub_region_too_large_shortens_the_hop_limit_visibly(monkeypatch: pytest.MonkeyPatch) -> None:
    import retrieval.graph.traverse as traverse

    index = make_index(PATHS, weights={2: 3.0})
    monkeypatch.setattr(traverse, "_REGION_EDGES", 5)  # the 4-hop region has 12 edges, the 2-hop one 4
    result = k_shortest_paths(index, "a", "d", k=5, max_hops=4)
    assert [p.hops for p in result.paths] == [2, 2]
    assert "paths limited to 2 hops: the 4-hop region is too large (hub nodes)" in result.warnings
