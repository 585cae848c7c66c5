"""Kuzu GraphStore: the embedded default back end, one on-disk database per graph version.

Layout: `Entity`, `Chunk` and `Relation` node tables hold every field of the records (primary keys give
index lookups by id), and a lean `RELATES` edge table (id, relation_type, weight) carries the topology.
Relations are stored as nodes as well because Kuzu has no index on edge properties: fetching relations
by id from a 1M-edge table was a full scan (0.1-0.8 s); as primary-key lookups it takes a few ms, and the
lean edge table also loads and exports faster.

Every value reaches Kuzu as a query parameter; query strings are built from the constants below only.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kuzu
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from retrieval.errors import StoreError, ValidationError
from retrieval.models import Chunk, Entity, GraphChanges, GraphData, Relation, Subgraph
from retrieval.stores.base import EdgeArrays, StoreLocation, fuzzy_ids, unique

if TYPE_CHECKING:
    from retrieval.config import Settings

BATCH = 2_000  # rows per UNWIND on the incremental (MERGE) path
PER_QUERY = 32  # ids per UNION ALL of primary-key lookups (see _union_all)
ROWS_PER_LOOKUP = 2_000  # a hash join over N rows costs about as much as N / 2000 indexed lookups (measured)
FRONTIER_BATCH = 2_000  # node offsets per `IN $offsets` filter

_SCHEMA = (
    "CREATE NODE TABLE IF NOT EXISTS Chunk(id STRING, text STRING, source STRING, original_document STRING, "
    "chapter STRING, author STRING, position INT64, PRIMARY KEY(id))",
    "CREATE NODE TABLE IF NOT EXISTS Entity(id STRING, name STRING, name_lower STRING, type STRING, "
    "description STRING, properties STRING, aliases STRING[], aliases_lower STRING[], source_chunks STRING[], "
    "PRIMARY KEY(id))",
    "CREATE NODE TABLE IF NOT EXISTS Relation(id STRING, source_id STRING, target_id STRING, relation_type STRING, "
    "description STRING, weight DOUBLE, vector_db_ref_id STRING, source_chunks STRING[], valid_at STRING, "
    "invalid_at STRING, PRIMARY KEY(id))",
    "CREATE REL TABLE IF NOT EXISTS RELATES(FROM Entity TO Entity, id STRING, relation_type STRING, weight DOUBLE)",
)
_TABLES = ("Chunk", "Entity", "Relation", "RELATES")

# Kuzu 0.11.3 cannot recover a database whose write failed on a full disk: closing it then aborts the process
# ("Invalid transaction type to rollback") or spins forever in rollbackCheckpoint (both seen here on a full
# tmpfs). So bulk COPYs run in a child process, which checkpoints before it closes and, on any error, exits
# without closing; the parent reports the error and never reopens that database. The child also exits when
# its parent dies (a killed ingest), so it never writes into a build directory that is being cleaned up.
_COPY_CHILD = r"""
import json, os, sys, threading, time
import kuzu

job = json.load(sys.stdin)
parent = os.getppid()

def watch_parent():
    while os.getppid() == parent:
        time.sleep(0.2)
    os._exit(3)

threading.Thread(target=watch_parent, daemon=True).start()
try:
    db = kuzu.Database(job["path"])
    conn = kuzu.Connection(db)
    for statement in job["statements"]:
        conn.execute(statement)
    conn.execute("CHECKPOINT")
    conn.close()
    db.close()
except BaseException as exc:
    sys.stderr.write(" ".join(str(exc).split()) + "\n")  # one line: the parent reports the last one
    sys.stderr.flush()
    os._exit(1)
"""



def _run_child(path: Path, statements: Sequence[str]) -> str:
    """Run `statements` on the database at `path` in a child process (see _COPY_CHILD); '' or why it failed."""
    job = json.dumps({"path": str(path), "statements": list(statements)})
    proc = subprocess.run([sys.executable, "-c", _COPY_CHILD], input=job, capture_output=True, text=True,
                          check=False)
    if proc.returncode == 0:
        return ""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"the child exited with status {proc.returncode}"


def open_read_only(path: Path, **options: Any) -> kuzu.Database:
    """Open a database read-only; one left with a half-done checkpoint (kuzu.shadow and kuzu.wal, which every
    read-only open then refuses: "Couldn't replay shadow pages") is first repaired by Kuzu's own recovery.

    The repair opens the database read-write in a child process and checkpoints: Kuzu's file lock is per process
    (in this one a read-write open would succeed beside our own read-only handles), so only a child gets Kuzu's
    exclusive lock, and the repair runs only when no process has the database open; a committed version holds no
    uncommitted data, so recovery only completes or drops the interrupted checkpoint."""
    try:
        return kuzu.Database(str(path), read_only=True, **options)
    except RuntimeError as exc:
        if "replay shadow pages" not in str(exc):
            raise
    recover(path)
    return kuzu.Database(str(path), read_only=True, **options)


def recover(path: Path) -> None:
    """Kuzu's own recovery of the database at `path` (replay or drop its WAL and shadow pages, checkpoint), in a
    child process that must get Kuzu's exclusive lock (see open_read_only)."""
    why = _run_child(path, [])
    if why:
        raise StoreError(f"Kuzu database {path} was left with an interrupted checkpoint (kuzu.shadow / kuzu.wal); "
                         f"it is repaired on the first open when no other process has it open: {why}")


