"""The console never changes the live version's files (issue 21, item 1a).

Every statement kind of Kuzu's grammar (src/antlr4/Cypher.g4: queries with each updating and reading clause, DDL,
COPY, standalone CALL, macros, comments, transactions and CHECKPOINT, extensions, EXPORT/IMPORT, ATTACH/DETACH/
USE, EXPLAIN/PROFILE) and a CALL of every table function the engine lists (`CALL show_functions()`) is run through
the engine function and the CLI; the live version folder must be byte-identical afterwards (names, sizes, SHA-256)
and the graph must still answer stats, search and the console. The same holds with the plan check switched off:
the guarantee is structural (the console reads a private copy), not the deny-list. A graph left with Kuzu's
shadow and WAL files by anything still opens.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import kuzu
import pytest
import typer
from typer.testing import CliRunner

from retrieval.cli import answer as answer_cli
from retrieval.cli import data as data_cli
from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.errors import RetrievalError
from retrieval.explore.console import run_query
from retrieval.graph import catalog
from retrieval.graph.runtime import open_kg
from retrieval.search.retriever import search
from retrieval.stores import kuzu_console

pytestmark = pytest.mark.integration
cli_app = typer.Typer()
answer_cli.register(cli_app)  # cypher
data_cli.register(cli_app)  # stats
COUNTS = ("MATCH (e:Entity) WITH count(e) AS e MATCH (c:Chunk) WITH e, count(c) AS c MATCH (r:Relation) "
          "WITH e, c, count(r) AS r MATCH ()-[x:RELATES]->() RETURN e, c, r, count(x)")


def statement_kinds(tmp: Path) -> dict[str, str]:
    """One statement per production of Kuzu's grammar (oC_Statement and the clauses of oC_Query)."""
    csv, npy = tmp / "rows.csv", tmp / "col.npy"
    csv.write_text("id,name\nintruder,intruder\n")
    npy.write_bytes(b"\x93NUMPY")
    return {
        "MATCH": "MATCH (e:Entity) RETURN count(e)",
        "CREATE": "CREATE (:Entity {id: 'intruder', name: 'intruder'})",
        "MERGE": "MERGE (e:Entity {id: 'intruder'}) ON CREATE SET e.name = 'x' ON MATCH SET e.name = 'y'",
        "SET": "MATCH (e:Entity) SET e.name = 'renamed'",
        "DELETE": "MATCH (c:Chunk) DELETE c",
        "DETACH DELETE": "MATCH (e:Entity) DETACH DELETE e",
        "UNWIND + CREATE": "UNWIND range(1, 3) AS i CREATE (:Entity {id: 'x' + to_string(i)})",
        "WITH + SET": "MATCH (e:Entity) WITH e LIMIT 1 SET e.description = 'changed'",
        "LOAD FROM": f"LOAD FROM '{csv}' RETURN *",
        "LOAD FROM + MERGE": f"LOAD FROM '{csv}' MERGE (:Entity {{id: id}})",
        "in-query CALL": "CALL show_tables() RETURN *",
        "CREATE USER": "CREATE USER intruder WITH PASSWORD 'x'",
        "CREATE ROLE": "CREATE ROLE intruder",
        "CREATE NODE TABLE": "CREATE NODE TABLE T(id STRING, PRIMARY KEY(id))",
        "CREATE NODE TABLE AS": "CREATE NODE TABLE T2 AS MATCH (e:Entity) RETURN e.id AS id",
        "CREATE REL TABLE": "CREATE REL TABLE R(FROM Entity TO Entity, w DOUBLE)",
        "CREATE REL TABLE GROUP": "CREATE REL TABLE GROUP G(FROM Entity TO Entity, FROM Entity TO Chunk)",
        "CREATE SEQUENCE": "CREATE SEQUENCE s START 1",
        "CREATE TYPE": "CREATE TYPE t AS STRING",
        "nextval": "RETURN nextval('s')",
        "DROP TABLE": "DROP TABLE Chunk",
        "DROP SEQUENCE": "DROP SEQUENCE IF EXISTS s",
        "DROP MACRO": "DROP MACRO m",
        "ALTER ADD": "ALTER TABLE Entity ADD extra STRING DEFAULT 'x'",
        "ALTER DROP": "ALTER TABLE Entity DROP description",
        "ALTER RENAME TABLE": "ALTER TABLE Entity RENAME TO Person",
        "ALTER RENAME PROPERTY": "ALTER TABLE Entity RENAME name TO title",
        "ALTER ADD FROM TO": "ALTER TABLE RELATES ADD FROM Chunk TO Chunk",
        "ALTER DROP FROM TO": "ALTER TABLE RELATES DROP FROM Entity TO Entity",
        "COPY FROM": f"COPY Entity FROM '{csv}'",
        "COPY FROM query": "COPY Relation FROM (MATCH (r:Relation) RETURN r.*)",
        "COPY BY COLUMN": f"COPY Entity FROM ('{npy}') BY COLUMN",
        "COPY TO": f"COPY (MATCH (e:Entity) RETURN e.name) TO '{tmp / 'out.csv'}'",
        "CALL setting": "CALL threads = 1",
        "CALL checkpoint setting": "CALL checkpoint_threshold = 0",
        "CREATE MACRO": "CREATE MACRO m(x) AS x + 1",
        "COMMENT ON": "COMMENT ON TABLE Entity IS 'changed'",
        "BEGIN TRANSACTION": "BEGIN TRANSACTION",
        "BEGIN TRANSACTION READ ONLY": "BEGIN TRANSACTION READ ONLY",
        "COMMIT": "COMMIT",
        "ROLLBACK": "ROLLBACK",
        "CHECKPOINT": "CHECKPOINT",
        "LOAD EXTENSION": "LOAD EXTENSION fts",
        "INSTALL": "INSTALL httpfs",
        "FORCE INSTALL": "FORCE INSTALL json",
        "UNINSTALL": "UNINSTALL fts",
        "UPDATE": "UPDATE fts",
        "EXPORT DATABASE": f"EXPORT DATABASE '{tmp / 'dump'}'",
        "IMPORT DATABASE": f"IMPORT DATABASE '{tmp / 'dump'}'",
        "ATTACH": f"ATTACH '{tmp / 'other.kuzu'}' AS other (dbtype kuzu)",
        "DETACH": "DETACH other",
        "USE": "USE other",
        "EXPLAIN": "EXPLAIN CHECKPOINT",
        "PROFILE": "PROFILE CHECKPOINT",
        "PROFILE write": "PROFILE MATCH (e:Entity) SET e.name = 'renamed'",
        "two statements": "MATCH (e:Entity) RETURN e.id LIMIT 1; CHECKPOINT",
    }


