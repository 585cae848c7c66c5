"""The graph view's details and expansion counts on the real demo graph (Kuzu + Milvus Lite) and a hand-made CSR."""

from __future__ import annotations

import pytest

from retrieval.errors import NotFoundError
from retrieval.explore.details import entity_details, relation_details, view_entity_details, view_relation_details
from retrieval.graph.runtime import KG
from retrieval.graph.traverse import expand, neighbour_summary
from retrieval.models import Entity, Relation, Subgraph
from retrieval.search.retriever import search
from tests.unit.test_traverse import make_index

pytestmark = pytest.mark.integration


def test_entity_details_has_record_degree_typed_relations_and_book_chapter_sources(demo_kg: KG) -> None:
    d = entity_details(demo_kg.index, demo_kg.graph, demo_kg.vectors, "price-elasticity", max_relations=5)
    assert d.entity.name == "price elasticity" and d.entity.type == "concept"
    assert "price elasticity of demand" in d.entity.aliases and d.entity.description.startswith("The percentage")
    assert d.degree == d.relations_total == sum(d.relation_types.values()) > 5
    assert len(d.relations) == 5 and all(line.relation.relation_type for line in d.relations)
    depends = [x for x in d.relations if x.relation.id == "price-elasticity--depends_on--demand-curve"]
    assert not depends or (depends[0].outgoing and depends[0].other_name == "demand curve")
    assert d.sources_total == 5 and d.sources[0].id == "pricing-ch2-01"
    assert d.sources[0].original_document and d.sources[0].chapter and d.sources[0].text
    with pytest.raises(NotFoundError):
        entity_details(demo_kg.index, demo_kg.graph, demo_kg.vectors, "no-such-entity")


def test_relation_details_has_both_ends_description_and_sources(demo_kg: KG) -> None:
    d = relation_details(demo_kg.index, demo_kg.graph, demo_kg.vectors, "price-elasticity--depends_on--demand-curve")
    assert (d.source.name, d.relation.relation_type, d.target.name) == ("price elasticity", "DEPENDS_ON",
                                                                          "demand curve")
    assert d.relation.description.startswith("Elasticity is read") and d.sources_total == 1
    assert d.sources[0].id == "pricing-ch2-01" and d.sources[0].chapter
    with pytest.raises(NotFoundError):
        relation_details(demo_kg.index, demo_kg.graph, demo_kg.vectors, "nope")


def test_search_result_carries_the_ppr_of_each_subgraph_entity(demo_kg: KG) -> None:
    result = search(demo_kg, "How does price elasticity affect penetration pricing?")
    assert set(result.entity_ppr) == {n.id for n in result.subgraph.nodes}
    by_dest = {p.destination_node.id: p.ppr_score for p in result.paths}
    for node, score in by_dest.items():
        if node in result.entity_ppr:
            assert result.entity_ppr[node] == pytest.approx(score)


def test_neighbour_summary_counts_shown_of_all_and_the_rest_by_relation_type() -> None:
    edges = [("hub", "uses", f"u{i}") for i in range(5)] + [(f"k{i}", "knows", "hub") for i in range(3)]
    edges += [("hub", "knows", "u0"), ("hub", "self", "hub")]
    index = make_index(edges)
    s = neighbour_summary(index, "hub", {"hub", "u0", "u1"})
    assert (s.shown, s.total) == (2, 8)
    assert s.left_by_type == {"uses": 3, "knows": 3}
    grown = expand(index, "hub", 4)
    after = neighbour_summary(index, "hub", {n.id for n in grown.subgraph.nodes})
    assert after.shown == grown.shown == 4 and after.total == grown.total == 8
    with pytest.raises(NotFoundError):
        neighbour_summary(index, "nobody", set())


def test_view_details_describe_records_the_opened_graph_does_not_hold() -> None:
    a, b = Entity(id="type:a", name="A", source_chunks=("c9",)), Entity(id="type:b", name="B")
    r = Relation(id="r", source_id="type:a", target_id="type:b", relation_type="HAS", description="3 relations")
    view = Subgraph(nodes=(a, b), edges=(r,))
    d = view_entity_details(view, "type:a")
    assert not d.in_graph and d.degree == 1 and d.relations[0].other_name == "B" and d.sources_total == 1
    rd = view_relation_details(view, "r")
    assert rd.source.name == "A" and rd.target.name == "B" and not rd.in_graph
    with pytest.raises(NotFoundError):
        view_entity_details(view, "zzz")
