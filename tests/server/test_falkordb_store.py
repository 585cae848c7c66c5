"""FalkorDB GraphStore on a real server started by scripts/falkordb: behaviour, parity with Kuzu, hostile
strings, and a server that dies mid-session."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import redis

from bench.synth import write_synth_bundle
from retrieval.config import Settings
from retrieval.errors import ConfigError, StoreError, ValidationError
from retrieval.ingest.bundle import load_bundle
from retrieval.models import Chunk, Entity, GraphData, Relation
from retrieval.stores.base import StoreLocation
from retrieval.stores.falkordb import _INDEXES, FalkorGraphStore, delete_graph
from retrieval.stores.kuzu import KuzuGraphStore

from .conftest import FalkorServer, run_script

pytestmark = pytest.mark.server

HOSTILE = (
    'quote " and \' and `tick`',
    '"}) MATCH (n) DETACH DELETE n //',
    "'}) MATCH (n) DETACH DELETE n RETURN 1 //",
    "<script>alert('x')</script>",
    "back\\slash \\\" \\u0041 \\u0001 \\\x02 \\n",
    "line\nbreak\r\ntab\t bell\x07 esc\x1b unit\x1f sep",
    "Ωμέγα 中文 😀 \U0010ffff",
    "\u202eRTL override\u202c and \u200f",
    "zero\u200bwidth\u200d joiner\ufeff",
    "$param {x} [y] CYPHER q=1",
    "x" * 10_000,
)


def small_graph() -> GraphData:
    chunks = (
        Chunk(id="c1", text="Price elasticity shapes pricing.", original_document="Pricing", chapter="One",
              author="A. Writer", position=0),
        Chunk(id="c2", text="Penetration pricing wins share.", original_document="Pricing", chapter="Two",
              position=1),
        Chunk(id="c3", text="Brand equity lasts.", original_document="Brands", chapter="One", position=0),
    )
    entities = (
        Entity(id="e1", name="Price Elasticity", type="concept", description="Demand response to price.",
               aliases=("PED", "Elasticity of Demand"), source_chunks=("c1",), properties={"k": [1, "v"]}),
        Entity(id="e2", name="Penetration Pricing", type="technique", description="Low entry price.",
               source_chunks=("c1", "c2")),
        Entity(id="e3", name="Market Share", type="metric", source_chunks=("c2",)),
        Entity(id="e4", name="Brand Equity", type="concept", source_chunks=("c3",)),
        Entity(id="e5", name="Isolated", type="concept"),
    )
    relations = (
        Relation(id="r1", source_id="e1", target_id="e2", relation_type="INFLUENCES",
                 description="Price elasticity influences penetration pricing.", weight=0.5,
                 source_chunks=("c1",), valid_at="2020-01-01"),
        Relation(id="r2", source_id="e2", target_id="e3", relation_type="INCREASES",
                 description="Penetration pricing increases market share.", source_chunks=("c2",),
                 vector_db_ref_id="v2"),
        Relation(id="r3", source_id="e4", target_id="e3", relation_type="SUPPORTS",
                 description="Brand equity supports market share.", weight=2.25, source_chunks=("c3",),
                 invalid_at="2024-12-31"),
        Relation(id="r4", source_id="e3", target_id="e1", relation_type="INFLUENCES",
                 description="Market share influences elasticity.", source_chunks=("c2",)),
    )
    return GraphData(entities=entities, relations=relations, chunks=chunks)


def test_round_trip_and_counts(falkor_store: FalkorGraphStore) -> None:
    data = small_graph()
    assert falkor_store.counts() == dict.fromkeys(("entities", "relations", "chunks", "books", "chapters"), 0)
    falkor_store.upsert(data)
    assert falkor_store.get_entities([e.id for e in data.entities]) == list(data.entities)
    assert falkor_store.get_relations(["r3", "nope", "r1", "r3"]) == [data.relations[2], data.relations[0]]
    assert falkor_store.counts() == {"entities": 5, "relations": 4, "chunks": 3, "books": 2, "chapters": 3}


def test_upsert_is_idempotent_and_replaces(falkor_store: FalkorGraphStore) -> None:
    data = small_graph()
    falkor_store.upsert(data)
    before = falkor_store.export_edges()
    falkor_store.upsert(data)
    again = falkor_store.export_edges()
    assert falkor_store.counts()["relations"] == 4 and falkor_store.counts()["entities"] == 5
    assert sorted(zip(again.relation_ids, again.src.tolist(), again.dst.tolist(), strict=True)) == sorted(
        zip(before.relation_ids, before.src.tolist(), before.dst.tolist(), strict=True)
    )
    moved = data.relations[1].model_copy(update={"target_id": "e4", "description": "Now points at brand equity."})
    renamed = data.entities[4].model_copy(update={"description": "No longer empty."})
    falkor_store.upsert(GraphData(entities=(renamed,), relations=(moved,)))
    assert falkor_store.get_relations(["r2"]) == [moved]
    assert falkor_store.get_entities(["e5"]) == [renamed]
    assert falkor_store.counts()["relations"] == 4  # the edge moved; it was not duplicated
    ids = falkor_store.neighbourhood(["e4"], hops=1).edges
    assert "r2" in {r.id for r in ids}


def test_relation_to_unknown_entity_writes_nothing(falkor_store: FalkorGraphStore) -> None:
    falkor_store.upsert(small_graph())
    bad = GraphData(
        entities=(Entity(id="e9", name="New"),),
        relations=(Relation(id="r9", source_id="e9", target_id="ghost", relation_type="X"),),
    )
    with pytest.raises(StoreError, match="ghost"):
        falkor_store.upsert(bad)
    assert falkor_store.get_entities(["e9"]) == []
    assert falkor_store.counts()["relations"] == 4


def test_find_exact_alias_and_fuzzy(falkor_store: FalkorGraphStore) -> None:
    falkor_store.upsert(small_graph())
    assert [e.id for e in falkor_store.find_entities("  price ELASTICITY ")] == ["e1"]
    assert [e.id for e in falkor_store.find_entities("ped")] == ["e1"]
    assert [e.id for e in falkor_store.find_entities("elasticity of demand")] == ["e1"]
    assert falkor_store.find_entities("elasticity") == []
    assert [e.id for e in falkor_store.find_entities("penetraton pricng", fuzzy=True, limit=1)] == ["e2"]
    assert falkor_store.find_entities("") == []


def test_neighbourhood_hops_cap_and_type_filter(falkor_store: FalkorGraphStore) -> None:
    falkor_store.upsert(small_graph())
    one = falkor_store.neighbourhood(["e1"], hops=1)
    assert {r.id for r in one.edges} == {"r1", "r4"}
    assert {e.id for e in one.nodes} == {"e1", "e2", "e3"} and one.total_nodes == 3 and not one.truncated
    two = falkor_store.neighbourhood(["e1"], hops=2)
    assert {r.id for r in two.edges} == {"r1", "r2", "r3", "r4"} and len(two.nodes) == 4
    capped = falkor_store.neighbourhood(["e3"], hops=1, max_edges=2)
    assert [r.id for r in capped.edges] == ["r2", "r3"]  # the first edges by id
    assert capped.truncated and capped.total_nodes == 4 > len(capped.nodes)
    typed = falkor_store.neighbourhood(["e3"], hops=2, relation_types=["INFLUENCES"])
    assert {r.relation_type for r in typed.edges} == {"INFLUENCES"} and {r.id for r in typed.edges} == {"r1", "r4"}
    assert falkor_store.neighbourhood(["e1"], relation_types=[]).edges == ()
    assert falkor_store.neighbourhood(["nope"]).nodes == ()


def test_export_edges_arrays(falkor_store: FalkorGraphStore) -> None:
    data = small_graph()
    falkor_store.upsert(data)
    arrays = falkor_store.export_edges()
    assert sorted(arrays.node_ids) == ["e1", "e2", "e3", "e4", "e5"]
    by_id = {r.id: r for r in data.relations}
    assert sorted(arrays.relation_ids) == sorted(by_id)
    for i, rid in enumerate(arrays.relation_ids):
        rel = by_id[rid]
        assert arrays.node_ids[arrays.src[i]] == rel.source_id and arrays.node_ids[arrays.dst[i]] == rel.target_id
        assert arrays.weight[i] == rel.weight and arrays.relation_types[i] == rel.relation_type
    node = arrays.node_ids.index("e1")
    assert arrays.node_chunks[node] == ("c1",) and arrays.node_aliases[node] == ("PED", "Elasticity of Demand")
    assert arrays.node_names[node] == "Price Elasticity" and arrays.node_types[node] == "concept"


def test_hostile_strings_round_trip_and_never_change_a_query(falkor_store: FalkorGraphStore) -> None:
    chunks = tuple(Chunk(id=f"c{i}", text=s, original_document=s, chapter=s, author=s) for i, s in enumerate(HOSTILE))
    entities = tuple(
        Entity(id=s[:512], name=s, type=s, description=s, aliases=(s,), source_chunks=(f"c{i}",),
               properties={"p": s})
        for i, s in enumerate(HOSTILE)  # ids are capped at 512 characters (as ingest caps them)
    ) + (Entity(id="sentinel", name="sentinel"),)
    relations = tuple(
        Relation(id=f"r-{s[:500]}", source_id=s[:512], target_id="sentinel", relation_type=s, description=s,
                 source_chunks=(f"c{i}",), vector_db_ref_id=s, valid_at=s)
        for i, s in enumerate(HOSTILE)
    )
    falkor_store.upsert(GraphData(entities=entities, relations=relations, chunks=chunks))
    assert falkor_store.get_entities([e.id for e in entities]) == list(entities)
    assert falkor_store.get_relations([r.id for r in relations]) == list(relations)
    n = len(HOSTILE)
    assert falkor_store.counts() == {"entities": n + 1, "relations": n, "chunks": n, "books": n, "chapters": n}
    for s in HOSTILE:
        assert [e.id for e in falkor_store.find_entities(s)] == [s[:512]]
        typed = falkor_store.neighbourhood(["sentinel"], relation_types=[s])
        assert [r.id for r in typed.edges] == [f"r-{s[:500]}"]
    arrays = falkor_store.export_edges()
    assert sorted(arrays.node_names) == sorted(e.name for e in entities)
    assert sorted(arrays.relation_types) == sorted(HOSTILE)
    assert sorted(c for cs in arrays.node_chunks for c in cs) == sorted(c.id for c in chunks)


def test_nul_and_unindexable_ids_are_refused_before_anything_is_written(falkor_store: FalkorGraphStore) -> None:
    falkor_store.upsert(small_graph())
    with pytest.raises(ValidationError, match="NUL"):
        falkor_store.upsert(GraphData(entities=(Entity(id="n", name="nul\x00byte"),)))
    with pytest.raises(ValidationError, match="longer than FalkorDB can index"):
        falkor_store.upsert(GraphData(entities=(Entity(id="n", name="ok"), Entity(id="i" * 5_000, name="long id"))))
    assert falkor_store.get_entities(["n", "i" * 5_000]) == [] and falkor_store.counts()["entities"] == 5


def test_same_answers_as_kuzu_on_a_synthetic_graph(
    falkor_store: FalkorGraphStore, server_settings: Settings, tmp_path: Path
) -> None:
    write_synth_bundle(tmp_path / "b", entities=300, relations=2_000, chunks=60, seed=5)
    data = load_bundle(tmp_path / "b")
    kuzu = KuzuGraphStore.open(server_settings, StoreLocation(dir=tmp_path / "k", key="k"))
    try:
        kuzu.upsert(data)
        falkor_store.upsert(data)
        assert falkor_store.counts() == kuzu.counts()

        def edges(store: FalkorGraphStore | KuzuGraphStore) -> list[tuple[str, str, str, float, str]]:
            a = store.export_edges()
            return sorted(
                (a.relation_ids[i], a.node_ids[a.src[i]], a.node_ids[a.dst[i]], float(a.weight[i]),
                 a.relation_types[i]) for i in range(len(a.src))
            )

        assert edges(falkor_store) == edges(kuzu)
        for seeds, hops, cap, types in (
            (["e0"], 1, 500, None), (["e1", "e2"], 2, 60, None), (["e3"], 2, 10_000, ["INFLUENCES", "PART_OF"]),
            (["e7"], 3, 25, None),
        ):
            f = falkor_store.neighbourhood(seeds, hops=hops, max_edges=cap, relation_types=types)
            k = kuzu.neighbourhood(seeds, hops=hops, max_edges=cap, relation_types=types)
            assert f == k, (seeds, hops, cap, types)
        name = data.entities[10].name
        assert falkor_store.find_entities(name.upper()) == kuzu.find_entities(name.upper())
        assert falkor_store.find_entities(name[:-2], fuzzy=True) == kuzu.find_entities(name[:-2], fuzzy=True)
    finally:
        kuzu.close()


def test_open_errors_are_clear(tmp_path: Path, location: StoreLocation) -> None:
    with pytest.raises(ConfigError, match="KG_FALKORDB_URL is not set"):
        FalkorGraphStore.open(Settings.from_env(env={}), location)
    with pytest.raises(ConfigError, match="redis://"):
        FalkorGraphStore.open(Settings.from_env(env={}, falkordb_url="http://x:1"), location)
    gone = f"unix://{tmp_path}/no.sock"
    with pytest.raises(StoreError, match=f"FalkorDB at {gone} is unreachable"):
        FalkorGraphStore.open(Settings.from_env(env={}, falkordb_url=gone), location)


def test_delete_graph(server_settings: Settings, location: StoreLocation) -> None:
    store = FalkorGraphStore.open(server_settings, location)
    store.upsert(small_graph())
    store.close()
    assert delete_graph(server_settings, location) is True
    assert delete_graph(server_settings, location) is False
    reopened = FalkorGraphStore.open(server_settings, location)
    assert reopened.counts()["entities"] == 0
    reopened.close()


def test_connection_lost_mid_query_is_retried_once(falkor_store: FalkorGraphStore, falkordb_url: str) -> None:
    falkor_store.upsert(small_graph())
    admin = redis.Redis.from_url(falkordb_url, decode_responses=True)
    killed: list[int] = []

    def kill_when_running() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not killed:
            for client in admin.client_list():
                # FalkorDB blocks a client (flag b) while a worker thread runs its query.
                if client["cmd"].lower() == "graph.ro_query" and "b" in client["flags"]:
                    killed.append(admin.client_kill_filter(_id=client["id"]))
                    return
            time.sleep(0.002)

    killer = threading.Thread(target=kill_when_running)
    killer.start()
    # A query that runs for a while, so the connection can be cut while it is in flight (private hook:
    # the public methods all go through the same `_query` -> `_call` path).
    rows = falkor_store._query("UNWIND range(1, 3000000) AS x WITH x WHERE x % 3 = 0 RETURN count(x)")
    killer.join()
    assert killed == [1]  # the first attempt's connection was cut mid-query ...
    assert rows == [[1_000_000]]  # ... and the one retry, on a new connection, answered
    admin.close()


def test_server_killed_then_restarted(falkor_server: FalkorServer, tmp_path: Path) -> None:
    settings = Settings.from_env(env={}, falkordb_url=falkor_server.url)
    store = FalkorGraphStore.open(settings, StoreLocation(dir=tmp_path, key="g"))
    store.upsert(small_graph())
    falkor_server.kill()
    with pytest.raises(StoreError, match=f"FalkorDB at {falkor_server.url} is unreachable"):
        store.counts()
    with pytest.raises(StoreError, match="unreachable"):
        store.get_entities(["e1"])
    assert falkor_server.start() == settings.falkordb_url  # same socket, same URL
    assert store.counts()["entities"] == 0  # the dev server keeps nothing on disk ...
    store.upsert(small_graph())  # ... and the same store object works again
    assert store.get_entities(["e1"]) == [small_graph().entities[0]]
    indexes = store._query("CALL db.indexes() YIELD label, properties RETURN label, properties")
    assert {(label, prop) for label, props in indexes for prop in props} == {(lb, p) for lb, p, _ in _INDEXES}
    store.close()


def test_a_timeout_says_whether_the_server_still_answers(falkor_server: FalkorServer) -> None:
    """A query that outlives the socket timeout is told apart from a server that is hung (here: SIGSTOPped)."""
    pool = redis.BlockingConnectionPool.from_url(falkor_server.url, decode_responses=True, socket_timeout=0.3)
    store = FalkorGraphStore(pool, "slow", falkor_server.url)
    store._query("CREATE (:Marker)", write=True)  # a read on a graph that does not exist returns at once
    slow = "UNWIND range(1, 30000000) AS x WITH x WHERE x % 7 = 0 RETURN count(x)"
    with pytest.raises(StoreError, match=r"did not answer within 0.3 s .*still answers PING, so this query is slow"):
        store._query(slow)
    os.kill(falkor_server.pid, signal.SIGSTOP)
    try:
        with pytest.raises(StoreError, match="does not answer PING within 2 s either: it is hung"):
            store._query("RETURN 1")
    finally:
        os.kill(falkor_server.pid, signal.SIGCONT)
    pool.disconnect()


def test_script_status_and_idempotent_start(falkordb_url: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    run_dir = Path(falkordb_url.removeprefix("unix://")).parent
    status = run_script("falkordb", "status", run_dir=run_dir)
    assert status.returncode == 0 and f"KG_FALKORDB_URL={falkordb_url}" in status.stdout
    again = run_script("falkordb", "start", run_dir=run_dir)
    assert f"KG_FALKORDB_URL={falkordb_url}" in again.stdout and "already running" in again.stderr
    empty = tmp_path_factory.mktemp("none")
    stopped = run_script("falkordb", "status", run_dir=empty)
    assert stopped.returncode == 3 and "stopped" in stopped.stdout