# Arguments for the table functions whose first STRING is not a table name (the rest are derived from the
# signature the engine prints).
_ARGS = {
    "PROJECT_GRAPH": "'g', ['Entity'], ['RELATES']",
    "PROJECT_GRAPH_CYPHER": "'g', 'MATCH (a:Entity)-[r:RELATES]->(b:Entity) RETURN a, r, b'",
    "DROP_PROJECTED_GRAPH": "'g'",
    "PROJECTED_GRAPH_INFO": "'g'",
    "SHOW_CONNECTION": "'RELATES'",
    "CURRENT_SETTING": "'threads'",
    "CREATE_FTS_INDEX": "'Entity', 'fts_idx', ['name']",
    "QUERY_FTS_INDEX": "'Entity', 'fts_idx', 'price'",
    "DROP_FTS_INDEX": "'Entity', 'fts_idx'",
    "CREATE_VECTOR_INDEX": "'Entity', 'vec_idx', 'name'",
    "QUERY_VECTOR_INDEX": "'Entity', 'vec_idx', [0.1, 0.2], 3",
    "DROP_VECTOR_INDEX": "'Entity', 'vec_idx'",
    "_CACHE_ARRAY_COLUMN_LOCALLY": "'Entity', 'aliases'",
}
_BY_TYPE = {"STRING": "'Entity'", "ANY": "'g'", "LIST": "['name']", "ARRAY": "[0.1]", "INT64": "3", "POINTER": "0"}


def table_function_calls(settings: Settings, handle: catalog.GraphHandle, tmp: Path) -> dict[str, str]:
    """A CALL of every table function the engine itself lists (standalone ones alone, others with RETURN *)."""
    listed = run_query(settings, handle, "CALL show_functions() WHERE type CONTAINS 'TABLE' "
                       "RETURN name, type, signature", max_rows=10_000)
    assert len(listed.rows) >= 40, listed.rows  # Kuzu 0.11.3 lists 48
    calls = {}
    for name, kind, signature in listed.rows:
        if name.startswith(("READ_", "JSON_SCAN")):
            args = f"'{tmp / 'rows.csv'}'"
        else:
            types = [t.strip() for t in signature.strip("()").split(",") if t.strip()]
            args = _ARGS.get(name, ", ".join(_BY_TYPE.get(t, "'x'") for t in types))
        tail = "" if kind.startswith("STANDALONE") else " RETURN *"
        calls[f"CALL {name}"] = f"CALL {name}({args}){tail}"
    return calls


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    """Every file under `folder`: relative path -> (size, SHA-256); directories as (-1, '')."""
    out: dict[str, tuple[int, str]] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        out[rel] = (path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest()) if path.is_file() else (-1, "")
    return out


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Cheap per-statement check: names, sizes and modification times."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


@pytest.fixture
def own_graph(demo_data_dir: Path, tmp_path: Path) -> Iterator[tuple[Settings, catalog.GraphHandle]]:
    """A private copy of the demo data directory (the shared one must not be put at risk)."""
    data_dir = tmp_path / "kg"
    shutil.copytree(demo_data_dir, data_dir, symlinks=True, ignore=shutil.ignore_patterns("console"))
    settings = Settings.from_env(env={}, data_dir=data_dir)
    yield settings, catalog.resolve(data_dir, "demo")


