"""The read-only Cypher console on Kuzu (the demo graph): rows and a drawn graph, every kind of write refused by
the engine with the graph unchanged, files outside the graph out of reach, the time limit and the row cap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retrieval.__main__ import app as cli_app
from retrieval.cli import answer as answer_cli
from retrieval.config import Settings
from retrieval.errors import ValidationError
from retrieval.explore.console import explain, run_query
from retrieval.graph import catalog
from retrieval.graph.catalog import GraphHandle
from retrieval.stores.console import ConsoleError

pytestmark = pytest.mark.integration
COUNTS = ("MATCH (e:Entity) WITH count(e) AS e MATCH (c:Chunk) WITH e, count(c) AS c MATCH (r:Relation) "
          "WITH e, c, count(r) AS r MATCH ()-[x:RELATES]->() RETURN e, c, r, count(x)")
LONG = "UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b WITH a, b WHERE (a * b) % 7 = 3 RETURN count(*)"
# Each kind of write the issue names, as Kuzu spells it; a read-only database refuses each before it runs.
WRITES = {
    "CREATE": "CREATE (:Entity {id: 'intruder', name: 'intruder'})",
    "DELETE": "MATCH (e:Entity) DETACH DELETE e",
    "SET": "MATCH (e:Entity) SET e.name = 'renamed'",
    "MERGE": "MERGE (e:Entity {id: 'intruder'})",
    "DROP": "DROP TABLE Chunk",
    "COPY": "COPY Entity FROM '/tmp/kg-lens-console-nowhere.csv'",
    "LOAD": "LOAD FROM '/tmp/kg-lens-console-nowhere.csv' MERGE (:Entity {id: 'loaded'})",
    "procedure": "CALL create_fts_index('Entity', 'names', ['name'])",
}


@pytest.fixture(scope="module")
def setup(demo_data_dir: Path) -> tuple[Settings, GraphHandle]:
    settings = Settings.from_env(env={}, data_dir=demo_data_dir)
    return settings, catalog.resolve(demo_data_dir, "demo")


def test_a_read_query_returns_rows_and_the_graph_they_hold(setup: tuple[Settings, GraphHandle]) -> None:
    settings, handle = setup
    result = run_query(settings, handle, "MATCH (a:Entity {name: $name})-[r:RELATES]-(b:Entity) RETURN a, r, b.name "
                       "AS neighbour LIMIT 5", {"name": "price elasticity"})
    assert result.columns == ("a", "r", "neighbour") and len(result.rows) == 5 and not result.more_rows
    a, r, neighbour = result.rows[0]
    assert a["label"] == "Entity" and a["properties"]["name"] == "price elasticity" and "_id" not in a["properties"]
    assert r["type"] == "RELATES" and r["properties"]["relation_type"] and isinstance(neighbour, str)
    graph = result.subgraph
    assert "price-elasticity" in {n.id for n in graph.nodes} and len(graph.edges) == 5
    assert all(e.source_id in {n.id for n in graph.nodes} and e.target_id in {n.id for n in graph.nodes}
               for e in graph.edges)  # an endpoint no column returned is still drawn (as a placeholder)
    json.dumps(result.model_dump(mode="json"))  # the CLI's --json
    path = run_query(settings, handle, "MATCH p = (a:Entity {name: $s})-[:RELATES*1..2]-(b:Entity) RETURN p LIMIT 3",
                     {"s": "price elasticity"})
    assert path.subgraph.edges and set(path.rows[0][0]) == {"nodes", "relationships"}


@pytest.mark.parametrize("kind", list(WRITES))
def test_every_write_is_refused_by_the_engine_and_changes_nothing(setup: tuple[Settings, GraphHandle],
                                                                  kind: str) -> None:
    settings, handle = setup
    before = run_query(settings, handle, COUNTS).rows
    with pytest.raises(ConsoleError) as refused:
        run_query(settings, handle, WRITES[kind])
    assert refused.value.kind == "refused", str(refused.value)
    assert "Kuzu refused the query" in str(refused.value)
    assert "read-only" in str(refused.value) or "one read statement" in str(refused.value)
    assert run_query(settings, handle, COUNTS).rows == before


def test_what_reaches_outside_the_graph_is_refused(setup: tuple[Settings, GraphHandle], tmp_path: Path) -> None:
    """Kuzu's read-only mode still reads and writes files; the plan check refuses them before they run."""
    settings, handle = setup
    outside = tmp_path / "rows.csv"
    outside.write_text("a,b\n1,2\n")
    for query, why in ((f"COPY (MATCH (e:Entity) RETURN e.name) TO '{tmp_path}/leak.csv'", "COPY_TO writes a file"),
                       (f"LOAD FROM '{outside}' RETURN *", "reads data from outside the database"),
                       (f"EXPORT DATABASE '{tmp_path}/dump'", "EXPORT_DATABASE writes files"),
                       ("CALL timeout=0", "changes a setting"),
                       ("MATCH (e:Entity) RETURN e.name; MATCH (c:Chunk) RETURN c.id", "one read statement")):
        with pytest.raises(ConsoleError, match=why) as refused:
            run_query(settings, handle, query)
        assert refused.value.kind == "refused"
    # nothing was written; Kuzu's planner makes EXPORT's target directory while explaining it (left empty)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "dump") == ["rows.csv"]
    assert not (tmp_path / "dump").exists() or not any((tmp_path / "dump").iterdir())


