"""KuzuGraphStore on a real on-disk Kuzu database in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval.config import Settings
from retrieval.errors import StoreError, ValidationError
from retrieval.ingest.build import data_counts
from retrieval.models import Chunk, Entity, GraphChanges, GraphData, Relation
from retrieval.stores.base import StoreLocation, open_graph_store
from retrieval.stores.kuzu import KuzuGraphStore

pytestmark = pytest.mark.integration

HOSTILE = (
    'x"}) MATCH (n) DETACH DELETE n //',
    "'; MATCH (n) DETACH DELETE n; //",
    "})-[:RELATES]->(m) RETURN m //",
    "$ids $q {id: $x}",
    "<script>alert(1)</script>",
    "\u202eevil\u202c and zero\u200bwidth\ufeff",
    "tab\tnew\nline\r\x00nul",
    "back\\slash \\' \\\"",
    "漢字 العربية 🙂",
    "w" * 10_000,
)


def _open(path: Path, settings: Settings) -> KuzuGraphStore:
    return KuzuGraphStore.open(settings, StoreLocation(dir=path, key="v1"))


@pytest.fixture
def store(tmp_path: Path, settings: Settings) -> Iterator[KuzuGraphStore]:
    s = _open(tmp_path / "v1", settings)
    yield s
    s.close()


def library() -> GraphData:
    """A small typed graph: a chain a-b-c-d, an incoming edge e->a, chunks in two books."""
    chunks = tuple(
        Chunk(id=cid, text=text, source=f"{book.lower()}.md", original_document=book, chapter=chapter, author=author,
              position=pos)
        for cid, text, book, chapter, author, pos in (
            ("c1", "Pricing text.", "Pricing", "1", "A", 0),
            ("c2", "More pricing.", "Pricing", "2", "A", 1),
            ("c3", "Brand text.", "Brands", "1", "B", 0),
        )
    )
    entities = (
        Entity(id="a", name="Price Elasticity", type="metric", description="How demand reacts to price.",
               properties={"unit": "ratio", "nested": {"k": [1, 2]}}, aliases=("PED",), source_chunks=("c1", "c2")),
        Entity(id="b", name="Penetration Pricing", type="technique", source_chunks=("c1",)),
        Entity(id="c", name="Market Share", type="metric", source_chunks=("c2",)),
        Entity(id="d", name="Brand Equity", type="concept", source_chunks=("c3",)),
        Entity(id="e", name="Consumer Survey", type="technique"),
    )
    relations = (
        Relation(id="r_ab", source_id="a", target_id="b", relation_type="INFLUENCES",
                 description="Elasticity shapes penetration pricing.", weight=2.0, source_chunks=("c1",),
                 valid_at="2020-01-01"),
        Relation(id="r_bc", source_id="b", target_id="c", relation_type="ENABLES", description="Low prices win share.",
                 source_chunks=("c2",), vector_db_ref_id="ref-bc"),
        Relation(id="r_cd", source_id="c", target_id="d", relation_type="INFLUENCES",
                 description="Share builds equity.", invalid_at="2024-12-31"),
        Relation(id="r_ea", source_id="e", target_id="a", relation_type="MEASURED_BY",
                 description="Surveys measure it."),
    )
    return GraphData(entities=entities, relations=relations, chunks=chunks)


def test_upsert_then_get_round_trips_every_field(store: KuzuGraphStore) -> None:
    data = library()
    store.upsert(data)
    assert store.get_entities(["d", "missing", "a", "a"]) == [data.entities[3], data.entities[0]]
    assert store.get_relations([r.id for r in data.relations]) == list(data.relations)
    assert store.get_relations(["nope"]) == []
    assert store.counts() == {"entities": 5, "relations": 4, "chunks": 3, "books": 2, "chapters": 3}


def test_counts_skip_empty_book_and_chapter_names(store: KuzuGraphStore) -> None:
    chunks = (Chunk(id="x1", text="t", original_document="Book"), Chunk(id="x2", text="t", chapter=""),
              Chunk(id="x3", text="t", original_document="Book", chapter="One"))
    data = GraphData(entities=(), relations=(), chunks=chunks)
    store.upsert(data)
    assert store.counts() == {"entities": 0, "relations": 0, "chunks": 3, "books": 1, "chapters": 1}
    assert {k: store.counts()[k] for k in ("books", "chapters")} == {
        k: data_counts(data)[k] for k in ("books", "chapters")}


def test_reupsert_is_idempotent_and_moves_changed_edges(store: KuzuGraphStore) -> None:
    data = library()
    store.upsert(data)
    store.upsert(data)
    assert store.counts() == {"entities": 5, "relations": 4, "chunks": 3, "books": 2, "chapters": 3}
    assert len(store.export_edges().src) == 4

    moved = data.relations[0].model_copy(update={"target_id": "d", "description": "now elsewhere"})
    renamed = data.entities[1].model_copy(update={"name": "Skim Pricing"})
    store.upsert(GraphData(entities=(renamed,), relations=(moved,)))
    arrays = store.export_edges()
    assert len(arrays.src) == 4
    k = arrays.relation_ids.index("r_ab")
    assert (arrays.node_ids[arrays.src[k]], arrays.node_ids[arrays.dst[k]]) == ("a", "d")
    assert store.get_relations(["r_ab"]) == [moved]
    assert store.find_entities("skim pricing") == [renamed]
    assert store.find_entities("penetration pricing") == []

    retyped = data.relations[1].model_copy(update={"relation_type": "CONTRASTS_WITH", "weight": 0.5})
    store.upsert(GraphData(relations=(retyped,)))
    arrays = store.export_edges()
    k = arrays.relation_ids.index("r_bc")
    assert (arrays.relation_types[k], arrays.weight[k]) == ("CONTRASTS_WITH", 0.5)
    assert [r.id for r in store.neighbourhood(["b"], relation_types=["CONTRASTS_WITH"]).edges] == ["r_bc"]
    assert store.counts()["relations"] == 4


def test_bulk_and_merge_paths_store_the_same_records(tmp_path: Path, settings: Settings) -> None:
    data = library()
    bulk = _open(tmp_path / "bulk", settings)
    merged = _open(tmp_path / "merged", settings)
    try:
        bulk.upsert(data)  # empty tables: COPY FROM Parquet
        merged.upsert(GraphData(entities=(Entity(id="z", name="seed"),), chunks=(Chunk(id="cz", text="seed"),)))
        merged.upsert(data)  # non-empty tables: batched MERGE
        ids = [e.id for e in data.entities]
        assert merged.get_entities(ids) == bulk.get_entities(ids) == list(data.entities)
        rel_ids = [r.id for r in data.relations]
        assert merged.get_relations(rel_ids) == bulk.get_relations(rel_ids) == list(data.relations)
    finally:
        bulk.close()
        merged.close()


def test_relation_to_unknown_entity_is_refused_and_nothing_written(store: KuzuGraphStore) -> None:
    store.upsert(library())
    bad = GraphData(
        entities=(Entity(id="f", name="New"),),
        relations=(Relation(id="r_bad", source_id="f", target_id="ghost", relation_type="X"),),
    )
    with pytest.raises(StoreError, match="ghost"):
        store.upsert(bad)
    assert store.counts()["entities"] == 5
    assert store.get_relations(["r_bad"]) == []


def test_find_entities_exact_and_fuzzy(store: KuzuGraphStore) -> None:
    store.upsert(library())
    assert [e.id for e in store.find_entities("price elasticity")] == ["a"]
    assert [e.id for e in store.find_entities("  PED ")] == ["a"]  # alias, any case
    assert store.find_entities("Price Elast") == []  # exact means exact
    store.upsert(GraphData(entities=(Entity(id="sp", name="  Spaced Name\t", aliases=(" Alias ",)),)))
    assert [e.id for e in store.find_entities("spaced name")] == ["sp"]
    assert [e.id for e in store.find_entities("ALIAS")] == ["sp"]
    assert store.get_entities(["sp"])[0].name == "  Spaced Name\t"  # stored as given
    assert [e.id for e in store.find_entities("price elastisity", fuzzy=True, limit=1)] == ["a"]
    assert [e.id for e in store.find_entities("brand equty", fuzzy=True, limit=3)][0] == "d"
    assert store.find_entities("", fuzzy=True) == []


def test_neighbourhood_hops_directions_and_type_filter(store: KuzuGraphStore) -> None:
    store.upsert(library())
    one = store.neighbourhood(["a"], hops=1)
    assert {e.id for e in one.nodes} == {"a", "b", "e"}  # outgoing a->b and incoming e->a
    assert {r.id for r in one.edges} == {"r_ab", "r_ea"}
    assert (one.total_nodes, one.truncated) == (3, False)

    two = store.neighbourhood(["a"], hops=2)
    assert {e.id for e in two.nodes} == {"a", "b", "c", "e"}
    assert two.edges[0].description  # full relations, not just ids

    typed = store.neighbourhood(["a"], hops=3, relation_types=["INFLUENCES"])
    assert {r.id for r in typed.edges} == {"r_ab"}  # r_bc is ENABLES, so c and d stay out
    assert store.neighbourhood(["a"], relation_types=[]).edges == ()
    assert store.neighbourhood(["ghost"], hops=2).nodes == ()
    mixed = store.neighbourhood(["ghost", "d", "a"], hops=1)
    assert [e.id for e in mixed.nodes][:2] == ["d", "a"]  # seeds first, in the order given
    assert {e.id for e in mixed.nodes} == {"a", "b", "c", "d", "e"}


def test_neighbourhood_caps_a_hub(store: KuzuGraphStore) -> None:
    hub = Entity(id="hub", name="Hub")
    spokes = tuple(Entity(id=f"s{i:03d}", name=f"Spoke {i}") for i in range(80))
    relations = tuple(
        Relation(id=f"h{i:03d}", source_id="hub" if i % 2 else f"s{i:03d}", target_id=f"s{i:03d}" if i % 2 else "hub",
                 relation_type="LINKS")
        for i in range(80)
    )
    store.upsert(GraphData(entities=(hub, *spokes), relations=relations))
    many = [e.id for e in reversed(spokes)]  # more ids than one batch of indexed lookups takes
    assert [e.id for e in store.get_entities(many)] == many
    assert store.get_relations([r.id for r in reversed(relations)]) == list(reversed(relations))
    sub = store.neighbourhood(["hub"], hops=2, max_edges=10)
    assert sub.truncated
    assert [r.id for r in sub.edges] == [f"h{i:03d}" for i in range(10)]  # deterministic: lowest ids first
    assert len(sub.nodes) == 11
    assert sub.total_nodes == 81  # every spoke was within reach before the cap

    leaf = store.neighbourhood(["s005"], hops=2, max_edges=10)  # hop 1 fits, the hub's hop 2 does not
    assert leaf.truncated and len(leaf.edges) == 10 and leaf.total_nodes == 81


def test_export_edges_matches_the_relations(store: KuzuGraphStore) -> None:
    data = library()
    store.upsert(data)
    arrays = store.export_edges()
    assert sorted(arrays.node_ids) == ["a", "b", "c", "d", "e"]
    assert arrays.src.dtype == np.int64 and arrays.weight.dtype == np.float64
    assert len(arrays.src) == len(arrays.dst) == len(arrays.weight) == len(arrays.relation_ids) == 4
    by_id = {r.id: r for r in data.relations}
    for k, rid in enumerate(arrays.relation_ids):
        rel = by_id[rid]
        assert arrays.node_ids[arrays.src[k]] == rel.source_id
        assert arrays.node_ids[arrays.dst[k]] == rel.target_id
        assert arrays.weight[k] == rel.weight
        assert arrays.relation_types[k] == rel.relation_type
    entity = {e.id: e for e in data.entities}
    for i, nid in enumerate(arrays.node_ids):
        assert arrays.node_chunks[i] == entity[nid].source_chunks
        assert arrays.node_names[i] == entity[nid].name
        assert arrays.node_aliases[i] == entity[nid].aliases


def test_empty_store(store: KuzuGraphStore) -> None:
    assert store.counts() == {"entities": 0, "relations": 0, "chunks": 0, "books": 0, "chapters": 0}
    arrays = store.export_edges()
    assert arrays.node_ids == [] and len(arrays.src) == 0
    assert store.neighbourhood(["a"]).nodes == ()
    assert store.find_entities("x", fuzzy=True) == []


def test_hostile_strings_round_trip_and_change_no_query(store: KuzuGraphStore) -> None:
    store.upsert(library())
    entities = tuple(
        Entity(id=f"h{i}:{text[:40]}", name=text, type=text, description=text, aliases=(text,),
               properties={text: text}, source_chunks=(text,))
        for i, text in enumerate(HOSTILE)
    )
    relations = tuple(
        Relation(id=f"hr{i}:{text[:40]}", source_id=entities[i].id, target_id="a", relation_type=text,
                 description=text, vector_db_ref_id=text, source_chunks=(text,), valid_at=text)
        for i, text in enumerate(HOSTILE)
    )
    chunks = tuple(Chunk(id=f"hc{i}:{text[:40]}", text=text, original_document=text, chapter=text, author=text)
                   for i, text in enumerate(HOSTILE))
    store.upsert(GraphData(entities=entities, relations=relations, chunks=chunks))
    store.upsert(GraphData(entities=entities, relations=relations, chunks=chunks))  # the MERGE path too

    assert store.get_entities([e.id for e in entities]) == list(entities)
    assert store.get_relations([r.id for r in relations]) == list(relations)
    for i, text in enumerate(HOSTILE):
        assert [e.id for e in store.find_entities(text)] == [entities[i].id]
        typed = store.neighbourhood([entities[i].id], relation_types=[text])
        assert [r.id for r in typed.edges] == [relations[i].id]
    assert store.find_entities(HOSTILE[0][:-3], fuzzy=True, limit=1)[0].id == entities[0].id
    # The graph is intact: nothing was deleted or rewired by any of the strings above.
    n = len(HOSTILE)
    assert store.counts() == {"entities": 5 + n, "relations": 4 + n, "chunks": 3 + n, "books": 2 + n, "chapters": 3 + n}
    assert store.get_entities(["a"]) == [library().entities[0]]


def test_invalid_unicode_is_refused_cleanly(store: KuzuGraphStore) -> None:
    lone = GraphData(entities=(Entity(id="s", name="lone \ud800 surrogate"),))
    with pytest.raises(ValidationError):
        store.upsert(lone)  # the bulk path
    store.upsert(library())
    with pytest.raises(ValidationError):
        store.upsert(lone)  # the MERGE path
    assert store.counts()["entities"] == 5


def test_reopen_read_only_then_write(tmp_path: Path, settings: Settings) -> None:
    first = _open(tmp_path / "v1", settings)
    first.upsert(library())
    first.close()
    reader = open_graph_store(settings, StoreLocation(dir=tmp_path / "v1", key="v1"))  # through the registry
    other = _open(tmp_path / "v1", settings)  # a second reader at once (the app and the CLI)
    try:
        assert reader.counts() == other.counts()
        assert [e.id for e in other.find_entities("ped")] == ["a"]
    finally:
        other.close()
    reader.upsert(GraphData(entities=(Entity(id="f", name="Late"),)))
    assert reader.counts()["entities"] == 6
    reader.close()
    with pytest.raises(StoreError, match="closed"):
        reader.counts()


def test_read_only_lookups_reuse_plans_and_can_skip_chunk_lists(tmp_path: Path, settings: Settings) -> None:
    from retrieval.graph.index import build_index, get_entities

    data = library()
    writer = _open(tmp_path / "v1", settings)
    writer.upsert(data)
    writer.close()
    reader = _open(tmp_path / "v1", settings)
    try:
        for _ in range(2):
            assert reader.get_entities(["c", "a", "b"]) == [data.entities[2], data.entities[0], data.entities[1]]
        assert reader.get_entities(["a", "b", "c", "d", "e"]) == list(data.entities)
        # one reader, one pooled connection: 3 ids and 5 ids padded to 4 and 8 branches, two plans, reused
        assert [len(plans) for _conn, plans in reader._pool] == [2]
        bare = reader.get_entities(["a", "d"], chunks=False)
        assert [e.source_chunks for e in bare] == [(), ()]
        assert [e.model_copy(update={"source_chunks": ()}) for e in data.entities[::3]] == bare
        index = build_index(reader.export_edges())  # the retriever's way: chunk links from the index
        assert get_entities(index, reader, ["d", "a"]) == [data.entities[3], data.entities[0]]
    finally:
        reader.close()


def test_concurrent_readers_each_get_a_connection_and_a_write_waits_for_them(
    tmp_path: Path, settings: Settings
) -> None:
    import threading

    data = library()
    writer = _open(tmp_path / "v1", settings)
    writer.upsert(data)
    writer.close()
    store = _open(tmp_path / "v1", settings)
    inside = threading.Barrier(4)
    results: list[list[Entity]] = []
    try:
        store._table_sizes()  # counted once before: then each reader runs exactly one query
        real = store._run

        def run_together(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("conn", args[2] if len(args) > 2 else None) is not store._conn:
                inside.wait(timeout=30)  # four reads inside Kuzu at once: no lock serialises them
            return real(*args, **kwargs)

        store._run = run_together  # type: ignore[method-assign]
        threads = [threading.Thread(target=lambda: results.append(store.get_entities(["a", "b"]))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        store._run = real  # type: ignore[method-assign]
        assert results == [[data.entities[0], data.entities[1]]] * 4
        assert len(store._pool) == 4  # each reader had its own connection, kept for the next reads
        # a write (here: read-only -> writable and back) waits for readers and closes their connections
        store.write(GraphChanges(entities=(data.entities[0].model_copy(update={"description": "changed"}),)))
        assert store._pool == [] and store.get_entities(["a"])[0].description == "changed"
    finally:
        store.close()


def test_copy_from_builds_the_demo_as_the_statement_path_does(tmp_path: Path, settings: Settings) -> None:
    from retrieval.config import DEMO_DIR
    from retrieval.ingest.bundle import load_bundle

    data = load_bundle(DEMO_DIR)
    bulk = _open(tmp_path / "bulk", settings)
    merged = _open(tmp_path / "merged", settings)
    try:
        bulk.upsert(data)  # a new version: COPY FROM Parquet
        merged.upsert(GraphData(entities=(Entity(id="z", name="seed"),), chunks=(Chunk(id="cz", text="seed"),)))
        merged.upsert(data)  # statement by statement (batched MERGE)
        ids, rel_ids = [e.id for e in data.entities], [r.id for r in data.relations]
        assert bulk.get_entities(ids) == merged.get_entities(ids) == list(data.entities)
        assert bulk.get_relations(rel_ids) == merged.get_relations(rel_ids) == list(data.relations)
        a, b = bulk.export_edges(), merged.export_edges()
        edges = lambda x: sorted(zip(x.relation_ids, (x.node_ids[i] for i in x.src), (x.node_ids[i] for i in x.dst),  # noqa: E731
                                     x.weight.tolist(), x.relation_types, strict=True))
        assert edges(a) == edges(b) and len(edges(a)) == 485
        counts = bulk.counts()
        assert {k: counts[k] for k in ("entities", "relations", "chunks")} == {"entities": 248, "relations": 485,
                                                                               "chunks": 96}
    finally:
        bulk.close()
        merged.close()
