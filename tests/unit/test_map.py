"""The Map's data path without a browser: the arrays of a graph version (`retrieval.graph.mapdata`), the bytes the
browser decodes (ui_map), one type colour per type in every view (ui_palette), what a search or a path lights
(components/map_view.py), and the live view's layout from stored positions with labels kept apart."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from components.graph_data import LABEL_CHAR, LABEL_HEIGHT, NODE_BOX, GraphMarks, Legend, declutter, drawing, layout
from components.map_view import _wire, path_lights, search_lights, traversal_lights
from retrieval.graph.communities import CommunityIndex, Extras, compute_communities
from retrieval.graph.index import build_index
from retrieval.graph.layout import Layout, compute_layout, cover, covers
from retrieval.graph.mapdata import map_data, type_order
from retrieval.ingest.bundle import load_bundle
from retrieval.models import Entity, GraphPath, PathResult, Relation, SearchResult, SemanticPath, Subgraph
from retrieval.stores.base import EdgeArrays
from tests.conftest import DEMO_BUNDLE
from ui_map import decode_message, encode_body, message
from ui_palette import PALETTE, color_of, hashed_color, ordered_palette, type_palette


@pytest.fixture(scope="module")
def demo_map():
    """The demo bundle as the Map draws it: index, layout and communities, no stores needed."""
    data = load_bundle(DEMO_BUNDLE)
    communities = compute_communities(data)
    at = {e.id: i for i, e in enumerate(data.entities)}
    arrays = EdgeArrays(
        node_ids=[e.id for e in data.entities], node_names=[e.name for e in data.entities],
        node_types=[e.type for e in data.entities], node_chunks=[e.source_chunks for e in data.entities],
        src=np.array([at[r.source_id] for r in data.relations]),
        dst=np.array([at[r.target_id] for r in data.relations]),
        weight=np.array([r.weight for r in data.relations]), relation_ids=[r.id for r in data.relations],
        relation_types=[r.relation_type for r in data.relations])
    index = build_index(arrays)
    n = len(arrays.node_ids)  # laid out in another entity order, as another store may export them
    lay = compute_layout(list(reversed(arrays.node_ids)), n - 1 - arrays.src, n - 1 - arrays.dst, arrays.weight,
                         communities)
    return data, index, lay, CommunityIndex.of(Extras(communities))


def test_map_data_follows_the_index_and_counts_what_it_says(demo_map) -> None:
    data, index, lay, communities = demo_map
    md = map_data(index, lay, communities, "v1")
    assert md.n == len(data.entities) and len(md.src) == len(data.relations)
    assert md.types == type_order(index) and md.types[0] == "concept"  # the demo's most frequent type
    assert [md.types[c] for c in md.type_code[:5]] == [data.entities[i].type for i in range(5)]
    assert np.array_equal(md.degree, np.diff(index.und_csr.indptr))
    assert math.isclose(float(md.pagerank.sum()), 1.0, rel_tol=1e-4) and (md.pagerank > 0).all()
    assert [md.rel_types[c] for c in md.rel_code[:5]] == [r.relation_type for r in data.relations[:5]]
    top = [k for k, r in enumerate(md.regions) if r.level == 0 and r.id]
    assert all(md.region_titles[k] == communities.by_id[md.regions[k].id].title for k in top)
    first = index.arrays.node_ids[0]
    assert tuple(float(v) for v in md.xy[0]) == lay.positions([first])[first] != tuple(float(v) for v in lay.xy[0])


def test_the_message_decodes_to_the_same_arrays_and_strings(demo_map) -> None:
    _, index, lay, communities = demo_map
    md = map_data(index, lay, communities, "v1")
    body = encode_body(md)
    raw = message(body, {"key": "kg-map", "height": 700})
    view, head, arrays = decode_message(raw)
    assert view == {"key": "kg-map", "height": 700, "rev": body.rev}
    assert head["n"] == md.n and head["names"][:3] == md.names[:3]
    assert np.array_equal(arrays["x"], md.xy[:, 0]) and np.array_equal(arrays["y"], md.xy[:, 1])
    for name, values in (("type", md.type_code), ("region", md.region), ("degree", md.degree), ("src", md.src),
                         ("rel", md.rel_code), ("pagerank", md.pagerank)):
        assert np.array_equal(arrays[name], values), name
    assert head["types"][0] == ["concept", PALETTE[0]] and head["regions"]["title"][0] == md.region_titles[0]
    assert encode_body(md).rev == body.rev  # the same version gives the same bytes: the browser keeps them
    with pytest.raises(ValueError):
        decode_message(b"<html>" + raw)


def test_a_type_keeps_its_colour_in_every_view_of_a_graph(demo_map) -> None:
    _, index, _, _ = demo_map
    order = type_order(index)
    graph_wide = type_palette(Counter(index.arrays.node_types).most_common())  # the live views' palette (app_state)
    assert ordered_palette(order) == graph_wide  # the Map colours each type as the live views do
    # a view holding only rarer types colours them as the whole graph does, not by its own counts
    few = [Entity(id=f"n{i}", name=f"n{i}", type=t) for i, t in enumerate([order[3], order[3], order[5]])]
    drawn = drawing(Subgraph(nodes=tuple(few)), GraphMarks(), max_nodes=10, legend=Legend(), palette=graph_wide)
    assert dict(drawn.payload["types"]) == {order[3]: graph_wide[order[3]], order[5]: graph_wide[order[5]]}
    assert dict(drawn.payload["types"])[order[3]] != PALETTE[0]  # without the palette it would take the first colour
    # a type the graph lacks gets the colour of its name, the same in every graph
    assert color_of("zebra", graph_wide) == hashed_color("zebra") not in graph_wide.values()


def _entity(i: str) -> Entity:
    return Entity(id=i, name=i.upper(), type="t")


def _rel(a: str, b: str) -> Relation:
    return Relation(id=f"{a}-{b}", source_id=a, target_id=b, relation_type="R")


def test_a_search_a_path_question_and_a_traversal_light_their_own_entities() -> None:
    path = SemanticPath(source_node=_entity("a"), intermediate_nodes=(_entity("b"),), destination_node=_entity("c"),
                        edges=(_rel("a", "b"), _rel("b", "c")))
    result = SearchResult(query="q", seed_ids=("a",), destination_ids=("c",), paths=(path,),
                          ppr_mass={"a": 0.5, "c": 0.2, "ghost": 0.1})
    lit = search_lights(result)
    assert (lit.seeds, lit.destinations, lit.path_nodes) == (("a",), ("c",), ("a", "b", "c"))
    assert lit.path_edges == (("a", "b"), ("b", "c")) and lit.scores == {"PPR in this search": result.ppr_mass}
    assert "1 seed, 1 destination, 1 traced path, PPR mass on 3 entities" in lit.label
    wire = _wire(lit, {"a": 0, "b": 1, "c": 2})  # "ghost" is no entity of this graph: left out
    assert wire["seeds"] == [0] and wire["path_edges"] == [[0, 1], [1, 2]] and wire["heat"] == [[0, 0.5], [2, 0.2]]
    gp = GraphPath(nodes=(_entity("a"), _entity("d"), _entity("c")), edges=(_rel("a", "d"), _rel("d", "c")))
    lit = path_lights(PathResult(source=_entity("a"), target=_entity("c"), paths=(gp,)))
    assert lit.seeds == ("a", "c") and lit.path_nodes == ("a", "d", "c") and "1 path" in lit.label
    lit = traversal_lights("a", Subgraph(nodes=(_entity("a"), _entity("b")), edges=(_rel("a", "b"),)), "A")
    assert lit.seeds == ("a",) and lit.destinations == ("b",) and "1 entity reached" in lit.label
    tool = search_lights(SearchResult(query="q", subgraph=Subgraph(nodes=(_entity("x"),))))  # no PPR: its entities
    assert tool.destinations == ("x",) and not tool.mass


def test_labels_are_kept_apart() -> None:
    rng = np.random.default_rng(3)
    coords = rng.uniform(0, 200, size=(60, 2))  # 60 labelled nodes in a 200 px square: a knot
    chars = rng.integers(4, 32, size=60).astype(float)
    out = declutter(coords, chars)
    half_w = np.maximum(NODE_BOX, LABEL_CHAR * chars) / 2
    half_h = (NODE_BOX + LABEL_HEIGHT) / 2
    dx = np.abs(out[:, None, 0] - out[None, :, 0]) - (half_w[:, None] + half_w[None, :])
    dy = np.abs(out[:, None, 1] - out[None, :, 1]) - 2 * half_h
    overlap = (dx < -1e-6) & (dy < -1e-6)
    np.fill_diagonal(overlap, False)
    assert not overlap.any()


def test_the_live_view_starts_from_the_stored_map_positions() -> None:
    # two triangles joined by one relation, stored far apart left and right: they stay apart, on their sides
    ids = tuple("abcdef")
    pairs = ((0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (2, 3))
    stored = ((-100.0, 0.0), (-90.0, 10.0), (-95.0, -10.0), (90.0, 0.0), (100.0, 10.0), (95.0, -10.0))
    xy = np.array(layout(ids, pairs, stored, (1,) * 6))
    assert xy[:3, 0].max() < xy[3:, 0].min()  # the left triangle is still left of the right one
    again = np.array(layout.__wrapped__(ids, pairs, stored, (1,) * 6))
    assert np.array_equal(xy, again)  # and the same picture every time


def test_after_a_curation_the_map_keeps_every_place_and_puts_a_new_entity_beside_its_neighbour() -> None:
    old = Layout(("a", "b"), np.array([[0.0, 0.0], [100.0, 0.0]], dtype=np.float32), np.array([0, 1], dtype=np.int32),
                 np.array([-1, 5], dtype=np.int32), ())
    ids = ["b", "c", "a", "d"]  # c is related to b; d to nothing; the store's order differs from the layout's
    new = cover(old, ids, np.array([1]), np.array([0]))
    assert new.node_ids == tuple(ids) and new.rows(ids) is not None
    assert new.positions(["a", "b"]) == {"a": (0.0, 0.0), "b": (100.0, 0.0)}
    cx, cy = new.positions(["c"])["c"]
    assert abs(cx - 100.0) < 30 and abs(cy) < 30 and (int(new.region[1]), int(new.subregion[1])) == (1, 5)
    dx, dy = new.positions(["d"])["d"]
    assert (dx * dx + dy * dy) ** 0.5 > 100.0 and int(new.region[3]) == -1  # outside the map, in no region
    assert covers(old, ids) == 2 and covers(new, ids) == 0
