"""Subgraph export: JSON round trip, GraphML read back by networkx, graph memory, merged views."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from retrieval.errors import ValidationError
from retrieval.explore.export import (
    from_json,
    induced_edges,
    merge_subgraphs,
    save_to_memory,
    stored_subgraph,
    suggest_keywords,
    to_graphml,
    to_json,
    to_networkx,
)
from retrieval.explore.memory import GraphMemory
from retrieval.graph.index import build_index
from retrieval.graph.traverse import bfs, expand
from retrieval.models import Entity, Relation, Subgraph
from retrieval.stores.base import EdgeArrays

SCRIPT = "</script><script>alert('x')</script>"
QUOTES = 'say "hi" & \'bye\' <b>'
NODES = (
    Entity(id="a", name=f"Alice {SCRIPT}", type="person", description=QUOTES, aliases=("Al",),
           properties={"born": 1900, "tags": ["x", "y"]}, source_chunks=("c1",)),
    Entity(id="b", name="Bob Ünïcødé 東京", type="person"),
    Entity(id="c", name="Carol", type=f"org{QUOTES}"),
)
EDGES = (
    Relation(id="r1", source_id="a", target_id="b", relation_type=f"KNOWS{SCRIPT}", description=QUOTES,
             weight=0.25, source_chunks=("c1", "c2"), valid_at="2001-01-01"),
    Relation(id="r2", source_id="a", target_id="b", relation_type="WORKS_WITH"),  # parallel to r1
    Relation(id="r3", source_id="b", target_id="c", relation_type="MEMBER_OF"),
)
SUB = Subgraph(nodes=NODES, edges=EDGES, total_nodes=7, truncated=True)


def test_json_round_trip_is_lossless_and_keeps_hostile_strings_literally() -> None:
    text = to_json(SUB, {"title": f"paths {SCRIPT}", "k": 5})
    assert from_json(text) == SUB
    assert from_json(text.encode("utf-8")) == SUB
    doc = json.loads(text)
    assert doc["metadata"] == {"title": f"paths {SCRIPT}", "k": 5}
    assert "東京" in text  # readable UTF-8, not \\u escapes


def test_json_with_a_lone_surrogate_still_encodes_and_round_trips() -> None:
    sub = Subgraph(nodes=(Entity(id="s", name="bad \ud800 name"),))
    text = to_json(sub)
    text.encode("utf-8")  # downloadable as UTF-8
    assert from_json(text) == sub


@pytest.mark.parametrize(
    "bad",
    ["{not json", "[]", json.dumps({"format": "other"}),
     json.dumps({"format": "kg-lens-subgraph/1", "nodes": [{"name": "no id"}]})],
)
def test_from_json_rejects_malformed_documents(bad: str) -> None:
    with pytest.raises(ValidationError):
        from_json(bad)


def test_graphml_parses_back_with_networkx_and_keeps_every_string() -> None:
    data = to_graphml(SUB, {"title": f"export {SCRIPT}", "params": {"k": 5}})
    assert data.startswith(b"<?xml")
    assert b"<script>" not in data  # escaped in the XML text ...
    back = nx.read_graphml(io.BytesIO(data), force_multigraph=True)
    assert isinstance(back, nx.MultiDiGraph)
    assert back.nodes["a"]["name"] == f"Alice {SCRIPT}"  # ... and literal once parsed
    assert back.nodes["a"]["description"] == QUOTES
    assert back.nodes["a"]["label"] == f"Alice {SCRIPT}"
    assert json.loads(back.nodes["a"]["properties"]) == {"born": 1900, "tags": ["x", "y"]}
    assert json.loads(back.nodes["a"]["aliases"]) == ["Al"]
    assert back.nodes["c"]["type"] == f"org{QUOTES}"
    assert back.nodes["b"]["name"] == "Bob Ünïcødé 東京"
    assert sorted(back.edges(keys=True)) == [("a", "b", "r1"), ("a", "b", "r2"), ("b", "c", "r3")]
    r1 = back.edges["a", "b", "r1"]
    assert r1["relation_type"] == f"KNOWS{SCRIPT}" and r1["description"] == QUOTES
    assert float(r1["weight"]) == 0.25 and json.loads(r1["source_chunks"]) == ["c1", "c2"]
    assert r1["valid_at"] == "2001-01-01" and r1["invalid_at"] == ""
    assert back.graph["title"] == f"export {SCRIPT}" and json.loads(back.graph["params"]) == {"k": 5}


def test_graphml_attributes_are_all_strings() -> None:
    graph = to_networkx(SUB)
    values = [v for _, d in graph.nodes(data=True) for v in d.values()]
    values += [v for _, _, d in graph.edges(data=True) for v in d.values()]
    assert values and all(isinstance(v, str) for v in values)


def test_graphml_replaces_characters_xml_cannot_hold() -> None:
    sub = Subgraph(nodes=(Entity(id="n\x00ul", name="nul \x00 and \x07 bell and \ud800 lone"),))
    back = nx.read_graphml(io.BytesIO(to_graphml(sub)))
    ((node, attrs),) = back.nodes(data=True)
    assert node == "n\ufffdul" and attrs["name"] == "nul \ufffd and \ufffd bell and \ufffd lone"


def test_save_to_memory_stores_the_closed_subgraph_and_reads_back(tmp_path: Path) -> None:
    memory = GraphMemory(tmp_path / "memory")
    dangling = Relation(id="r9", source_id="c", target_id="elsewhere", relation_type="X")
    sub = SUB.model_copy(update={"edges": (*EDGES, dangling)})
    saved = save_to_memory(memory, "acme", "research", sub, keywords=["alice"], tags=["Paths"],
                           metadata={"title": "Alice and Bob"})
    assert saved.ok and saved.graph_id
    got = memory.get_graph("acme", saved.graph_id, "research")
    assert got.ok and got.graph is not None
    assert stored_subgraph(got.graph).nodes == NODES
    assert {e.id for e in got.graph.edges} == {"r1", "r2", "r3"}
    assert got.graph.metadata == {"title": "Alice and Bob", "dropped_edges": 1}
    assert got.graph.tags == ("paths",)
    listed = memory.list_graphs("acme", "research")
    assert [(g.title, g.node_count, g.edge_count) for g in listed.graphs] == [("Alice and Bob", 3, 3)]
    assert memory.search_graphs("acme", "alice").graphs[0].graph_id == saved.graph_id


def test_save_to_memory_reports_the_stores_error_for_a_bad_namespace(tmp_path: Path) -> None:
    result = save_to_memory(GraphMemory(tmp_path / "memory"), "acme", "../etc", SUB)
    assert not result.ok and result.error_kind == "invalid" and "namespace" in (result.error or "")
    assert not (tmp_path / "etc").exists()


class _Details:
    """Entity/relation records by id, built from the same arrays as the index."""

    def __init__(self, arrays: EdgeArrays) -> None:
        self.entities = {i: Entity(id=i, name=n) for i, n in zip(arrays.node_ids, arrays.node_names, strict=True)}
        self.relations = {
            rid: Relation(id=rid, source_id=arrays.node_ids[int(s)], target_id=arrays.node_ids[int(t)],
                          relation_type=rt)
            for rid, s, t, rt in zip(arrays.relation_ids, arrays.src, arrays.dst, arrays.relation_types, strict=True)
        }

    def get_entities(self, ids: Sequence[str]) -> list[Entity]:
        return [self.entities[i] for i in ids if i in self.entities]

    def get_relations(self, ids: Sequence[str]) -> list[Relation]:
        return [self.relations[i] for i in ids if i in self.relations]


def _arrays(edges: list[tuple[str, str, str]]) -> EdgeArrays:
    names = list(dict.fromkeys(n for s, _, t in edges for n in (s, t)))
    pos = {n: i for i, n in enumerate(names)}
    return EdgeArrays(
        node_ids=names, node_names=[n.upper() for n in names], node_types=["entity"] * len(names),
        node_chunks=[()] * len(names),
        src=np.array([pos[s] for s, _, _ in edges], dtype=np.int64),
        dst=np.array([pos[t] for _, _, t in edges], dtype=np.int64),
        weight=np.ones(len(edges)), relation_ids=[f"r{i}" for i in range(len(edges))],
        relation_types=[r for _, r, _ in edges],
    )


def test_step_by_step_expansion_merges_into_a_view_with_every_relation_among_its_nodes() -> None:
    # a - b - c, and c - d, d - a: expanding b then d from a 1-hop start must also show c -> d.
    arrays = _arrays([("a", "knows", "b"), ("b", "knows", "c"), ("c", "likes", "d"), ("d", "knows", "a")])
    index, details = build_index(arrays), _Details(arrays)
    start = bfs(index, "a", 1, direction="both", details=details)
    step = expand(index, "b", details=details)
    union = merge_subgraphs([start.subgraph, step.subgraph])
    assert {n.id for n in union.nodes} == {"a", "b", "c", "d"}
    assert {e.id for e in union.edges} == {"r0", "r1", "r3"}  # c -> d was seen by no traversal
    full = merge_subgraphs([union], induced_edges(index, [n.id for n in union.nodes], details))
    assert {e.id for e in full.edges} == {"r0", "r1", "r2", "r3"}
    only_knows = induced_edges(index, ["a", "b", "c", "d"], details, relation_types=["knows"])
    assert {e.id for e in only_knows} == {"r0", "r1", "r3"}


def test_suggest_keywords_puts_given_names_first_then_hubs() -> None:
    assert suggest_keywords(SUB, ["Carol", " "], limit=3) == ["Carol", "Bob Ünïcødé 東京", f"Alice {SCRIPT}"]
