"""Property tests: an in-memory index patched by a change (`retrieval.graph.patch`) answers exactly as an index
built from scratch on the changed graph: the same nodes, names, types, chunk links, relations and endpoints,
adjacency weights, name matches, relation lookups and edge lookups, after several changes in a row, whatever
mix of renames, re-pointed and deleted relations, removed and added entities they hold."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.graph.index import GraphIndex, build_index, name_matcher, relation_nodes
from retrieval.graph.patch import patch_index
from retrieval.models import Entity, GraphChanges, Relation
from retrieval.stores.base import EdgeArrays

NAMES = ["alpha", "beta", "gamma beta", "delta", "zeta", "omega x", "the beta"]


def arrays_of(entities: list[Entity], relations: list[Relation]) -> EdgeArrays:
    ids = [e.id for e in entities]
    at = {i: k for k, i in enumerate(ids)}
    return EdgeArrays(
        node_ids=ids, node_names=[e.name for e in entities], node_types=[e.type for e in entities],
        node_chunks=[e.source_chunks for e in entities],
        src=np.array([at[r.source_id] for r in relations], dtype=np.int64),
        dst=np.array([at[r.target_id] for r in relations], dtype=np.int64),
        weight=np.array([r.weight for r in relations], dtype=np.float64),
        relation_ids=[r.id for r in relations], relation_types=[r.relation_type for r in relations],
        node_aliases=[e.aliases for e in entities],
    )


def canonical(index: GraphIndex) -> tuple[object, ...]:
    """Everything the index says, by id (positions may differ between a patched and a built index)."""
    a = index.arrays
    nodes = sorted((i, a.node_names[k], a.node_types[k], tuple(a.node_chunks[k]), tuple(a.node_aliases[k]))
                   for k, i in enumerate(a.node_ids))
    edges = sorted((r, a.node_ids[a.src[k]], a.node_ids[a.dst[k]], float(a.weight[k]), a.relation_types[k])
                   for k, r in enumerate(a.relation_ids))
    und = index.und_csr.tocoo()
    adjacency = sorted((a.node_ids[i], a.node_ids[j], round(float(v), 9)) for i, j, v in
                       zip(und.row, und.col, und.data, strict=True) if v)
    nc = index.node_chunk.tocoo()
    links = sorted((a.node_ids[i], index.chunk_ids[j]) for i, j, v in zip(nc.row, nc.col, nc.data, strict=True) if v)
    assert {i: k for k, i in enumerate(a.node_ids)} == index.id_to_idx
    return nodes, edges, adjacency, links


def scenario(rng: random.Random, steps: int) -> None:
    entities = {f"e{i}": Entity(id=f"e{i}", name=f"{rng.choice(NAMES)} {i % 3}",
                                source_chunks=tuple(rng.sample(["c1", "c2", "c3"], rng.randint(0, 2))),
                                aliases=tuple(rng.sample(["al", "beta 1"], rng.randint(0, 1))))
                for i in range(rng.randint(2, 12))}
    relations = {f"r{i}": Relation(id=f"r{i}", source_id=rng.choice(list(entities)),
                                   target_id=rng.choice(list(entities)), relation_type=rng.choice("AB"),
                                   weight=rng.choice([1.0, 2.0])) for i in range(rng.randint(0, 15))}
    index = build_index(arrays_of(list(entities.values()), list(relations.values())))
    name_matcher(index)  # built before the change: the patch must carry it
    relation_nodes(index, "r0")
    for step in range(steps):
        dead = set(rng.sample(sorted(entities), rng.randint(0, min(2, len(entities) - 1))))
        alive = [e for e in entities if e not in dead]
        puts = {eid: entities[eid].model_copy(update={
            "name": rng.choice(NAMES), "aliases": tuple(rng.sample(["al", "new alias"], rng.randint(0, 2))),
            "source_chunks": tuple(rng.sample(["c1", "c4"], rng.randint(0, 2)))})
            for eid in rng.sample(alive, rng.randint(0, min(2, len(alive))))}
        for k in range(rng.randint(0, 2)):
            nid = f"n{step}_{k}"
            puts[nid] = Entity(id=nid, name=f"new {nid}", source_chunks=("c9",))
        live = alive + [e for e in puts if e not in entities]
        gone = {r for r, v in relations.items() if v.source_id in dead or v.target_id in dead}
        rest = [r for r in relations if r not in gone]
        gone |= set(rng.sample(rest, rng.randint(0, min(2, len(rest)))))
        rest = [r for r in relations if r not in gone]
        moved = {rid: relations[rid].model_copy(update={"source_id": rng.choice(live), "weight": 3.0})
                 for rid in rng.sample(rest, rng.randint(0, min(2, len(rest))))}
        for k in range(rng.randint(0, 2)):
            rid = f"rn{step}_{k}"
            moved[rid] = Relation(id=rid, source_id=rng.choice(live), target_id=rng.choice(live), relation_type="C")
        index = patch_index(index, GraphChanges(entities=tuple(puts.values()), relations=tuple(moved.values()),
                                                delete_entities=tuple(dead), delete_relations=tuple(gone)))
        for eid in dead:
            entities.pop(eid)
        entities.update(puts)
        for rid in gone:
            relations.pop(rid)
        relations.update(moved)
        built = build_index(arrays_of(list(entities.values()), list(relations.values())))
        assert canonical(index) == canonical(built)
        for e in entities.values():
            for surface in (e.name, *e.aliases):
                patched = {index.arrays.node_ids[m.idx] for m in name_matcher(index).find(surface)}
                fresh = {built.arrays.node_ids[m.idx] for m in name_matcher(built).find(surface)}
                assert patched == fresh, surface
        for r in relations.values():
            s, t = relation_nodes(index, r.id)
            assert s is not None and t is not None
            assert (index.arrays.node_ids[s], index.arrays.node_ids[t]) == (r.source_id, r.target_id)
            found = index.edges_between(index.id_to_idx[r.source_id], index.id_to_idx[r.target_id])
            assert r.id in [index.arrays.relation_ids[e] for e in found]


@settings(max_examples=150, deadline=timedelta(seconds=5))
@given(seed=st.integers(0, 2**32 - 1))
def test_a_patched_index_answers_as_one_built_from_scratch(seed: int) -> None:
    scenario(random.Random(seed), steps=3)


def test_removing_the_last_node_and_a_middle_one_keeps_every_other_position_right() -> None:
    entities = [Entity(id=f"e{i}", name=f"name {i}") for i in range(4)]
    relations = [Relation(id="r", source_id="e3", target_id="e2", relation_type="R")]
    index = build_index(arrays_of(entities, relations))
    name_matcher(index)
    patched = patch_index(index, GraphChanges(delete_entities=("e1", "e3"), delete_relations=("r",)))
    assert sorted(patched.arrays.node_ids) == ["e0", "e2"]
    assert [patched.arrays.node_ids[m.idx] for m in name_matcher(patched).find("name 2")] == ["e2"]
    assert name_matcher(patched).find("name 3") == []
