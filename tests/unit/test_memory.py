"""Graph memory (seed 003): the eight seed cases, path safety, corruption, concurrency and counters."""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval.errors import ValidationError
from retrieval.explore.memory import ID_PATTERN, GraphMemory, check_id, list_namespaces, list_tenants
from retrieval.models import Entity, Relation

NODES = [
    {"id": "marie", "name": "Marie Curie", "type": "person"},
    {"id": "pierre", "name": "Pierre Curie", "type": "person"},
    {"id": "radium", "label": "Radium", "type": "element", "discovered": 1898},
    {"id": "paris", "name": "Paris", "type": "city"},
    {"id": "sorbonne", "name": "Sorbonne", "type": "university"},
]
EDGES = [
    {"source": "marie", "target": "radium", "relation": "discovered", "description": "Marie discovered radium"},
    {"source": "pierre", "target": "radium", "relation": "discovered"},
    {"source": "marie", "target": "pierre", "relation": "married_to"},
    {"source": "pierre", "target": "sorbonne", "relation": "worked_at"},
    {"source": "sorbonne", "target": "paris", "relation": "located_in"},
]


@pytest.fixture
def memory(tmp_path: Path) -> GraphMemory:
    return GraphMemory(tmp_path / "memory")


def store(memory: GraphMemory, tenant: str = "acme", namespace: str = "physics", **kw: object) -> str:
    args: dict = {"nodes": NODES, "edges": EDGES, "keywords": ["radioactivity", "nobel prize"], "tags": ["science"]}
    args.update(kw)
    result = memory.store_graph(tenant, namespace, **args)
    assert result.ok, result.error
    assert result.graph_id
    return result.graph_id


# --- the eight cases of seed 003 --------------------------------------------------------------


def test_search_by_keywords(memory: GraphMemory) -> None:
    curie = store(memory)
    other = store(memory, keywords=["medieval", "castles"], nodes=[{"id": "x", "name": "Castle"}], edges=[])
    result = memory.search_graphs("acme", "nobel prize radioactivity", namespace="physics")
    assert result.ok
    assert [g.graph_id for g in result.graphs] == [curie]
    assert result.graphs[0].score == 1.0
    assert (result.graphs[0].node_count, result.graphs[0].edge_count) == (5, 5)
    # node names count half: "castle" only matches the second graph's node name
    half = memory.search_graphs("acme", "castle nobel", namespace="physics")
    assert [(g.graph_id, g.score) for g in half.graphs] == [(curie, 0.5), (other, 0.25)]
    assert memory.search_graphs("acme", "nothing matches this", namespace="physics").graphs == ()


def test_search_by_tags(memory: GraphMemory) -> None:
    science = store(memory, tags=["Science", "history"])
    store(memory, tags=["history"])
    assert [g.graph_id for g in memory.search_graphs("acme", tags=["science"]).graphs] == [science]
    assert len(memory.search_graphs("acme", tags=["history"]).graphs) == 2
    assert [g.graph_id for g in memory.search_graphs("acme", "radioactivity", tags=["science", "history"]).graphs] == [
        science
    ]
    assert memory.search_graphs("acme", tags=["art"]).graphs == ()
    assert len(memory.search_graphs("acme", tags=["history"], limit=1).graphs) == 1


def test_get_existing_graph(memory: GraphMemory) -> None:
    gid = store(memory, metadata={"title": "Curies", "query": "who discovered radium?"})
    result = memory.get_graph("acme", gid, "physics")
    assert result.ok and result.graph is not None
    graph = result.graph
    assert [n.id for n in graph.nodes] == [n["id"] for n in NODES]
    assert graph.nodes[2].name == "Radium" and graph.nodes[2].properties == {"discovered": 1898}
    assert graph.edges[0] == Relation(
        id="e0", source_id="marie", target_id="radium", relation_type="discovered",
        description="Marie discovered radium",
    )
    assert graph.keywords == ("radioactivity", "nobel prize") and graph.tags == ("science",)
    assert graph.metadata == {"title": "Curies", "query": "who discovered radium?"}
    assert memory.list_graphs("acme", "physics").graphs[0].title == "Curies"


def test_get_missing_graph(memory: GraphMemory) -> None:
    store(memory)
    result = memory.get_graph("acme", "0123456789abcdef", "physics")
    assert not result.ok and result.error_kind == "not_found"
    assert result.error == "no graph '0123456789abcdef' in namespace 'physics'"
    assert not memory.get_graph("acme", "0123456789abcdef", "never-used").ok