_CHUNK_COLS = ("id", "text", "source", "original_document", "chapter", "author", "position")
_ENTITY_COLS = (
    "id", "name", "name_lower", "type", "description", "properties", "aliases", "aliases_lower", "source_chunks",
)
_RELATION_COLS = (
    "id", "source_id", "target_id", "relation_type", "description", "weight", "vector_db_ref_id", "source_chunks",
    "valid_at", "invalid_at",
)
_EDGE_COLS = ("from", "to", "id", "relation_type", "weight")
_LIST = pa.list_(pa.string())
_ARROW_TYPES: dict[str, pa.DataType] = {
    "position": pa.int64(), "weight": pa.float64(), "aliases": _LIST, "aliases_lower": _LIST, "source_chunks": _LIST,
}


def _merge(label: str, cols: Sequence[str]) -> str:
    """`UNWIND $rows ... MERGE ... SET` over column names from the constants above (never from data)."""
    sets = ", ".join(f"n.{col} = row.{col}" for col in cols[1:])
    return f"UNWIND $rows AS row MERGE (n:{label} {{id: row.id}}) SET {sets}"


def _fields(var: str, cols: Sequence[str], skip: frozenset[str] = frozenset()) -> str:
    """`v.col AS col, ...` (`NULL AS col` for a skipped one): UNION ALL branches need the same column names."""
    return ", ".join(f"NULL AS {col}" if col in skip else f"{var}.{col} AS {col}" for col in cols)


@lru_cache(maxsize=256)
def _union_all(branch: str, n: int) -> str:
    """`branch` once per key parameter $p0..$p{n-1}, joined by UNION ALL.

    Only a `{id: $scalar}` pattern makes Kuzu use its primary-key index; a list of ids (`IN $ids`, or
    UNWIND) scans the whole table, measured at 0.1-3 s on 1M rows against a few ms for 32 indexed branches.
    """
    return " UNION ALL ".join(branch.replace("$key", f"$p{i}") for i in range(n))


