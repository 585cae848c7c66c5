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