def test_bfs_depth_limits(memory: GraphMemory) -> None:
    gid = store(memory)
    one = memory.traverse_graph("acme", gid, "marie", max_depth=1, namespace="physics")
    assert one.ok and one.traversal is not None
    assert one.traversal.depths == {"marie": 0, "radium": 1, "pierre": 1}
    two = memory.traverse_graph("acme", gid, "marie", max_depth=2, namespace="physics").traversal
    assert two is not None and two.depths == {"marie": 0, "radium": 1, "pierre": 1, "sorbonne": 2}
    three = memory.traverse_graph("acme", gid, "marie", max_depth=3, namespace="physics").traversal
    assert three is not None and three.depths["paris"] == 3
    assert next(p.text for p in three.paths if p.nodes[-1].id == "paris") == (
        "Marie Curie --[married_to]--> Pierre Curie --[worked_at]--> Sorbonne --[located_in]--> Paris"
    )
    too_deep = memory.traverse_graph("acme", gid, "marie", max_depth=9, namespace="physics")
    assert not too_deep.ok and too_deep.error_kind == "invalid" and "max_depth" in (too_deep.error or "")
    no_node = memory.traverse_graph("acme", gid, "einstein", namespace="physics")
    assert no_node.error_kind == "not_found" and "'einstein'" in (no_node.error or "")


def test_relation_filter(memory: GraphMemory) -> None:
    gid = store(memory)
    result = memory.traverse_graph("acme", gid, "marie", 3, ["married_to", "worked_at"], "physics").traversal
    assert result is not None
    assert set(result.depths) == {"marie", "pierre", "sorbonne"}  # not radium, not paris (located_in)
    assert {e.relation_type for e in result.subgraph.edges} == {"married_to", "worked_at"}
    inbound = memory.traverse_graph("acme", gid, "radium", 1, ["discovered"], "physics", direction="in").traversal
    assert inbound is not None and set(inbound.depths) == {"radium", "marie", "pierre"}


def test_list_graphs(memory: GraphMemory) -> None:
    assert memory.list_graphs("acme", "physics").graphs == ()
    ids = [store(memory) for _ in range(3)]
    store(memory, namespace="chemistry")
    listed = memory.list_graphs("acme", "physics")
    assert listed.ok and sorted(g.graph_id for g in listed.graphs) == sorted(ids)
    assert [g.graph_id for g in listed.graphs] == ids[::-1]  # newest first
    assert list_namespaces(memory.root, "acme") == ["chemistry", "physics"]
    assert memory.delete_graph("acme", ids[0], "physics").ok
    assert ids[0] not in {g.graph_id for g in memory.list_graphs("acme", "physics").graphs}
    assert memory.get_graph("acme", ids[0], "physics").error_kind == "not_found"
    assert memory.delete_graph("acme", ids[0], "physics").error_kind == "not_found"


def test_tenant_isolation(memory: GraphMemory) -> None:
    gid = store(memory, tenant="acme")
    store(memory, tenant="globex", keywords=["radioactivity"])
    assert memory.get_graph("globex", gid, "physics").error_kind == "not_found"
    assert gid not in {g.graph_id for g in memory.search_graphs("globex", "radioactivity").graphs}
    assert gid not in {g.graph_id for g in memory.list_graphs("globex", "physics").graphs}
    assert memory.traverse_graph("globex", gid, "marie", namespace="physics").error_kind == "not_found"
    assert memory.delete_graph("globex", gid, "physics").error_kind == "not_found"
    assert memory.get_graph("acme", gid, "physics").ok
    assert all(g.tenant == "globex" for g in memory.search_graphs("globex", "radioactivity").graphs)
    assert list_tenants(memory.root) == ["acme", "globex"]


# --- path safety ------------------------------------------------------------------------------