def _run(settings: Settings, handle: catalog.GraphHandle, statements: dict[str, str]) -> dict[str, str]:
    """Run each statement through run_query and through the CLI, asserting after each that the live folder's
    files did not change; returns what run_query answered."""
    runner = CliRunner()
    before = listing(handle.dir)
    answers = {}
    for kind, query in statements.items():
        try:
            answers[kind] = f"{len(run_query(settings, handle, query).rows)} rows"
        except RetrievalError as exc:
            answers[kind] = str(exc)
        assert listing(handle.dir) == before, f"{kind}: {query!r} changed the live version ({answers[kind]})"
        out = runner.invoke(cli_app, ["cypher", query, "--data-dir", str(settings.data_dir)])
        assert out.exit_code in (0, 2), (kind, out.output)
        assert listing(handle.dir) == before, f"{kind} through the CLI changed the live version ({out.output})"
    return answers


def _still_works(settings: Settings, handle: catalog.GraphHandle, embedder: Embedder, counts: object) -> None:
    out = CliRunner().invoke(cli_app, ["stats", "--json", "--data-dir", str(settings.data_dir)])
    assert out.exit_code == 0, out.output
    assert '"entities": 248' in out.output and '"DocumentChunks": 96' in out.output, out.output
    kg = open_kg(settings, embedder=embedder)
    try:
        assert search(kg, "price elasticity of demand").facts
    finally:
        kg.close()
    assert run_query(settings, handle, COUNTS).rows == counts


NETWORK = ("INSTALL", "FORCE INSTALL", "UPDATE", "LOAD EXTENSION", "UNINSTALL")  # never run: nothing is downloaded


def test_no_statement_changes_the_live_version(own_graph: tuple[Settings, catalog.GraphHandle], tmp_path: Path,
                                               embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    settings, handle = own_graph
    counts = run_query(settings, handle, COUNTS).rows
    hashes = snapshot(handle.dir)
    kinds = statement_kinds(tmp_path)
    answers = _run(settings, handle, kinds)
    answers |= _run(settings, handle, table_function_calls(settings, handle, tmp_path))
    assert snapshot(handle.dir) == hashes
    assert all("refused" in answers[k] for k in ("CHECKPOINT", "BEGIN TRANSACTION", "CREATE", "COPY TO", "ATTACH",
                                                 "CALL setting", "CALL CREATE_FTS_INDEX")), answers
    assert "crashed" in answers["CALL READ_NPY"]  # a segfault of Kuzu's, in the console's own process
    _still_works(settings, handle, embedder, counts)

    # The guarantee is structural, not the plan check: with it off, CHECKPOINT, transactions, settings, COPY TO,
    # EXPORT/IMPORT and ATTACH really run, on the console's copy; the live version stays byte-identical.
    monkeypatch.setattr(kuzu_console, "CHECK_PLAN", False)
    refused = {k: kinds[k] for k, why in answers.items()
               if k in kinds and "reaches outside the graph" in why and k not in NETWORK}
    assert {"CHECKPOINT", "COMMIT", "CALL setting", "EXPORT DATABASE", "ATTACH", "COPY TO"} <= refused.keys()
    unchecked = _run(settings, handle, refused)
    assert "Cannot write to file" in unchecked["CHECKPOINT"], unchecked  # it ran, and failed on the copy
    assert (tmp_path / "out.csv").is_file()  # COPY TO ran too
    assert snapshot(handle.dir) == hashes
    _still_works(settings, handle, embedder, counts)


def break_like_the_old_console(kuzu_file: Path) -> None:
    """What the console did before: CHECKPOINT on a read-only database writes kuzu.shadow and kuzu.wal and fails."""
    db = kuzu.Database(str(kuzu_file), read_only=True)
    conn = kuzu.Connection(db)
    with pytest.raises(RuntimeError, match="Cannot write to file"):
        conn.execute("CHECKPOINT")
    conn.close()
    db.close()
    assert {"kuzu.shadow", "kuzu.wal"} <= {p.name for p in kuzu_file.parent.iterdir()}
    with pytest.raises(RuntimeError, match="Couldn't replay shadow pages"):
        kuzu.Database(str(kuzu_file), read_only=True)


def test_a_graph_left_with_shadow_and_wal_files_still_opens(own_graph: tuple[Settings, catalog.GraphHandle],
                                                             embedder: Embedder) -> None:
    settings, handle = own_graph
    counts = run_query(settings, handle, COUNTS).rows
    shutil.rmtree(settings.data_dir / "console", ignore_errors=True)  # the console's copy is made from the damage
    break_like_the_old_console(handle.dir / "kuzu")
    assert run_query(settings, handle, COUNTS).rows == counts  # the console reads a repaired private copy
    _still_works(settings, handle, embedder, counts)  # stats and search open the live one: repaired on open
    assert not {"kuzu.shadow", "kuzu.wal"} & {p.name for p in handle.dir.iterdir()}
    db = kuzu.Database(str(handle.dir / "kuzu"), read_only=True)  # and it opens read-only again for everyone
    db.close()
    [copy] = (settings.data_dir / "console").glob(f"{handle.dir.name}+*")  # one copy: of the files as they are now
    assert (copy / "kuzu").is_file() and not (copy / "kuzu").samefile(handle.dir / "kuzu")
    kuzu_console.drop_copy(settings, handle.dir)  # what retiring the version does
    assert not copy.exists()