def test_time_limit_row_cap_and_bad_input(setup: tuple[Settings, GraphHandle]) -> None:
    settings, handle = setup
    with pytest.raises(ConsoleError, match="stopped at the console's time limit of 0.3 s") as stopped:
        run_query(settings, handle, LONG, timeout_ms=300)
    assert stopped.value.kind == "timeout"
    capped = run_query(settings, handle, "MATCH (e:Entity) RETURN e.id", max_rows=10)
    assert len(capped.rows) == 10 and capped.more_rows and capped.showing == "showing 10 of ≥11 rows"
    with pytest.raises(ConsoleError, match="Kuzu cannot run the query: Parser exception") as invalid:
        run_query(settings, handle, "MATCH (e:Entity RETURN e")
    assert invalid.value.kind == "invalid"
    with pytest.raises(ValidationError):
        run_query(settings, handle, "MATCH (e) RETURN e", {"x}) DETACH DELETE e //": 1})
    with pytest.raises(ValidationError, match="empty"):
        run_query(settings, handle, "   ")
    assert "SCAN_NODE_TABLE" in explain(settings, handle, "MATCH (e:Entity) RETURN e.name")
    with pytest.raises(ConsoleError, match="read-only"):
        explain(settings, handle, WRITES["CREATE"])


def test_cli_cypher(demo_data_dir: Path) -> None:
    answer_cli.register(cli_app)
    runner = CliRunner()
    args = ["--data-dir", str(demo_data_dir)]
    out = runner.invoke(cli_app, ["cypher", "MATCH (e:Entity) WHERE e.name = $n RETURN e.name AS name, e.type AS type",
                                  "--params", '{"n": "price elasticity"}', *args])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[:3] == ["name             | type   ", "-----------------+--------",
                                           "price elasticity | concept"]
    assert "1 row in" in out.output and "time limit 10 s, at most 1,000 rows" in out.output
    query = "MATCH (a:Entity)-[r:RELATES]->(b) RETURN a, r, b LIMIT 2"
    out = runner.invoke(cli_app, ["cypher", query, "--json", *args])
    record = json.loads(out.output)
    assert record["backend"] == "kuzu" and len(record["rows"]) == 2 and record["subgraph"]["edges"]
    out = runner.invoke(cli_app, ["cypher", WRITES["DELETE"], *args])
    assert out.exit_code == 2 and out.output.startswith("error: Kuzu refused the query")
    out = runner.invoke(cli_app, ["cypher", "RETURN 1", "--params", "{oops", *args])
    assert out.exit_code == 2 and "parameters are not valid JSON" in out.output