BAD_IDS = ["", "../etc", "..", ".", "a/b", "a\\b", "/abs", "a\x00b", "x" * 65, "-lead", "_lead", "ok\n", " sp",
           "é", "a.b", "a b", "C:", "~root"]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_bad_ids_are_rejected_with_a_clear_error(memory: GraphMemory, bad: str) -> None:
    for result, kind in [
        (memory.store_graph(bad, "ns", NODES, EDGES), "tenant"),
        (memory.store_graph("t", bad, NODES, EDGES), "namespace"),
        (memory.get_graph("t", bad, "ns"), "graph id"),
        (memory.get_graph(bad, "0abc", "ns"), "tenant"),
        (memory.search_graphs(bad, "x"), "tenant"),
        (memory.list_graphs("t", bad), "namespace"),
        (memory.traverse_graph("t", bad, "marie", namespace="ns"), "graph id"),
        (memory.delete_graph("t", bad, "ns"), "graph id"),
    ]:
        assert not result.ok and result.error_kind == "invalid", (bad, result)
        assert result.error and result.error.startswith(f"invalid {kind} ")
    with pytest.raises(ValidationError, match="invalid tenant"):
        check_id("tenant", bad)
    assert not memory.root.exists() or not any(memory.root.rglob("*.json"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ident=st.one_of(
        st.text(max_size=80),
        st.text(alphabet="./\\\x00-_aZ9~: \n", max_size=12),
        st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_-]{0,70}", fullmatch=True),
    )
)
def test_ids_property(tmp_path: Path, ident: str) -> None:
    """Anything that is not a valid id is rejected; whatever is accepted is written inside the root."""
    sandbox = Path(tempfile.mkdtemp(dir=tmp_path, prefix="ex-"))
    root = sandbox / "memory"
    memory = GraphMemory(root)
    valid = ID_PATTERN.fullmatch(ident) is not None
    for result in (memory.store_graph(ident, "ns", NODES[:1], []), memory.store_graph("t", ident, NODES[:1], [])):
        assert result.ok == valid, (ident, result.error)
        assert valid or result.error_kind == "invalid"
    assert [p for p in sandbox.rglob("*") if not p.is_relative_to(root)] == []
    assert all(p.name.startswith("ex-") for p in tmp_path.iterdir())
    for path in root.rglob("*") if root.exists() else []:
        assert path.resolve().is_relative_to(root.resolve())
        assert path.relative_to(root).parts[0] in ("t", ident)


def test_symlinked_namespace_escaping_the_root_is_refused(memory: GraphMemory, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (memory.root / "acme").mkdir(parents=True)
    os.symlink(outside, memory.root / "acme" / "physics")
    result = memory.store_graph("acme", "physics", NODES, EDGES)
    assert not result.ok and "outside the memory root" in (result.error or "")
    assert list(outside.iterdir()) == []


# --- bad input, corruption, durability ---------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "edges", "message"),
    [
        ([], [], "at least one node"),
        ([{"id": "a"}, {"id": "a"}], [], "node ids must be unique"),
        ([{"id": "a"}], [{"source": "a", "target": "ghost"}], "not in the graph"),
        ([{"id": "a"}], [{"source": "a", "target": "a", "colour": "red"}], "unknown keys ['colour']"),
        (["a"], [], "node 0: expected an object"),
        ([{"name": "no id"}], [], "node 0: id"),
        ([{"id": "a", "name": "bad \udc80 surrogate"}], [], "not storable as UTF-8 JSON"),
    ],
)
def test_invalid_graphs_fail_clearly(memory: GraphMemory, nodes: list, edges: list, message: str) -> None:
    result = memory.store_graph("acme", "physics", nodes, edges)
    assert not result.ok and result.error_kind == "invalid"
    assert message in (result.error or "")


def test_hostile_strings_round_trip(memory: GraphMemory) -> None:
    nasty = "<script>alert(1)</script>' OR 1=1 -- \u202e\u200b ../../etc/passwd \x00 " + "名" * 1000
    nodes = [Entity(id="n'1", name=nasty, description=nasty), {"id": "n2", "name": "x"}]
    edges = [Relation(id="e", source_id="n'1", target_id="n2", relation_type=nasty, description=nasty)]
    stored = memory.store_graph("acme", "physics", nodes, edges, keywords=[nasty[:150]], metadata={"q": nasty})
    assert stored.ok, stored.error
    graph = memory.get_graph("acme", stored.graph_id or "", "physics").graph
    assert graph is not None
    assert graph.nodes[0] == nodes[0] and graph.edges[0] == edges[0] and graph.metadata == {"q": nasty}
    assert graph.keywords == (nasty[:150].strip().lower(),)
    assert memory.search_graphs("acme", "passwd alert").graphs[0].graph_id == graph.graph_id
    too_long = memory.store_graph("acme", "physics", nodes, edges, keywords=[nasty])
    assert too_long.error_kind == "invalid" and "at most 200 characters" in (too_long.error or "")


def test_corrupt_graph_file_is_reported(memory: GraphMemory) -> None:
    gid = store(memory)
    path = memory.root / "acme" / "physics" / "graphs" / f"{gid}.json"
    path.write_text('{"graph_id": "trunc', encoding="utf-8")
    result = memory.get_graph("acme", gid, "physics")
    assert not result.ok and result.error_kind == "corrupt"
    assert str(path) in (result.error or "")
    traversal = memory.traverse_graph("acme", gid, "marie", namespace="physics")
    assert traversal.error_kind == "corrupt"
    path.write_text(json.dumps({"graph_id": gid, "nodes": "not a list"}), encoding="utf-8")
    assert memory.get_graph("acme", gid, "physics").error_kind == "corrupt"


