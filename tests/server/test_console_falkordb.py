"""The read-only Cypher console on FalkorDB (GRAPH.RO_QUERY), on the demo graph's records in a server graph:
rows and a drawn graph, every kind of write refused by the server with the graph unchanged, LOAD CSV out of reach,
the server-side time limit, and parameters of every JSON kind sent in the CYPHER header."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.config import Settings
from retrieval.explore.console import explain, run_query
from retrieval.graph.catalog import GraphHandle
from retrieval.ingest.bundle import load_bundle
from retrieval.stores.base import StoreLocation
from retrieval.stores.console import ConsoleError
from retrieval.stores.falkordb import FalkorGraphStore
from tests.conftest import DEMO_BUNDLE

pytestmark = pytest.mark.server
LONG = "UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b WITH a, b WHERE (a * b) % 7 = 3 RETURN count(*)"
WRITES = {  # the list, as FalkorDB spells each
    "CREATE": "CREATE (:Entity {id: 'intruder'})",
    "DELETE": "MATCH (e:Entity) DETACH DELETE e",
    "SET": "MATCH (e:Entity) SET e.name = 'renamed'",
    "MERGE": "MERGE (:Entity {id: 'intruder'})",
    "DROP": "DROP INDEX ON :Entity(id)",
    "LOAD": "LOAD CSV FROM 'file:///nowhere.csv' AS row CREATE (:Entity {id: row[0]})",
    "procedure": "CALL db.idx.fulltext.createNodeIndex('Entity', 'name')",
}


@pytest.fixture
def graph(falkor_store: FalkorGraphStore, location: StoreLocation) -> GraphHandle:
    falkor_store.upsert(load_bundle(DEMO_BUNDLE))
    return GraphHandle(name="demo", version="v", dir=location.dir, manifest={"key": location.key})


def test_console_on_falkordb(server_settings: Settings, falkor_store: FalkorGraphStore, graph: GraphHandle,
                             tmp_path: Path) -> None:
    s = server_settings
    result = run_query(s, graph, "MATCH (a:Entity {name: $name})-[r:REL]-(b:Entity) RETURN a, r, b LIMIT 5",
                       {"name": "price elasticity"})
    assert result.backend == "falkordb" and result.columns == ("a", "r", "b") and len(result.rows) == 5
    assert result.rows[0][0]["label"] == "Entity" and result.rows[0][1]["properties"]["relation_type"]
    assert "price-elasticity" in {n.id for n in result.subgraph.nodes} and len(result.subgraph.edges) == 5
    path = run_query(s, graph, "MATCH p = (a:Entity {name: $n})-[:REL*1..2]-(b) RETURN p LIMIT 2",
                     {"n": "price elasticity"})
    assert path.subgraph.edges and set(path.rows[0][0]) == {"nodes", "relationships"}
    echo = run_query(s, graph, "RETURN $m AS m, $l AS l", {"m": {"a b": ["x'y", None]}, "l": [1, 2.5, True]})
    assert echo.rows == (({"a b": ["x'y", None]}, [1, 2.5, True]),)  # maps, quotes and lists survive the header

    before = falkor_store.counts()
    for kind, query in WRITES.items():
        with pytest.raises(ConsoleError, match="FalkorDB refused the query") as refused:
            run_query(s, graph, query)
        assert refused.value.kind == "refused", (kind, str(refused.value))
    with pytest.raises(ConsoleError, match="LOAD CSV reads a file or URL"):
        run_query(s, graph, "LOAD CSV FROM 'file:///etc/hostname' AS row RETURN row")
    with pytest.raises(ConsoleError, match="cannot run the query") as copy:  # FalkorDB's Cypher has no COPY
        run_query(s, graph, f"COPY (MATCH (e:Entity) RETURN e.name) TO '{tmp_path}/leak.csv'")
    assert copy.value.kind == "invalid" and not list(tmp_path.iterdir())
    assert falkor_store.counts() == before

    with pytest.raises(ConsoleError, match="time limit of 0.3 s") as stopped:
        run_query(s, graph, LONG, timeout_ms=300)
    assert stopped.value.kind == "timeout"
    capped = run_query(s, graph, "MATCH (e:Entity) RETURN e.id", max_rows=10)
    assert len(capped.rows) == 10 and capped.more_rows
    assert "Node By Label Scan" in explain(s, graph, "MATCH (e:Entity) RETURN e.name")
    with pytest.raises(ConsoleError, match="the plan writes"):
        explain(s, graph, WRITES["CREATE"])
    assert falkor_store.counts() == before


# Every statement kind of FalkorDB's Cypher that could change a graph, and a CALL of every procedure the server
# lists (`CALL dbms.procedures()`): each read-only call runs, each write is refused, and the graph, its indexes
# and constraints and the server's key space are the same afterwards.
STATEMENTS = {
    **WRITES,
    "REMOVE": "MATCH (e:Entity) REMOVE e.name",
    "REMOVE label": "MATCH (e:Entity) REMOVE e:Entity",
    "SET label": "MATCH (e:Entity) SET e:Intruder",
    "DETACH DELETE one": "MATCH (e:Entity {name: 'price elasticity'}) DETACH DELETE e",
    "FOREACH": "FOREACH (i IN [1, 2] | CREATE (:Entity {id: 'x'}))",
    "CALL subquery": "CALL { CREATE (:Entity {id: 'x'}) } RETURN 1",
    "CREATE INDEX": "CREATE INDEX FOR (e:Entity) ON (e.type)",
    "CREATE FULLTEXT INDEX": "CREATE FULLTEXT INDEX FOR (e:Entity) ON (e.description)",
    "CREATE VECTOR INDEX": "CREATE VECTOR INDEX FOR (e:Entity) ON (e.v) OPTIONS {dimension: 2, "
                           "similarityFunction: 'euclidean'}",
    "CREATE CONSTRAINT": "CREATE CONSTRAINT ON (e:Entity) ASSERT e.id IS UNIQUE",
    "PROFILE write": "PROFILE CREATE (:Entity {id: 'x'})",
    "two statements": "MATCH (e:Entity) RETURN e.id LIMIT 1; CREATE (:Entity {id: 'x'})",
}
PROCEDURES = {  # arguments for those that take some; the others are called with none
    "algo.betweenness": "CALL algo.betweenness({}) YIELD node, score RETURN count(node)",
    "algo.BFS": "MATCH (a:Entity) WITH a LIMIT 1 CALL algo.BFS(a, 2, 'REL') YIELD nodes RETURN size(nodes)",
    "algo.labelPropagation": "CALL algo.labelPropagation({}) YIELD node, communityId RETURN count(node)",
    "algo.MSF": "CALL algo.MSF({}) YIELD edges RETURN count(edges)",
    "algo.pageRank": "CALL algo.pageRank('Entity', 'REL') YIELD node, score RETURN count(node)",
    "algo.SPpaths": "MATCH (a:Entity), (b:Entity) WITH a, b LIMIT 1 CALL algo.SPpaths({sourceNode: a, "
                    "targetNode: b, relTypes: ['REL'], maxLen: 3}) YIELD path RETURN count(path)",
    "algo.SSpaths": "MATCH (a:Entity) WITH a LIMIT 1 CALL algo.SSpaths({sourceNode: a, relTypes: ['REL'], "
                    "maxLen: 2}) YIELD path RETURN count(path)",
    "algo.WCC": "CALL algo.WCC({}) YIELD node, componentId RETURN count(node)",
    "db.idx.fulltext.createNodeIndex": "CALL db.idx.fulltext.createNodeIndex('Entity', 'name')",
    "db.idx.fulltext.drop": "CALL db.idx.fulltext.drop('Entity')",
    "db.idx.fulltext.queryNodes": "CALL db.idx.fulltext.queryNodes('Entity', 'price') YIELD node RETURN count(node)",
    "db.idx.fulltext.queryRelationships": "CALL db.idx.fulltext.queryRelationships('REL', 'price') YIELD "
                                          "relationship RETURN count(relationship)",
    "db.idx.vector.queryNodes": "CALL db.idx.vector.queryNodes('Entity', 'v', 3, vecf32([0.1, 0.2])) YIELD node "
                                "RETURN count(node)",
    "db.idx.vector.queryRelationships": "CALL db.idx.vector.queryRelationships('REL', 'v', 3, vecf32([0.1, 0.2])) "
                                        "YIELD relationship RETURN count(relationship)",
}


def _everything(store: FalkorGraphStore) -> tuple[object, ...]:
    """The graph's nodes and relationships with labels and properties, its indexes and constraints, and the
    server's key space (the console must not create or drop a graph or any other key). FalkorDB keeps its own
    capped stream of query statistics per graph (`telemetry{graph}`), which any query may start: not data."""
    def rows(query: str) -> list[list[object]]:
        return store._graph.ro_query(query).result_set  # type: ignore[no-any-return]

    client = store._client
    return (rows("MATCH (n) RETURN id(n), labels(n), properties(n) ORDER BY id(n)"),
            rows("MATCH (a)-[r]->(b) RETURN id(r), type(r), id(a), id(b), properties(r) ORDER BY id(r)"),
            rows("CALL db.indexes()"), rows("CALL db.constraints()"),
            sorted(client.execute_command("GRAPH.LIST")),
            sorted(k for k in client.keys("*") if not k.startswith("telemetry{")))


def test_no_statement_or_procedure_changes_the_graph(server_settings: Settings, falkor_store: FalkorGraphStore,
                                                     graph: GraphHandle) -> None:
    before = _everything(falkor_store)
    listed = run_query(server_settings, graph, "CALL dbms.procedures() YIELD name RETURN name").rows
    names = [row[0] for row in listed]
    assert len(names) >= 20 and "db.idx.fulltext.createNodeIndex" in names
    calls = {name: PROCEDURES.get(name, f"CALL {name}()") for name in names}
    answers = {}
    for kind, query in {**STATEMENTS, **calls}.items():
        try:
            answers[kind] = f"{len(run_query(server_settings, graph, query).rows)} rows"
        except ConsoleError as exc:
            answers[kind] = f"{exc.kind}: {exc}"
        assert _everything(falkor_store) == before, f"{kind} changed the graph ({answers[kind]})"
    refused = [k for k, a in answers.items() if a.startswith("refused")]
    assert {*WRITES, "FOREACH", "CALL subquery", "CREATE VECTOR INDEX", "PROFILE write", "REMOVE label",
            "db.idx.fulltext.createNodeIndex", "db.idx.fulltext.drop"} <= set(refused), answers
    ran = [k for k, a in answers.items() if a.endswith("rows")]
    assert {"algo.pageRank", "algo.BFS", "db.labels", "db.meta.stats", "dbms.functions"} <= set(ran), answers