_MERGE_CHUNKS = _merge("Chunk", _CHUNK_COLS)
_MERGE_ENTITIES = _merge("Entity", _ENTITY_COLS)
_MERGE_RELATIONS = _merge("Relation", _RELATION_COLS)
_ENTITY_BY_ID = f"MATCH (e:Entity {{id: $key}}) RETURN {_fields('e', _ENTITY_COLS)}"
_NO_CHUNKS = frozenset({"source_chunks"})  # a hub's list runs to thousands of ids: 47 ms for 16 hubs, 9 without
_ENTITY_BY_ID_BARE = f"MATCH (e:Entity {{id: $key}}) RETURN {_fields('e', _ENTITY_COLS, _NO_CHUNKS)}"
_RELATION_BY_ID = f"MATCH (r:Relation {{id: $key}}) RETURN {_fields('r', _RELATION_COLS)}"
_ENTITY_OFFSET = "MATCH (e:Entity {id: $key}) RETURN e.id AS id, offset(id(e)) AS o"
_EDGE_FIELDS = "r.id AS id, r.source_id AS s, r.target_id AS t, r.relation_type AS rt, r.weight AS w"
_EDGE_BY_ID = f"MATCH (r:Relation {{id: $key}}) RETURN {_EDGE_FIELDS}"
_EDGES_BY_IDS = f"UNWIND $ids AS key MATCH (r:Relation {{id: key}}) RETURN {_EDGE_FIELDS}"
_DELETE_EDGES = (
    "UNWIND $rows AS row MATCH (a:Entity {id: row.source_id})-[e:RELATES]->(b:Entity {id: row.target_id}) "
    "WHERE e.id = row.id DELETE e"
)
_CREATE_EDGES = (
    "UNWIND $rows AS row MATCH (a:Entity {id: row.source_id}), (b:Entity {id: row.target_id}) "
    "CREATE (a)-[:RELATES {id: row.id, relation_type: row.relation_type, weight: row.weight}]->(b)"
)
_FIND_EXACT = (
    f"MATCH (e:Entity) WHERE e.name_lower = $q OR list_contains(e.aliases_lower, $q) "
    f"RETURN {_fields('e', _ENTITY_COLS)}"
)
# Many ids at once: one hash join over the whole table (see KuzuGraphStore._lookup).
_ENTITIES_BY_IDS = f"UNWIND $ids AS key MATCH (e:Entity {{id: key}}) RETURN {_fields('e', _ENTITY_COLS)}"
_ENTITIES_BY_IDS_BARE = (
    f"UNWIND $ids AS key MATCH (e:Entity {{id: key}}) RETURN {_fields('e', _ENTITY_COLS, _NO_CHUNKS)}"
)
_RELATIONS_BY_IDS = f"UNWIND $ids AS key MATCH (r:Relation {{id: key}}) RETURN {_fields('r', _RELATION_COLS)}"
_OFFSETS_BY_IDS = "UNWIND $ids AS key MATCH (e:Entity {id: key}) RETURN e.id AS id, offset(id(e)) AS o"
# The traversal keys nodes by their offset in the Entity table: an integer list filter is ~10x cheaper than a
# string one, and the edge queries then need no join back to the node table. The filtered node comes first in
# each pattern: written the other way round, Kuzu scanned every edge (measured 260 ms against 28 ms).
_EDGE_RETURN = " RETURN r.id, offset(id(a)), offset(id(b)) ORDER BY r.id LIMIT $limit"
_OUT_EDGES = "MATCH (a:Entity)-[r:RELATES]->(b:Entity) WHERE offset(id(a)) IN $offsets"
_IN_EDGES = "MATCH (b:Entity)<-[r:RELATES]-(a:Entity) WHERE offset(id(b)) IN $offsets"
_NEIGHBOUR_OFFSETS = "MATCH (a:Entity)-[r:RELATES]-(b:Entity) WHERE offset(id(a)) IN $offsets"
_TYPED = " AND r.relation_type IN $types"
_ENTITIES_AT = f"MATCH (e:Entity) WHERE offset(id(e)) IN $offsets RETURN offset(id(e)), {_fields('e', _ENTITY_COLS)}"
_EXPORT_NODES = "MATCH (e:Entity) RETURN offset(id(e)), e.id, e.name, e.type, e.source_chunks, e.aliases"
_EXPORT_EDGES = (
    "MATCH (a:Entity)-[r:RELATES]->(b:Entity) RETURN offset(id(a)), offset(id(b)), r.weight, r.id, r.relation_type"
)
_COUNTS = {
    "entities": "MATCH (e:Entity) RETURN count(e)",
    "relations": "MATCH (r:Relation) RETURN count(r)",
    "chunks": "MATCH (c:Chunk) RETURN count(c)",
}
# empty book/chapter names are not books/chapters (as ingest's data_counts)
_BOOKS = (
    "MATCH (c:Chunk) RETURN count(DISTINCT CASE WHEN c.original_document <> '' THEN c.original_document END), "
    "count(DISTINCT CASE WHEN c.chapter <> '' THEN [c.original_document, c.chapter] END)"
)
# In-place updates (`write`): one statement per id below WRITE_BY_KEY ids, each a primary-key lookup (`{id: $id}`
# with a scalar is the only pattern Kuzu answers from its index); the UNWIND forms above beyond it (a hash join, a
# scan of the table per batch). Measured on 1M relations (scripts/curation_bench.py, a merge of two hubs rewriting
# 6,497 records): 185 s with the UNWIND forms beyond 256 ids, 31 s one statement per id.
WRITE_BY_KEY = 100_000
_DELETE_RELATION_NODE = "MATCH (r:Relation {id: $id}) DELETE r"
_DELETE_EDGE = "MATCH (a:Entity {id: $s})-[e:RELATES]->(b:Entity {id: $t}) WHERE e.id = $id DELETE e"
_DELETE_ENTITY = "MATCH (e:Entity {id: $id}) DETACH DELETE e"
_DELETE_CHUNK = "MATCH (c:Chunk {id: $id}) DELETE c"
_DELETE_ENTITIES = "UNWIND $ids AS key MATCH (e:Entity {id: key}) DETACH DELETE e"
_DELETE_CHUNKS = "UNWIND $ids AS key MATCH (c:Chunk {id: key}) DELETE c"
_DELETE_RELATION_NODES = "UNWIND $ids AS key MATCH (r:Relation {id: key}) DELETE r"
_CREATE_EDGE = (
    "MATCH (a:Entity {id: $source_id}), (b:Entity {id: $target_id}) "
    "CREATE (a)-[:RELATES {id: $id, relation_type: $relation_type, weight: $weight}]->(b)"
)


def _merge_one(label: str, cols: Sequence[str]) -> str:
    """`MERGE ... SET` of one row by its primary key, every value a parameter (column names from the constants)."""
    sets = ", ".join(f"n.{col} = ${col}" for col in cols[1:])
    return f"MERGE (n:{label} {{id: $id}}) SET {sets}"


_MERGE_ONE = {"Chunk": _merge_one("Chunk", _CHUNK_COLS), "Entity": _merge_one("Entity", _ENTITY_COLS),
              "Relation": _merge_one("Relation", _RELATION_COLS)}
_SAFE_PATH = re.compile(r"^[A-Za-z0-9_./\-]+$")


Columns = dict[str, list[Any]]


def _plain(records: Sequence[Any], cols: Sequence[str]) -> Columns:
    return {col: list(map(attrgetter(col), records)) for col in cols}


def _chunk_columns(chunks: Sequence[Chunk]) -> Columns:
    return _plain(chunks, _CHUNK_COLS)


def _entity_columns(entities: Sequence[Entity]) -> Columns:
    cols = _plain(entities, ("id", "name", "type", "description", "aliases", "source_chunks"))
    # Lookup keys are trimmed as the queries are, so a name stored with stray spaces is still found.
    cols["name_lower"] = [name.strip().lower() for name in cols["name"]]
    cols["aliases_lower"] = [[a.strip().lower() for a in aliases] for aliases in cols["aliases"]]
    try:
        cols["properties"] = [json.dumps(e.properties, ensure_ascii=False) if e.properties else "" for e in entities]
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"entity properties must be JSON values: {exc}") from exc
    return cols


def _relation_columns(relations: Sequence[Relation]) -> Columns:
    cols = _plain(relations, _RELATION_COLS)
    cols["weight"] = [float(w) for w in cols["weight"]]
    return cols


