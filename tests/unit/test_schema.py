"""The graph's schema view: entity types joined by (source type, relation type, target type) counts."""

from __future__ import annotations

import numpy as np

from retrieval.graph.index import build_index, schema
from retrieval.stores.base import EdgeArrays


def _index(types: list[str], edges: list[tuple[int, str, int]]):
    return build_index(EdgeArrays(
        node_ids=[f"n{i}" for i in range(len(types))], node_names=[f"N{i}" for i in range(len(types))],
        node_types=types, node_chunks=[() for _ in types],
        src=np.array([s for s, _, _ in edges], dtype=np.int64), dst=np.array([t for _, _, t in edges], dtype=np.int64),
        weight=np.ones(len(edges)), relation_ids=[f"r{i}" for i in range(len(edges))],
        relation_types=[r for _, r, _ in edges],
    ))


def test_schema_counts_each_type_triple_most_frequent_first() -> None:
    types = ["person", "person", "org", "org", "<b>x</b>"]
    edges = [(0, "WORKS_AT", 2), (1, "WORKS_AT", 3), (1, "WORKS_AT", 2), (0, "KNOWS", 1), (2, "OWNS", 4)]
    view = schema(_index(types, edges))
    assert [(e.source_id, e.relation_type, e.target_id, e.weight) for e in view.edges] == [
        ("type:person", "WORKS_AT", "type:org", 3.0),
        ("type:org", "OWNS", "type:<b>x</b>", 1.0),
        ("type:person", "KNOWS", "type:person", 1.0),
    ]
    assert view.edges[0].description == "3 relations: person WORKS_AT org"
    nodes = {n.name: n.description for n in view.nodes}
    assert nodes == {"person": "2 entities", "org": "2 entities", "<b>x</b>": "1 entity"}
    assert view.total_nodes == 3 and not view.truncated


def test_schema_keeps_the_most_frequent_triples_and_says_it_cut() -> None:
    types = ["a", "b"]
    edges = [(0, f"R{i % 5}", 1) for i in range(12)] + [(1, "BACK", 0)]
    view = schema(_index(types, edges), max_edges=2)
    assert [e.relation_type for e in view.edges] == ["R0", "R1"]  # 3 each; ties by key order
    assert view.truncated
    assert schema(_index(["a"], [])).nodes == ()
