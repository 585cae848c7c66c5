"""The map layout (`retrieval.graph.layout`): communities kept together as regions that do not overlap, every
entity inside its region, entities in no community placed beside their neighbours, the same map every time,
and the stored copy round-tripped, atomic and computed once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.graph.communities import compute_communities
from retrieval.graph.layout import LAYOUT_FILE, Layout, compute_layout, layout_for, load_layout, save_layout
from retrieval.ingest.bundle import load_bundle
from retrieval.models import Community, Entity, GraphData, Relation
from tests.conftest import DEMO_BUNDLE


def _arrays(data: GraphData) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    at = {e.id: i for i, e in enumerate(data.entities)}
    return ([e.id for e in data.entities], np.array([at[r.source_id] for r in data.relations]),
            np.array([at[r.target_id] for r in data.relations]), np.array([r.weight for r in data.relations]))


@pytest.fixture(scope="module")
def demo() -> tuple[GraphData, tuple[Community, ...], Layout]:
    data = load_bundle(DEMO_BUNDLE)
    communities = compute_communities(data)
    return data, communities, compute_layout(*_arrays(data), communities)


def _inside(layout: Layout, row: int, region: int) -> bool:
    r = layout.regions[region]
    return bool(np.hypot(layout.xy[row, 0] - r.x, layout.xy[row, 1] - r.y) <= r.r * 1.001)


def test_communities_are_regions_that_hold_their_entities_and_do_not_overlap(demo) -> None:
    data, communities, layout = demo
    at = layout.index_of()
    top = [k for k, r in enumerate(layout.regions) if r.level == 0]
    assert {layout.regions[k].id for k in top} >= {c.id for c in communities if c.level == 0}
    for c in communities:  # every member sits inside its community's disc, at both levels
        k = next(i for i, r in enumerate(layout.regions) if r.id == c.id and r.level == c.level)
        assert all(_inside(layout, at[e], k) for e in c.entity_ids), c.id
    for c in (c for c in communities if c.level == 1):  # a level-1 disc lies in its parent's
        child = next(r for r in layout.regions if r.id == c.id and r.level == 1)
        parent = layout.regions[child.parent]
        assert parent.id == c.parent and np.hypot(child.x - parent.x, child.y - parent.y) + child.r <= parent.r * 1.001
    geom = np.array([[layout.regions[k].x, layout.regions[k].y, layout.regions[k].r] for k in top])
    dist = np.hypot(geom[:, None, 0] - geom[None, :, 0], geom[:, None, 1] - geom[None, :, 1])
    np.fill_diagonal(dist, np.inf)
    assert (dist >= geom[:, None, 2] + geom[None, :, 2] - 1e-6).all()
    # so members of one community are much closer to each other than to the rest of the graph
    big = max((c for c in communities if c.level == 0), key=lambda c: c.size)
    rows = [at[e] for e in big.entity_ids]
    mine = layout.xy[rows].mean(axis=0)
    own = np.hypot(*(layout.xy[rows] - mine).T).mean()
    others = np.hypot(*(np.delete(layout.xy, rows, axis=0) - mine).T).mean()
    assert own * 3 < others, (own, others)
    assert len(layout.node_ids) == len(data.entities) == len(layout.xy)
    assert np.isfinite(layout.xy).all()


def test_the_same_graph_gets_the_same_map(demo) -> None:
    data, communities, layout = demo
    again = compute_layout(*_arrays(data), communities)
    assert np.array_equal(again.xy, layout.xy) and again.regions == layout.regions


def test_entities_in_no_community_sit_beside_their_neighbours_or_in_a_region_of_their_own() -> None:
    ents = [Entity(id=f"e{i}", name=f"n{i}", type="t") for i in range(10)]
    rels = [Relation(id=f"r{i}", source_id=f"e{a}", target_id=f"e{b}", relation_type="R")
            for i, (a, b) in enumerate([(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (2, 6), (7, 8)])]
    data = GraphData(entities=tuple(ents), relations=tuple(rels))
    communities = (Community(id="A", entity_ids=("e0", "e1", "e2"), size=3),
                   Community(id="B", entity_ids=("e3", "e4", "e5"), size=3))
    layout = compute_layout(*_arrays(data), communities)
    regions = {r.id: k for k, r in enumerate(layout.regions)}
    assert layout.region[6] == regions["A"]  # e6 hangs off e2 (community A): drawn in A's region
    assert _inside(layout, 6, regions["A"])
    own = [k for k, r in enumerate(layout.regions) if r.id == ""]
    assert len(own) == 2  # the pair e7-e8, and e9 alone (no relations)
    assert layout.region[7] == layout.region[8] != layout.region[9]
    assert all(layout.regions[k].size in (1, 2) for k in own)


def test_stored_layout_round_trips_and_is_written_atomically(demo, tmp_path: Path) -> None:
    _, _, layout = demo
    odd = Layout(("a\x00b", "\ud800lone", "<img src=x>"), np.array([[1, 2], [3, 4], [5, 6]], np.float32),
                 np.array([0, 0, -1], np.int32), np.array([-1, -1, -1], np.int32), layout.regions[:1], 1.5)
    for item in (layout, odd):
        save_layout(tmp_path, item)
        back = load_layout(tmp_path)
        assert back is not None
        assert back.node_ids == item.node_ids and back.regions == item.regions
        assert np.array_equal(back.xy, item.xy) and np.array_equal(back.region, item.region)
        assert np.array_equal(back.subregion, item.subregion)
    assert [p.name for p in tmp_path.iterdir()] == [LAYOUT_FILE]  # no temporary file left behind
    assert load_layout(tmp_path / "missing") is None


def test_layout_for_computes_once_then_reads_the_stored_copy(demo, tmp_path: Path) -> None:
    data, communities, layout = demo
    ids, src, dst, w = _arrays(data)
    heard: list[tuple[str, int, int]] = []
    first = layout_for(tmp_path, ids, src, dst, w, communities, lambda *a: heard.append(a))
    assert heard[0] == ("layout", 0, len(ids)) and heard[-1] == ("layout", len(ids), len(ids))
    stamp = (tmp_path / LAYOUT_FILE).stat().st_mtime_ns
    heard.clear()
    again = layout_for(tmp_path, list(reversed(ids)), src, dst, w, communities, lambda *a: heard.append(a))
    assert heard == [] and (tmp_path / LAYOUT_FILE).stat().st_mtime_ns == stamp  # read, not computed
    assert np.array_equal(again.xy, first.xy) and again.rows(ids[:3]) is not None
    assert again.positions([ids[0], "nope"]) == {ids[0]: tuple(float(v) for v in first.xy[0])}
    # another version's entities: computed afresh for these
    other = layout_for(tmp_path, ids[:-1], src[:0], dst[:0], w[:0], ())
    assert other.node_ids == tuple(ids[:-1])


def test_layout_for_says_when_it_cannot_store(demo, tmp_path: Path) -> None:
    data, communities, layout = demo
    not_a_dir = tmp_path / "version"
    not_a_dir.write_text("a file where the version directory should be")  # the write fails, as on a read-only mount
    out = layout_for(not_a_dir, *_arrays(data), communities)
    assert out.warnings and "could not be stored" in out.warnings[0]
    assert np.array_equal(out.xy, layout.xy)