def _row_dicts(columns: Columns, cols: Sequence[str]) -> list[dict[str, Any]]:
    """Row dicts for UNWIND (Kuzu takes lists, not tuples, as list values)."""
    values = [[list(v) if isinstance(v, tuple) else v for v in columns[c]] for c in cols]
    return [dict(zip(cols, row, strict=True)) for row in zip(*values, strict=True)]


def _entity(row: Sequence[Any]) -> Entity:
    eid, name, _lower, etype, desc, props, aliases, _aliases_lower, chunks = row
    return Entity(
        id=eid, name=name, type=etype, description=desc, properties=json.loads(props) if props else {},
        aliases=tuple(aliases or ()), source_chunks=tuple(chunks or ()),
    )


def _relation(row: Sequence[Any]) -> Relation:
    rid, src, dst, rtype, desc, weight, ref, chunks, valid_at, invalid_at = row
    return Relation(
        id=rid, source_id=src, target_id=dst, relation_type=rtype, description=desc, weight=weight,
        vector_db_ref_id=ref, source_chunks=tuple(chunks or ()), valid_at=valid_at, invalid_at=invalid_at,
    )


def _batches(rows: Sequence[Any], size: int = BATCH) -> Iterator[Sequence[Any]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


def _arrow_table(columns: Columns, cols: Sequence[str], names: Sequence[str] | None = None) -> pa.Table:
    """Columns in schema order (Kuzu's COPY maps Parquet columns by position)."""
    try:
        arrays = [pa.array(columns[c], type=_ARROW_TYPES.get(c, pa.string())) for c in cols]
    except UnicodeEncodeError as exc:
        raise ValidationError(f"Kuzu cannot store text that is not valid Unicode: {exc}") from exc
    return pa.Table.from_arrays(arrays, names=list(names or cols))


class _Gate:
    """Readers share the database; a writer (a write, a reconnect, close) waits until no one reads and holds new
    readers back. Re-entrant for the writing thread, whose reads go through the writer's own connection."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._owner: int | None = None
        self._depth = 0

    def owned(self) -> bool:
        return self._owner == threading.get_ident()

    @contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            while self._owner is not None:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def write(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            while self._owner not in (None, me) or (self._owner is None and self._readers):
                self._cond.wait()
            self._owner = me
            self._depth += 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if not self._depth:
                    self._owner = None
                    self._cond.notify_all()


Plans = dict[str, kuzu.PreparedStatement]


class KuzuGraphStore:
    """An embedded Kuzu database. State is a database handle, hence a class.

    Reads run at once on as many connections as there are concurrent readers (a pool, each connection keeping its
    prepared plans; Kuzu executes with the GIL released); writes and reconnects wait for the readers (`_Gate`)."""

    def __init__(self, path: Path, lock_wait_s: float = 120.0) -> None:
        self._path = path
        self._lock_wait_s = lock_wait_s  # how long an open waits for another process's Kuzu lock (KG_LOCK_WAIT_S)
        self._gate = _Gate()
        self._db: kuzu.Database | None = None
        self._conn: kuzu.Connection | None = None  # the writer's connection (and DDL)
        self._pool: list[tuple[kuzu.Connection, Plans]] = []  # idle read connections with their prepared plans
        self._pool_lock = threading.Lock()
        self._names_lock = threading.Lock()
        self._writable = False
        self._lent = False  # opened for writing by ready_to_write: the next write goes back to read-only after it
        self._names: tuple[list[str], list[str]] | None = None  # (lowered names + aliases, entity ids)
        self._sizes_cache: dict[str, int] | None = None
        # A graph version is written once by ingest and then only read, so an existing database opens
        # read-only: the app and a CLI process can then both hold it (Kuzu locks writers out of each other).
        self._connect(writable=not path.exists())

    @staticmethod
    def delete_graph(settings: Settings, location: StoreLocation) -> bool:
        """Nothing to delete outside the version directory: the database lives in it."""
        return False

    @classmethod
    def open(cls, settings: Settings, location: StoreLocation) -> KuzuGraphStore:
        """Open (or create) the database at `location.dir / "kuzu"`."""
        location.dir.mkdir(parents=True, exist_ok=True)
        return cls(location.dir / "kuzu", lock_wait_s=settings.lock_wait_s)

    # --- plumbing ---------------------------------------------------------------------------

    def _connect(self, *, writable: bool) -> None:
        """Open the database; while another process holds Kuzu's file lock against this open (it writes, or it reads
        while this one must write) the open is tried again until `lock_wait_s` has passed, then refused saying so."""
        with self._gate.write():
            self._disconnect()
            deadline, pause = time.monotonic() + self._lock_wait_s, 0.05
            while True:
                try:
                    self._db = kuzu.Database(str(self._path)) if writable else open_read_only(self._path)
                    self._conn = kuzu.Connection(self._db)
                    break
                except RuntimeError as exc:
                    if "Could not set lock on file" not in str(exc):
                        raise StoreError(f"cannot open Kuzu database {self._path}: {exc}") from exc
                    if time.monotonic() >= deadline:
                        why = "a change needs it alone" if writable else "it is being changed"
                        raise StoreError(f"the graph database {self._path} is open in another process (an app serving "
                                         f"it, a search or another curator) and {why}; waited {self._lock_wait_s:g} s "
                                         "(KG_LOCK_WAIT_S): try again once that process is done") from exc
                    time.sleep(pause)
                    pause = min(pause * 2, 0.5)
            self._writable = writable
            if writable:
                for statement in _SCHEMA:
                    self._run(statement)

    def _disconnect(self) -> None:
        with self._gate.write(), self._pool_lock:
            for conn, _plans in self._pool:
                conn.close()
            self._pool.clear()
            if self._conn is not None:
                self._conn.close()
            if self._db is not None:
                self._db.close()
            self._conn = self._db = None

    def _writer(self) -> None:
        if not self._writable:
            self._connect(writable=True)

    def _run(self, query: str, params: dict[str, Any] | None = None, conn: kuzu.Connection | None = None,
             plans: Plans | None = None) -> kuzu.QueryResult:
        """Run on `conn` (default: the writer's), with `plans` kept per query text where given."""
        conn = conn or self._conn
        if conn is None:
            raise StoreError(f"Kuzu database {self._path} is closed")
        try:
            result = conn.execute(self._plan(conn, plans, query) if params else query, params or {})
        except RuntimeError as exc:
            if "Unable to cast Python instance" in str(exc):
                raise ValidationError(f"Kuzu cannot store a value of this record (not valid Unicode?): {exc}") from exc
            raise StoreError(f"Kuzu query failed on {self._path}: {exc}") from exc
        assert not isinstance(result, list)  # one statement per call
        return result

    @staticmethod
    def _plan(conn: kuzu.Connection, plans: Plans | None, query: str) -> str | kuzu.PreparedStatement:
        """A read connection keeps each query's prepared statement: planning a 32-branch lookup costs about as
        much as running it (8 ms against 13 ms on 1M relations). The writer re-plans (DDL)."""
        if plans is None:
            return query
        plan = plans.get(query)
        if plan is None:
            plan = plans[query] = conn.prepare(query)
            if not plan.is_success():
                del plans[query]
                return query  # execute() reports the error
        return plan

    @contextmanager
    def _reading(self) -> Iterator[tuple[kuzu.Connection | None, Plans | None]]:
        """A connection to read on: the writer's inside a write of this thread, else one of the pool's."""
        if self._gate.owned():
            yield self._conn, None
            return
        with self._gate.read():
            if self._db is None:
                raise StoreError(f"Kuzu database {self._path} is closed")
            with self._pool_lock:
                item = self._pool.pop() if self._pool else None
            if item is None:
                item = (kuzu.Connection(self._db), {})
            try:
                yield item[0], None if self._writable else item[1]
            finally:
                with self._pool_lock:
                    self._pool.append(item)  # still this database: a reconnect waits for every reader

    def _rows(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        with self._reading() as (conn, plans):
            result = self._run(query, params, conn, plans)
            rows: list[list[Any]] = []
            while result.has_next():
                row = result.get_next()
                rows.append(row if isinstance(row, list) else list(row.values()))
            return rows

    def _arrow(self, query: str, params: dict[str, Any] | None = None) -> pa.Table:
        with self._reading() as (conn, plans):
            return self._run(query, params, conn, plans).get_as_arrow(chunk_size=1_000_000)

    def _tables_exist(self) -> bool:
        rows = self._rows("CALL show_tables() RETURN name")
        return set(_TABLES) <= {row[0] for row in rows}

    # --- GraphStore -------------------------------------------------------------------------

    def upsert(self, data: GraphData) -> None:
        """Store chunks, entities and relations; later records with the same id win; re-running changes nothing.

        An empty table is filled by `COPY FROM` Parquet (Kuzu's bulk path), a non-empty one by batched MERGE.
        A relation whose endpoints are not stored raises StoreError and writes nothing.
        """
        chunks = list({c.id: c for c in data.chunks}.values())
        entities = list({e.id: e for e in data.entities}.values())
        relations = list({r.id: r for r in data.relations}.values())
        with self._gate.write():
            self._writer()
            self._names = None
            self._check_endpoints(entities, relations)
            sizes = self._sizes()
            try:
                with tempfile.TemporaryDirectory(prefix="kuzu-copy-") as tmp:
                    copies: list[str] = []  # COPY statements for empty tables, run together in a child
                    self._write("Chunk", _chunk_columns(chunks), sizes["chunks"], Path(tmp), copies)
                    self._write("Entity", _entity_columns(entities), sizes["entities"], Path(tmp), copies)
                    self._write_relations(_relation_columns(relations), sizes["relations"], Path(tmp), copies)
                    if copies:
                        self._bulk_copy(copies)
            finally:
                self._sizes_cache = None

    def write(self, changes: GraphChanges) -> None:
        """Apply `changes` in one Kuzu transaction: relations, entities (with their edges) and chunks deleted,
        then chunks, entities and relations put (a relation whose endpoints changed moves). A read-only store
        reopens writable for it and read-only after, so other processes can read the version again."""
        if changes.empty:
            return
        with self._gate.write():
            was_writable, self._lent = self._writable and not self._lent, False
            self._writer()
            self._names = None
            try:
                self._check_endpoints(changes.entities, changes.relations)
                edge_cols = ("id", "source_id", "target_id", "relation_type", "weight")
                moved = [*changes.delete_relations, *(r.id for r in changes.relations)]
                old = {row[0]: row for row in self._lookup("relations", _EDGE_BY_ID, _EDGES_BY_IDS, unique(moved))}
                statements: list[tuple[str, dict[str, Any]]] = []
                edges = [dict(zip(edge_cols, old[i], strict=True)) for i in unique(moved) if i in old]
                statements += self._each(_DELETE_EDGE, _DELETE_EDGES, [
                    {"id": e["id"], "s": e["source_id"], "t": e["target_id"]} for e in edges], edges)
                statements += self._each(_DELETE_RELATION_NODE, _DELETE_RELATION_NODES,
                                         [{"id": i} for i in changes.delete_relations], list(changes.delete_relations))
                statements += self._each(_DELETE_ENTITY, _DELETE_ENTITIES,
                                         [{"id": i} for i in changes.delete_entities], list(changes.delete_entities))
                statements += self._each(_DELETE_CHUNK, _DELETE_CHUNKS,
                                         [{"id": i} for i in changes.delete_chunks], list(changes.delete_chunks))
                for label, columns, cols in (
                    ("Chunk", _chunk_columns(changes.chunks), _CHUNK_COLS),
                    ("Entity", _entity_columns(changes.entities), _ENTITY_COLS),
                    ("Relation", _relation_columns(changes.relations), _RELATION_COLS),
                ):
                    rows = _row_dicts(columns, cols) if columns["id"] else []
                    merge = {"Chunk": _MERGE_CHUNKS, "Entity": _MERGE_ENTITIES, "Relation": _MERGE_RELATIONS}[label]
                    statements += self._each(_MERGE_ONE[label], merge, rows, rows)
                new_edges = _row_dicts(_relation_columns(changes.relations), edge_cols) if changes.relations else []
                statements += self._each(_CREATE_EDGE, _CREATE_EDGES, new_edges, new_edges)
                self._transaction(statements)
            finally:
                self._sizes_cache = None
                if not was_writable:
                    self._connect(writable=False)  # closing the writer checkpoints: the change is in the files

    def ready_to_write(self) -> None:
        """Open the database for writing now (waiting for other processes' locks, at most `lock_wait_s`)."""
        with self._gate.write():
            if not self._writable:
                self._writer()
                self._lent = True

    def undescribed(self) -> list[str]:
        """Ids of the relations without a description (one scan of the Relation table)."""
        return [row[0] for row in self._rows("MATCH (r:Relation) WHERE r.description = '' OR r.description IS NULL "
                                             "RETURN r.id")]

    @staticmethod
    def _each(one: str, many: str, params: list[dict[str, Any]], rows: list[Any]) -> list[tuple[str, dict[str, Any]]]:
        """One indexed statement per row for a few rows; batched UNWINDs (a hash join over the table) for many."""
        if len(params) <= WRITE_BY_KEY:
            return [(one, p) for p in params]
        key = "ids" if "$ids" in many else "rows"
        return [(many, {key: list(batch)}) for batch in _batches(rows)]

    def _sizes(self) -> dict[str, int]:
        return {key: int(self._rows(query)[0][0]) for key, query in _COUNTS.items()}

    def _check_endpoints(self, entities: Sequence[Entity], relations: Sequence[Relation]) -> None:
        have = {e.id for e in entities}
        ends = unique(i for r in relations for i in (r.source_id, r.target_id) if i not in have)
        if ends:
            stored = {row[0] for row in self._lookup("entities", _ENTITY_OFFSET, _OFFSETS_BY_IDS, ends)}
            missing = [i for i in ends if i not in stored]
            if missing:
                raise StoreError(f"relations refer to entities that are not stored: {', '.join(missing[:5])}")

    def _write(self, label: str, columns: Columns, stored: int, tmp: Path, copies: list[str]) -> None:
        if not columns["id"]:
            return
        cols = {"Chunk": _CHUNK_COLS, "Entity": _ENTITY_COLS, "Relation": _RELATION_COLS}[label]
        if stored == 0:
            copies.append(self._copy(label, _arrow_table(columns, cols), tmp))
            return
        merge = {"Chunk": _MERGE_CHUNKS, "Entity": _MERGE_ENTITIES, "Relation": _MERGE_RELATIONS}[label]
        self._transaction([(merge, {"rows": list(batch)}) for batch in _batches(_row_dicts(columns, cols))])

    def _write_relations(self, columns: Columns, stored: int, tmp: Path, copies: list[str]) -> None:
        if not columns["id"]:
            return
        if stored == 0:
            self._write("Relation", columns, stored, tmp, copies)
            edges = {**columns, "from": columns["source_id"], "to": columns["target_id"]}
            copies.append(self._copy("RELATES", _arrow_table(edges, _EDGE_COLS), tmp))
            return
        # An edge whose endpoints, type or weight changed is replaced; an unchanged one is left alone.
        edge_cols = ("id", "source_id", "target_id", "relation_type", "weight")
        new = _row_dicts(columns, edge_cols)
        old = {row[0]: row for row in self._lookup("relations", _EDGE_BY_ID, _EDGES_BY_IDS, columns["id"])}
        changed = [row for row in new if tuple(old.get(row["id"], ())) != tuple(row[c] for c in edge_cols)]
        gone = [dict(zip(edge_cols, old[row["id"]], strict=True)) for row in changed if row["id"] in old]
        statements = [(_DELETE_EDGES, {"rows": list(b)}) for b in _batches(gone)]
        statements += [(_MERGE_RELATIONS, {"rows": list(b)}) for b in _batches(_row_dicts(columns, _RELATION_COLS))]
        statements += [(_CREATE_EDGES, {"rows": list(b)}) for b in _batches(changed)]
        self._transaction(statements)

    def _copy(self, table: str, rows: pa.Table, tmp: Path) -> str:
        """Write `rows` to a Parquet file in `tmp`; returns the COPY statement that loads it."""
        path = tmp / f"{table}.parquet"
        pq.write_table(rows, path)
        # COPY takes a literal path, not a parameter; it is our own temp file, and checked to be plain.
        if not _SAFE_PATH.match(str(path)):
            raise StoreError(f"temporary path {path} has characters Kuzu's COPY cannot take")
        return f"COPY {table} FROM '{path}'"  # noqa: S608 - table from _TABLES, path checked above

    def _bulk_copy(self, statements: Sequence[str]) -> None:
        """Run the COPY statements in a child process (see _COPY_CHILD), then reopen the database."""
        self._disconnect()  # Kuzu admits one writer per database file
        why = _run_child(self._path, statements)
        if why:
            free = shutil.disk_usage(self._path.parent).free / 1e6  # Kuzu's own message often hides a full disk
            raise StoreError(f"Kuzu bulk load into {self._path} failed: {why} ({free:.1f} MB free on that disk)")
        self._connect(writable=True)

    def _transaction(self, statements: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self._run("BEGIN TRANSACTION")
        try:
            for query, params in statements:
                self._run(query, params)
        except BaseException as exc:
            try:
                self._run("ROLLBACK")
            except StoreError as failed:
                exc.add_note(f"and the rollback failed: {failed}")
            raise
        self._run("COMMIT")

    def _by_key(self, branch: str, ids: Sequence[str]) -> list[list[Any]]:
        """Rows of `branch` for every id, PER_QUERY indexed lookups per query."""
        rows: list[list[Any]] = []
        for batch in _batches(ids, PER_QUERY):
            # padded to a power of two (repeating the last id) so that few distinct plans are ever prepared
            width = 1 << (len(batch) - 1).bit_length()
            keys = [*batch, *[batch[-1]] * (width - len(batch))]
            rows.extend(self._rows(_union_all(branch, width), {f"p{i}": key for i, key in enumerate(keys)}))
        return rows

    def _lookup(self, table: str, branch: str, joined: str, ids: Sequence[str]) -> list[list[Any]]:
        """Rows by primary key: indexed lookups for a few ids, one hash join over the table for many."""
        if len(ids) <= max(PER_QUERY, self._table_sizes()[table] // ROWS_PER_LOOKUP):
            return self._by_key(branch, ids)
        return self._rows(joined, {"ids": list(ids)})

    def _table_sizes(self) -> dict[str, int]:
        sizes = self._sizes_cache  # a write sets it to None; two readers may both count, to the same result
        if sizes is None:
            sizes = self._sizes_cache = self._sizes()
        return sizes

    def get_entities(self, ids: Sequence[str], *, chunks: bool = True) -> list[Entity]:
        """Entities for `ids`, in the order asked, skipping unknown ids (`chunks=False`: no source_chunks)."""
        ids = unique(ids)
        queries = (_ENTITY_BY_ID, _ENTITIES_BY_IDS) if chunks else (_ENTITY_BY_ID_BARE, _ENTITIES_BY_IDS_BARE)
        found = {row[0]: _entity(row) for row in self._lookup("entities", *queries, ids)}
        return [found[i] for i in ids if i in found]

    def get_relations(self, ids: Sequence[str]) -> list[Relation]:
        """Relations for `ids`, in the order asked, skipping unknown ids."""
        ids = unique(ids)
        found = {row[0]: _relation(row) for row in self._lookup("relations", _RELATION_BY_ID, _RELATIONS_BY_IDS, ids)}
        return [found[i] for i in ids if i in found]

    def find_entities(self, name: str, *, fuzzy: bool = False, limit: int = 10) -> list[Entity]:
        """Exact: case-insensitive name or alias equality. Fuzzy: rapidfuzz WRatio over names and aliases."""
        key = name.strip().lower()
        if not key or limit < 1:
            return []
        if not fuzzy:
            found = [_entity(row) for row in self._rows(_FIND_EXACT, {"q": key})]
            return sorted(found, key=lambda e: (e.name.strip().lower() != key, e.id))[:limit]
        labels, owners = self._name_table()
        return self.get_entities(fuzzy_ids(key, labels, owners, limit))

    def _name_table(self) -> tuple[list[str], list[str]]:
        with self._names_lock:  # built once by one reader; writers never take this lock (they reset _names)
            if self._names is None:
                table = self._arrow("MATCH (e:Entity) RETURN e.id, e.name_lower, e.aliases_lower")
                ids = table.column(0).to_pylist()
                labels = table.column(1).to_pylist()
                owners = list(ids)
                for eid, aliases in zip(ids, table.column(2).to_pylist(), strict=True):
                    for alias in aliases or ():
                        labels.append(alias)
                        owners.append(eid)
                self._names = (labels, owners)
            return self._names

    def neighbourhood(
        self,
        seed_ids: Sequence[str],
        *,
        hops: int = 1,
        max_edges: int = 500,
        relation_types: Sequence[str] | None = None,
    ) -> Subgraph:
        """Breadth-first k-hop expansion over edges of either direction, at most `max_edges` edges (by id order).

        When the cap cuts a hop short, `truncated` is set and `total_nodes` counts the nodes within reach up to
        that hop (the seeds, every node reached so far and every neighbour of the hop's frontier).
        """
        types = None if relation_types is None else list(relation_types)
        found = dict(self._lookup("entities", _ENTITY_OFFSET, _OFFSETS_BY_IDS, unique(seed_ids)))  # id -> offset
        reached = dict.fromkeys(found[i] for i in unique(seed_ids) if i in found)  # offsets, in order
        frontier = list(reached)
        edges: list[str] = []
        kept: set[str] = set()
        truncated = False
        total = 0
        for _ in range(max(hops, 0)):
            if not frontier:
                break
            nxt: list[int] = []
            # Edges kept at the previous hop come back (they touch the frontier); hence max_edges + 1.
            for rid, src, dst in self._incident(frontier, types, max_edges + 1):
                if rid in kept:
                    continue
                if len(edges) >= max_edges:
                    truncated = True
                    break
                edges.append(rid)
                kept.add(rid)
                for node in (src, dst):
                    if node not in reached:
                        reached[node] = None
                        nxt.append(node)
            if truncated:
                around = self._neighbour_offsets(frontier, types)
                total = len(np.union1d(around, np.fromiter(reached, dtype=np.int64)))
                break
            frontier = nxt
        nodes = self._entities_at(list(reached))
        return Subgraph(
            nodes=tuple(nodes), edges=tuple(self.get_relations(edges)), total_nodes=total or len(nodes),
            truncated=truncated,
        )

    def _incident(self, frontier: Sequence[int], types: list[str] | None, limit: int) -> list[tuple[str, int, int]]:
        """The first `limit` edges by id touching `frontier`: (relation id, source offset, target offset)."""
        where = _TYPED if types is not None else ""
        rows: dict[str, tuple[str, int, int]] = {}
        for batch in _batches(frontier, FRONTIER_BATCH):
            params: dict[str, Any] = {"offsets": list(batch), "limit": limit}
            if types is not None:
                params["types"] = types
            for head in (_OUT_EDGES, _IN_EDGES):
                rows.update((rid, (rid, a, b)) for rid, a, b in self._rows(head + where + _EDGE_RETURN, params))
        return [rows[rid] for rid in sorted(rows)[:limit]]

    def _entities_at(self, offsets: Sequence[int]) -> list[Entity]:
        """Entities at these Entity-table offsets, in the order given."""
        found: dict[int, Entity] = {}
        for batch in _batches(offsets, FRONTIER_BATCH):
            found.update((row[0], _entity(row[1:])) for row in self._rows(_ENTITIES_AT, {"offsets": list(batch)}))
        return [found[o] for o in offsets if o in found]

    def _neighbour_offsets(self, frontier: Sequence[int], types: list[str] | None) -> np.ndarray:
        """Offsets of every neighbour of `frontier` (offsets only: no join back to the node table)."""
        query = f"{_NEIGHBOUR_OFFSETS}{_TYPED if types is not None else ''} RETURN DISTINCT offset(id(b))"
        found = [np.zeros(0, dtype=np.int64)]
        for batch in _batches(frontier, FRONTIER_BATCH):
            params: dict[str, Any] = {"offsets": list(batch)}
            if types is not None:
                params["types"] = types
            found.append(self._arrow(query, params).column(0).to_numpy())
        return np.unique(np.concatenate(found))

    def export_edges(self) -> EdgeArrays:
        """All entities and relations as arrays; endpoints map through Kuzu's node offsets, without row loops."""
        nodes = self._arrow(_EXPORT_NODES)
        edges = self._arrow(_EXPORT_EDGES)
        offsets = nodes.column(0).to_numpy()
        position = np.full(int(offsets.max()) + 1 if len(offsets) else 0, -1, dtype=np.int64)
        position[offsets] = np.arange(len(offsets), dtype=np.int64)
        src = edges.column(0).to_numpy() if edges.num_rows else np.zeros(0, dtype=np.int64)
        dst = edges.column(1).to_numpy() if edges.num_rows else np.zeros(0, dtype=np.int64)
        weight = edges.column(2).to_numpy() if edges.num_rows else np.zeros(0)
        return EdgeArrays(
            node_ids=nodes.column(1).to_pylist(),
            node_names=nodes.column(2).to_pylist(),
            node_types=nodes.column(3).to_pylist(),
            node_chunks=[tuple(c or ()) for c in nodes.column(4).to_pylist()],
            src=position[src],
            dst=position[dst],
            weight=np.asarray(weight, dtype=np.float64),
            relation_ids=edges.column(3).to_pylist(),
            relation_types=edges.column(4).to_pylist(),
            node_aliases=[tuple(a or ()) for a in nodes.column(5).to_pylist()],
        )

    def counts(self) -> dict[str, int]:
        """entities, relations, chunks, books (distinct chunk books), chapters (distinct book+chapter pairs)."""
        if not self._writable and not self._tables_exist():
            return dict.fromkeys(("entities", "relations", "chunks", "books", "chapters"), 0)
        sizes = self._sizes()
        books, chapters = self._rows(_BOOKS)[0]
        return {**sizes, "books": int(books), "chapters": int(chapters)}

    def close(self) -> None:
        self._disconnect()