def test_corrupt_index_is_reported_and_rebuilt_once_deleted(memory: GraphMemory) -> None:
    gids = {store(memory) for _ in range(2)}
    index = memory.root / "acme" / "physics" / "index.json"
    index.write_bytes(b"\xff\xfe garbage")
    for result in (memory.list_graphs("acme", "physics"), memory.search_graphs("acme", "nobel"), store_result := (
        memory.store_graph("acme", "physics", NODES, EDGES))):
        assert not result.ok and result.error_kind == "corrupt" and str(index) in (result.error or "")
    assert not store_result.ok  # a store never overwrites an index it cannot read
    index.unlink()
    assert {g.graph_id for g in memory.list_graphs("acme", "physics").graphs} >= gids
    assert index.is_file()


def test_writes_leave_no_temp_files(memory: GraphMemory) -> None:
    gid = store(memory)
    memory.delete_graph("acme", gid, "physics")
    store(memory)
    names = sorted(p.name for p in (memory.root / "acme" / "physics").rglob("*") if p.is_file())
    assert len(names) == 3 and names[0] == ".lock" and names[-1] == "index.json"


def test_unwritable_namespace_gives_an_io_failure(memory: GraphMemory) -> None:
    gid = store(memory)
    graphs = memory.root / "acme" / "physics" / "graphs"
    moved = graphs.with_name("moved")
    graphs.rename(moved)
    graphs.write_text("a file where the graphs directory should be")  # works even as root, unlike chmod
    result = memory.store_graph("acme", "physics", NODES, EDGES)
    assert not result.ok and result.error_kind == "io" and "cannot write" in (result.error or "")
    graphs.unlink()
    moved.rename(graphs)
    assert [g.graph_id for g in memory.list_graphs("acme", "physics").graphs] == [gid]  # nothing half-written
    assert store(memory)


# --- concurrency ------------------------------------------------------------------------------


def _store_many(root: str, worker: int, count: int) -> None:
    memory = GraphMemory(Path(root))
    for i in range(count):
        result = memory.store_graph("acme", "shared", [{"id": f"w{worker}-{i}"}], [], keywords=[f"w{worker}"])
        assert result.ok, result.error


def test_concurrent_processes_lose_no_index_entries(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_store_many, args=(str(root), w, 50)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    listed = GraphMemory(root).list_graphs("acme", "shared").graphs
    assert len(listed) == 200
    assert len(list((root / "acme" / "shared" / "graphs").glob("*.json"))) == 200


def test_concurrent_threads_lose_no_index_entries(memory: GraphMemory) -> None:
    threads = [threading.Thread(target=_store_many, args=(str(memory.root), w, 25)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(memory.list_graphs("acme", "shared").graphs) == 100
    assert len(memory.search_graphs("acme", "w2", namespace="shared", limit=100).graphs) == 25


# --- counters ---------------------------------------------------------------------------------


def test_counters_are_per_instance_with_labels(memory: GraphMemory, tmp_path: Path) -> None:
    gid = store(memory)
    memory.search_graphs("acme", "nobel", namespace="physics")
    memory.search_graphs("acme", "nobel")
    memory.get_graph("acme", gid, "physics")
    memory.get_graph("acme", "missing0", "physics")
    memory.get_graph("../x", gid, "physics")
    memory.traverse_graph("acme", gid, "marie", namespace="physics")
    snap = memory.metrics()
    assert snap['graph_memory_searches_total{namespace="physics",outcome="ok",tenant="acme"}'] == 1
    assert snap['graph_memory_searches_total{namespace="*",outcome="ok",tenant="acme"}'] == 1
    assert snap['graph_memory_retrievals_total{namespace="physics",outcome="ok",tenant="acme"}'] == 1
    assert snap['graph_memory_retrievals_total{namespace="physics",outcome="not_found",tenant="acme"}'] == 1
    assert snap['graph_memory_retrievals_total{namespace="physics",outcome="invalid",tenant="<invalid>"}'] == 1
    assert snap['graph_memory_traversals_total{namespace="physics",outcome="ok",tenant="acme"}'] == 1
    text = memory.metrics_text()
    assert "# TYPE graph_memory_searches_total counter" in text
    assert 'graph_memory_traversals_total{namespace="physics",outcome="ok",tenant="acme"} 1.0' in text
    assert GraphMemory(tmp_path / "other").metrics() == {}  # no shared global registry
