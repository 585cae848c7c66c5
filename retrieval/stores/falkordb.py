"""FalkorDB GraphStore: the server back end, with the same behaviour as the Kuzu store.

Data never reaches a query's text: every value travels in FalkorDB's `CYPHER name=value` parameter header as
a quoted literal (see `cypher_literal`), and relation types are a property filtered with `IN $types`. The
header is the server's own parameter mechanism (the falkordb client builds the same), so a value can end its
string literal only if quoting were wrong; tests store and query hostile strings to show it is not.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import numpy as np
import orjson
import redis
from falkordb import Graph
from redis.backoff import NoBackoff
from redis.retry import Retry

from retrieval.errors import ConfigError, StoreError, ValidationError
from retrieval.models import Chunk, Entity, GraphChanges, GraphData, Relation, Subgraph
from retrieval.stores.base import EdgeArrays, StoreLocation, expand, fuzzy_ids, unique

if TYPE_CHECKING:
    from retrieval.config import Settings

BATCH = 2_000  # rows per UNWIND: large enough to amortise a round trip, small enough to keep headers ~1 MB
EXPORT_BATCH = 10_000  # smallest internal-id range per export query
EXPORT_WORKERS = 4  # parallel export connections
CONNECT_TIMEOUT_S = 5.0
PROBE_TIMEOUT_S = 2.0  # the PING that tells a slow query from a hung server after a timeout
SOCKET_TIMEOUT_S = 120.0  # bulk upserts and exports of 1M edges are single long queries
MAX_CONNECTIONS = 16
READ_TIMEOUT_MS = 60_000  # the server aborts a read query after this (a runaway scan must not stall it)
INDEX_BUILD_WAIT_S = 900.0
# FalkorDB's range indexes miss string keys longer than 4096 bytes (measured on 4.16: an equality lookup
# returns nothing). Ids are capped below that (ingest caps them at 512 characters anyway); longer names are
# matched by a scan that the planner cannot send to the index.
INDEX_KEY_MAX_BYTES = 4_000

# Records are read in the verbose protocol (hiredis parses it in C; the compact one is parsed value by value in
# Python, ~1 s for 2,000 hub entities with their chunk lists). Lists come joined by $sep with their size; a
# record whose split does not give that size (a string held the separator) is read again as typed arrays.
_ENTITY_FIELDS = "e.id, e.name, e.type, e.description, e.properties, e.aliases, e.source_chunks"
_ENTITY_JOINED = (
    "e.id, e.name, e.type, e.description, e.properties, size(coalesce(e.aliases, [])), "
    "string.join(coalesce(e.aliases, []), $sep), size(coalesce(e.source_chunks, [])), "
    "string.join(coalesce(e.source_chunks, []), $sep)"
)
_RELATION_FIELDS = (
    "r.id, a.id, b.id, r.relation_type, r.description, r.weight, r.vector_db_ref_id, r.source_chunks, "
    "r.valid_at, r.invalid_at"
)
_RELATION_JOINED = (
    "r.id, a.id, b.id, r.relation_type, r.description, r.weight, r.vector_db_ref_id, "
    "size(coalesce(r.source_chunks, [])), string.join(coalesce(r.source_chunks, []), $sep), r.valid_at, r.invalid_at"
)
_GET_ENTITIES = "UNWIND $ids AS id MATCH (e:Entity {id: id}) RETURN "
# toString() keeps the planner off the index, for the keys it cannot match (see _index_finds): a scan
_SCAN_ENTITIES = "UNWIND $ids AS id MATCH (e:Entity) WHERE toString(e.id) = id RETURN "
_SCAN_RELATIONS = "UNWIND $ids AS id MATCH (a)-[r:REL]->(b) WHERE toString(r.id) = id RETURN "
# Unlabelled endpoints: with labels, FalkorDB 4.16 plans a label scan per id before using the edge index.
_GET_RELATIONS = "UNWIND $ids AS id MATCH (a)-[r:REL {id: id}]->(b) RETURN "
_TOUCHING = (  # relations touching the entities $ids, optionally of the types $types; `o` is the other end
    "UNWIND $ids AS id MATCH (:Entity {id: id})-[r:REL]-(o:Entity) WHERE $types IS NULL OR r.relation_type IN $types"
)
_INDEXES = (  # (label or edge type, property, statement)
    ("Entity", "id", "CREATE INDEX FOR (e:Entity) ON (e.id)"),
    ("Entity", "name_lower", "CREATE INDEX FOR (e:Entity) ON (e.name_lower)"),
    ("Entity", "aliases_lower", "CREATE INDEX FOR (e:Entity) ON (e.aliases_lower)"),
    ("Chunk", "id", "CREATE INDEX FOR (c:Chunk) ON (c.id)"),
    ("REL", "id", "CREATE INDEX FOR ()-[r:REL]-() ON (r.id)"),
)


def connection_pool(url: str) -> redis.ConnectionPool:
    """A bounded, blocking pool for `redis://host:port`, `rediss://...` or `unix:///path.sock`."""
    if not url:
        raise ConfigError(
            "KG_FALKORDB_URL is not set; start a local server with `scripts/falkordb start` and export the "
            "KG_FALKORDB_URL line it prints"
        )
    if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise ConfigError(f"KG_FALKORDB_URL must be redis://host:port or unix:///path/to.sock, got {url!r}")
    return redis.BlockingConnectionPool.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
        max_connections=MAX_CONNECTIONS,
        timeout=30,  # seconds a caller waits for a free pooled connection
        retry=Retry(NoBackoff(), 0),  # the store retries exactly once itself (see FalkorGraphStore._call)
    )


def cypher_literal(value: Any) -> str:
    """A Cypher literal for a JSON-like value without maps: strings, numbers, null, booleans, nested lists.

    JSON string syntax is Cypher's, except that FalkorDB does not decode `\\u00XX`: the control characters
    orjson writes that way go back in raw (FalkorDB's own quoting leaves them raw too).
    """
    try:
        text = orjson.dumps(value).decode()
    except orjson.JSONEncodeError as exc:
        raise ValidationError(f"FalkorDB cannot store this value (not valid Unicode, or out of range): {exc}") from exc
    return _CONTROL_ESCAPE.sub(_raw_control, text) if "\\u00" in text else text


_CONTROL_ESCAPE = re.compile(r"(\\+)u00([01][0-9a-fA-F])")


def _raw_control(match: re.Match[str]) -> str:
    slashes = match.group(1)
    if len(slashes) % 2 == 0:  # an escaped backslash followed by the text "u00XX": not an escape
        return match.group(0)
    return slashes[:-1] + chr(int(match.group(2), 16))


def with_params(query: str, params: dict[str, Any] | None) -> str:
    """Prefix `query` with FalkorDB's `CYPHER name=value` parameter header (values: see `cypher_literal`).

    NUL is refused: the server's C parser would cut the header there.
    """
    if not params:
        return query
    if any(isinstance(v, dict) for v in params.values()):
        raise TypeError("FalkorDB parameters here are lists and scalars; pass rows as lists")
    header = "CYPHER " + " ".join(f"{key}={cypher_literal(value)}" for key, value in params.items())
    if "\x00" in header:
        raise ValidationError("FalkorDB cannot store or match strings containing a NUL character")
    return f"{header} {query}"


def _indexable(key: str) -> bool:
    return len(key) * 4 <= INDEX_KEY_MAX_BYTES or len(key.encode("utf-8", "surrogatepass")) <= INDEX_KEY_MAX_BYTES


def _index_finds(key: str) -> bool:
    """Whether an index lookup can find `key`: FalkorDB 4.16's range index never matches a key holding U+0001
    (a scan does), nor one too long to be indexed."""
    return "\x01" not in key and _indexable(key)


def _lookups(ids: Sequence[str], indexed: str, scan: str) -> list[tuple[str, list[str]]]:
    """(query prefix, ids) pairs: indexed lookups in batches, then one scan for the keys the index cannot find."""
    rest = [i for i in ids if not _index_finds(i)]
    batches = [(indexed, list(b)) for b in _batches([i for i in ids if _index_finds(i)])]
    return batches + [(scan, rest)] if rest else batches


def _check_ids(data: GraphData) -> None:
    for kind, ids in (
        ("chunk", (c.id for c in data.chunks)),
        ("entity", (e.id for e in data.entities)),
        ("relation", (r.id for r in data.relations)),
    ):
        for key in ids:
            if not _indexable(key):
                raise ValidationError(
                    f"{kind} id of {len(key)} characters is longer than FalkorDB can index "
                    f"({INDEX_KEY_MAX_BYTES} bytes): {key[:40]!r}..."
                )


def _batches(rows: Sequence[Any], size: int = BATCH) -> Iterator[Sequence[Any]]:
    for start in range(0, len(rows), size):
        yield rows[start : start + size]


# Rows travel as lists (Cypher maps cannot be written as JSON); these name the positions.
_CHUNK_COLS = ("id", "text", "source", "original_document", "chapter", "author", "position")
_ENTITY_COLS = (
    "id", "name", "name_lower", "type", "description", "properties", "aliases", "aliases_lower", "source_chunks",
)
_RELATION_COLS = (  # after the two endpoint ids
    "id", "relation_type", "description", "weight", "vector_db_ref_id", "source_chunks", "valid_at", "invalid_at",
)


def _set_clause(var: str, cols: Sequence[str], offset: int = 0) -> str:
    """`SET v.col = row[i], ...` from the column constants above (never from data)."""
    return "SET " + ", ".join(f"{var}.{col} = row[{i + offset}]" for i, col in enumerate(cols))


def _props(var: str, cols: Sequence[str], offset: int = 0) -> str:
    """`{col: row[i], ...}` from the column constants above (never from data)."""
    return "{" + ", ".join(f"{col}: row[{i + offset}]" for i, col in enumerate(cols)) + "}"


# Two write paths. A fresh graph takes CREATE with inline properties and gets its indexes afterwards
# (measured ~3x faster than MERGE + SET with live indexes on a 1M-edge load). A graph that already has data
# takes MERGE + SET for nodes, and delete-then-create for relations so an edge whose endpoints changed moves.
_CREATE_CHUNKS = f"UNWIND $rows AS row CREATE (c:Chunk {_props('c', _CHUNK_COLS)})"
_MERGE_CHUNKS = f"UNWIND $rows AS row MERGE (c:Chunk {{id: row[0]}}) {_set_clause('c', _CHUNK_COLS)}"
_CREATE_ENTITIES = f"UNWIND $rows AS row CREATE (e:Entity {_props('e', _ENTITY_COLS)}) RETURN e.id, ID(e)"
_MERGE_ENTITIES = (
    f"UNWIND $rows AS row MERGE (e:Entity {{id: row[0]}}) {_set_clause('e', _ENTITY_COLS)} RETURN e.id, ID(e)"
)
_DELETE_RELATIONS = "UNWIND $ids AS id MATCH ()-[r:REL {id: id}]->() DELETE r"
# Endpoints come as internal node ids: the projection through WITH makes FalkorDB seek them by id
# (about 10x faster than two index lookups per row).
_CREATE_RELATIONS = (
    "UNWIND $rows AS row WITH row, row[0] AS s, row[1] AS t MATCH (a:Entity), (b:Entity) WHERE ID(a) = s AND ID(b) = t "
    f"CREATE (a)-[r:REL {_props('r', _RELATION_COLS, 2)}]->(b)"
)


# In-place updates (`write`), one MULTI/EXEC block. Each statement comes in two forms: an index lookup, and a
# scan (toString() keeps the planner off the index) for the keys the index cannot find (see _index_finds).
_WRITE_FORMS: dict[str, tuple[str, str]] = {
    "delete_relations": (_DELETE_RELATIONS,
                         "UNWIND $ids AS id MATCH ()-[r:REL]->() WHERE toString(r.id) = id DELETE r"),
    "delete_entities": ("UNWIND $ids AS id MATCH (e:Entity {id: id}) DETACH DELETE e",
                        "UNWIND $ids AS id MATCH (e:Entity) WHERE toString(e.id) = id DETACH DELETE e"),
    "delete_chunks": ("UNWIND $ids AS id MATCH (c:Chunk {id: id}) DELETE c",
                      "UNWIND $ids AS id MATCH (c:Chunk) WHERE toString(c.id) = id DELETE c"),
    "chunks": (_MERGE_CHUNKS,
               f"UNWIND $rows AS row MATCH (c:Chunk) WHERE toString(c.id) = row[0] {_set_clause('c', _CHUNK_COLS)}"),
    "entities": (_MERGE_ENTITIES.removesuffix(" RETURN e.id, ID(e)"),
                 f"UNWIND $rows AS row MATCH (e:Entity) WHERE toString(e.id) = row[0] "
                 f"{_set_clause('e', _ENTITY_COLS)}"),
    "relations": ("UNWIND $rows AS row MATCH (a:Entity {id: row[0]}), (b:Entity {id: row[1]}) "
                  f"CREATE (a)-[r:REL {_props('r', _RELATION_COLS, 2)}]->(b)",
                  "UNWIND $rows AS row MATCH (a:Entity), (b:Entity) WHERE toString(a.id) = row[0] AND "
                  f"toString(b.id) = row[1] CREATE (a)-[r:REL {_props('r', _RELATION_COLS, 2)}]->(b)"),
}
# A put whose key the index cannot find and that is not stored yet is created (MERGE would look in the index).
_CREATE_FORMS = {"chunks": _CREATE_CHUNKS, "entities": _CREATE_ENTITIES.removesuffix(" RETURN e.id, ID(e)")}


def _chunk_row(c: Chunk) -> list[Any]:
    return [c.id, c.text, c.source, c.original_document, c.chapter, c.author, c.position]


def _entity_row(e: Entity) -> list[Any]:
    return [
        # lookup keys are trimmed as the queries trim them (as on Kuzu), so stray whitespace still finds the name
        e.id, e.name, e.name.strip().lower(), e.type, e.description,
        orjson.dumps(e.properties).decode() if e.properties else None,
        list(e.aliases), [a.strip().lower() for a in e.aliases], list(e.source_chunks),
    ]


def _relation_row(r: Relation) -> list[Any]:
    return [
        r.source_id, r.target_id, r.id, r.relation_type, r.description, float(r.weight), r.vector_db_ref_id,
        list(r.source_chunks), r.valid_at, r.invalid_at,
    ]


def _entity(row: Sequence[Any]) -> Entity:
    eid, name, etype, desc, props, aliases, chunks = row
    return Entity(
        id=eid, name=name, type="entity" if etype is None else etype, description=desc or "",
        properties=orjson.loads(props) if props else {}, aliases=tuple(aliases or ()),
        source_chunks=tuple(chunks or ()),
    )


def _entity_joined(row: Sequence[Any]) -> Entity | None:
    eid, name, etype, desc, props, n_aliases, aliases, n_chunks, chunks = row
    alias_list, chunk_list = _split(aliases, n_aliases), _split(chunks, n_chunks)
    if alias_list is None or chunk_list is None:
        return None
    return _entity((eid, name, etype, desc, props, alias_list, chunk_list))


def _relation_joined(row: Sequence[Any]) -> Relation | None:
    rid, src, dst, rtype, desc, weight, ref, n_chunks, chunks, valid_at, invalid_at = row
    chunk_list = _split(chunks, n_chunks)
    if chunk_list is None:
        return None
    return _relation((rid, src, dst, rtype, desc, weight, ref, chunk_list, valid_at, invalid_at))


def _relation(row: Sequence[Any]) -> Relation:
    rid, src, dst, rtype, desc, weight, ref, chunks, valid_at, invalid_at = row
    return Relation(
        id=rid, source_id=src, target_id=dst, relation_type=rtype, description=desc or "",
        weight=1.0 if weight is None else float(weight), vector_db_ref_id=ref or "",
        source_chunks=tuple(chunks or ()), valid_at=valid_at, invalid_at=invalid_at,
    )


_SEP = "\x1f"  # ASCII unit separator, between strings of an export column
_IN_RANGE = "MATCH (e:Entity) WHERE ID(e) >= $lo AND ID(e) < $hi"
_OUT_OF_RANGE = "MATCH (a:Entity)-[r:REL]->(b:Entity) WHERE ID(a) >= $lo AND ID(a) < $hi"
_EXPORT_NODES_COLUMNS = (
    f"{_IN_RANGE} RETURN toJSON(collect(ID(e))), toJSON(collect(size(coalesce(e.source_chunks, [])))), "
    "toJSON(collect(size(coalesce(e.aliases, [])))), string.join(collect(coalesce(e.id, '')), $sep), "
    "string.join(collect(coalesce(e.name, '')), $sep), string.join(collect(coalesce(e.type, 'entity')), $sep), "
    "string.join(collect(string.join(coalesce(e.source_chunks, []), $sep)), $sep), "
    "string.join(collect(string.join(coalesce(e.aliases, []), $sep)), $sep)"
)
_EXPORT_EDGES_COLUMNS = (
    f"{_OUT_OF_RANGE} RETURN toJSON(collect(ID(a))), toJSON(collect(ID(b))), "
    "toJSON(collect(coalesce(r.weight, 1.0))), string.join(collect(coalesce(r.id, '')), $sep), "
    "string.join(collect(coalesce(r.relation_type, '')), $sep)"
)


def _split(text: str, n: int) -> list[str] | None:
    """`text` split on the separator, or None unless that gives exactly `n` strings."""
    if n == 0:
        return [] if text == "" else None
    parts = text.split(_SEP)
    return parts if len(parts) == n else None


def _split_lists(text: str, sizes: Sequence[int]) -> list[list[str]] | None:
    """Lists joined twice (each list, then all): an empty list still leaves one empty string."""
    parts = _split(text, sum(max(n, 1) for n in sizes))
    if parts is None:
        return None
    out: list[list[str]] = []
    i = 0
    for n in sizes:
        out.append(parts[i : i + n])
        i += max(n, 1)
    return out


@dataclass
class _Columns:
    """One export range, column-wise."""

    internal: list[int] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)
    chunks: list[list[str]] = field(default_factory=list)
    aliases: list[list[str]] = field(default_factory=list)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    weight: list[float] = field(default_factory=list)
    rel_ids: list[str] = field(default_factory=list)
    rel_types: list[str] = field(default_factory=list)

    def fill(self, nodes: Sequence[str], edges: Sequence[str]) -> bool:
        """Fill from the column queries' single rows; False if any split count is off."""
        internal, chunk_sizes, alias_sizes = (orjson.loads(nodes[i]) for i in range(3))
        src, dst, weight = (orjson.loads(edges[i]) for i in range(3))
        n, m = len(internal), len(src)
        ids, names, types = (_split(nodes[i], n) for i in (3, 4, 5))
        chunks, aliases = _split_lists(nodes[6], chunk_sizes), _split_lists(nodes[7], alias_sizes)
        rel_ids, rel_types = _split(edges[3], m), _split(edges[4], m)
        if (ids is None or names is None or types is None or chunks is None or aliases is None
                or rel_ids is None or rel_types is None):
            return False
        self.internal, self.ids, self.names, self.types = internal, ids, names, types
        self.chunks, self.aliases = chunks, aliases
        self.src, self.dst, self.weight, self.rel_ids, self.rel_types = src, dst, weight, rel_ids, rel_types
        return True

    def add_node(self, nid: int, eid: str, name: str, etype: str | None) -> None:
        self.internal.append(nid)
        self.ids.append(eid)
        self.names.append(name)
        self.types.append("entity" if etype is None else etype)
        self.chunks.append([])
        self.aliases.append([])

    def add_edge(self, a: int, b: int, weight: str | None, rid: str, rtype: str) -> None:
        self.src.append(a)
        self.dst.append(b)
        self.weight.append(1.0 if weight is None else float(weight))
        self.rel_ids.append(rid)
        self.rel_types.append(rtype)


class FalkorGraphStore:
    """One graph (named by the version key) on a FalkorDB server. State is a connection pool, hence a class."""

    def __init__(self, pool: redis.ConnectionPool, graph_name: str, where: str, *, committed: bool = False) -> None:
        self._pool = pool
        self._committed = committed  # a committed version's graph must exist; a missing one was lost
        self._client = redis.Redis(connection_pool=pool)
        self._graph = Graph(self._client, graph_name)
        self._name = graph_name
        self._where = where
        self._lock = threading.Lock()
        self._indexed = False
        self._names: tuple[list[str], list[str]] | None = None  # (lowered names+aliases, entity ids) for fuzzy

    @staticmethod
    def delete_graph(settings: Settings, location: StoreLocation) -> bool:
        """Delete the version's graph on the server (see the module's `delete_graph`)."""
        return delete_graph(settings, location)

    @classmethod
    def open(cls, settings: Settings, location: StoreLocation) -> FalkorGraphStore:
        """Connect to `settings.falkordb_url`; the graph is named `location.key`."""
        committed = (location.dir / "manifest.json").is_file()  # catalog.MANIFEST: ingest writes it on commit
        store = cls(connection_pool(settings.falkordb_url), location.key, settings.falkordb_url, committed=committed)
        store._call(lambda: store._client.ping())
        return store

    # --- plumbing ---------------------------------------------------------------------------

    def _call(self, fn: Any) -> Any:
        """Run `fn` once more on a fresh connection if the connection was lost; then report it clearly."""
        for attempt in (1, 2):
            try:
                return fn()
            except redis.ConnectionError as exc:
                # Pooled idle connections point at the same dead socket; drop them before the one retry.
                self._pool.disconnect(inuse_connections=False)
                if attempt == 2:
                    raise StoreError(
                        f"FalkorDB at {self._where} is unreachable: {exc} (is the server running? "
                        "`scripts/falkordb status`)"
                    ) from exc
            except redis.TimeoutError as exc:
                raise StoreError(
                    f"FalkorDB at {self._where} did not answer within "
                    f"{self._pool.connection_kwargs.get('socket_timeout', SOCKET_TIMEOUT_S):g} s ({exc}); "
                    f"{self._liveness()}"
                ) from exc
            except redis.ResponseError as exc:
                if "empty key" in str(exc):
                    if self._committed:
                        raise StoreError(
                            f"FalkorDB at {self._where} has no graph {self._name!r}: the server lost it (restarted "
                            "without persistence?); re-ingest the graph"
                        ) from exc
                    return None  # a graph being built, never written yet: an empty graph
                raise StoreError(f"FalkorDB query on graph {self._name!r} failed: {exc}") from exc
            except UnicodeEncodeError as exc:
                raise ValidationError(f"FalkorDB cannot store text that is not valid Unicode: {exc}") from exc
        raise AssertionError("unreachable")

    def _liveness(self) -> str:
        """After a timeout: whether the server still answers PING on a new connection (a slow query) or not."""
        probe = redis.Redis(connection_pool=redis.ConnectionPool(
            connection_class=self._pool.connection_class,
            **{**self._pool.connection_kwargs, "socket_timeout": PROBE_TIMEOUT_S},
        ))
        try:
            probe.ping()
            return "the server still answers PING, so this query is slow or stuck in the engine"
        except redis.RedisError:
            return f"the server does not answer PING within {PROBE_TIMEOUT_S:.0f} s either: it is hung or overloaded"
        finally:
            probe.connection_pool.disconnect()

    def _query(self, query: str, params: dict[str, Any] | None = None, *, write: bool = False) -> list[list[Any]]:
        """Typed rows (compact protocol): exact strings, arrays and numbers."""
        text = with_params(query, params)
        if write:
            result = self._call(lambda: self._graph.query(text))
        else:
            result = self._call(lambda: self._graph.ro_query(text, timeout=READ_TIMEOUT_MS))
        return [] if result is None else result.result_set

    def _raw(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Rows in the verbose protocol, parsed by hiredis: fast for scalars (doubles arrive as text)."""
        text = with_params(query, params)
        reply = self._call(
            lambda: self._client.execute_command("GRAPH.RO_QUERY", self._name, text, "timeout", READ_TIMEOUT_MS)
        )
        return [] if reply is None or len(reply) < 3 else reply[1]

    def _ensure_indexes(self) -> None:
        """Create missing indexes and wait until they are built.

        FalkorDB builds an index in the background; until it is OPERATIONAL, lookups fall back to scans
        (measured: 2,000 relation ids on a 1M-edge graph then ran for minutes and stalled the server).
        """
        if self._indexed:
            return
        rows = self._query("CALL db.indexes() YIELD label, properties RETURN label, properties")
        have = {(label, prop) for label, props in rows for prop in props}
        for label, prop, statement in _INDEXES:
            if (label, prop) not in have:
                self._query(statement, write=True)
        deadline = time.monotonic() + INDEX_BUILD_WAIT_S
        while True:
            rows = self._query("CALL db.indexes() YIELD label, properties, status RETURN label, properties, status")
            pending = [f"{label}({', '.join(props)})" for label, props, status in rows if status != "OPERATIONAL"]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise StoreError(
                    f"FalkorDB indexes {', '.join(pending)} still building after {INDEX_BUILD_WAIT_S:.0f} s"
                )
            time.sleep(0.05)
        self._indexed = True

    # --- GraphStore -------------------------------------------------------------------------

    def upsert(self, data: GraphData) -> None:
        """Store chunks, entities, then relations, in batched UNWINDs; later records with the same id win.

        Re-running it changes nothing. A relation whose endpoints are not stored raises StoreError and writes
        nothing.
        """
        _check_ids(data)
        chunks = list({c.id: c for c in data.chunks}.values())
        entities = list({e.id: e for e in data.entities}.values())
        relations = list({r.id: r for r in data.relations}.values())
        with self._lock:
            self._names = None
            fresh = self._is_empty()
            if not fresh:
                self._ensure_indexes()
        have = {e.id for e in entities}
        ends = unique(i for r in relations for i in (r.source_id, r.target_id) if i not in have)
        internal = {} if fresh else self._internal_ids(ends)
        missing = [i for i in ends if i not in internal]
        if missing:
            raise StoreError(f"relations refer to entities that are not stored: {', '.join(missing[:5])}")
        for batch in _batches(chunks):
            rows = [_chunk_row(c) for c in batch]
            self._query(_CREATE_CHUNKS if fresh else _MERGE_CHUNKS, {"rows": rows}, write=True)
        for batch in _batches(entities):
            rows = [_entity_row(e) for e in batch]
            done = self._query(_CREATE_ENTITIES if fresh else _MERGE_ENTITIES, {"rows": rows}, write=True)
            internal.update((eid, nid) for eid, nid in done)
        for batch in _batches(relations):
            if not fresh:  # an upserted relation replaces its edge, which may have moved to other endpoints
                self._query(_DELETE_RELATIONS, {"ids": [r.id for r in batch]}, write=True)
            rows = [_relation_row(r) for r in batch]
            for row in rows:
                row[0], row[1] = internal[row[0]], internal[row[1]]
            self._query(_CREATE_RELATIONS, {"rows": rows}, write=True)
        if fresh:
            with self._lock:
                self._indexed = False  # a graph the server lost (restarted) lost its indexes with it
                self._ensure_indexes()

    def write(self, changes: GraphChanges) -> None:
        """Apply `changes` in one MULTI/EXEC block: the server runs it with no other client's command in
        between, so every reader sees the graph before or after it. Relations, entities (with their edges) and
        chunks are deleted, then chunks, entities and relations put (a relation put replaces its edge)."""
        if changes.empty:
            return
        _check_ids(GraphData(entities=changes.entities, relations=changes.relations, chunks=changes.chunks))
        with self._lock:
            self._names = None
        self._ensure_indexes()
        have = {e.id for e in changes.entities}
        ends = unique(i for r in changes.relations for i in (r.source_id, r.target_id) if i not in have)
        stored = self._stored_entities(ends)
        missing = [i for i in ends if i not in stored]
        if missing:
            raise StoreError(f"relations refer to entities that are not stored: {', '.join(missing[:5])}")
        plan: list[tuple[str, dict[str, Any]]] = []
        relation_ids = unique([*changes.delete_relations, *(r.id for r in changes.relations)])
        for kind, ids in (("delete_relations", relation_ids), ("delete_entities", list(changes.delete_entities)),
                          ("delete_chunks", list(changes.delete_chunks))):
            plan += self._forms(kind, [[i] for i in ids], "ids")
        for kind, rows in (("chunks", [_chunk_row(c) for c in changes.chunks]),
                           ("entities", [_entity_row(e) for e in changes.entities])):
            odd = [row[0] for row in rows if not _index_finds(row[0])]
            known = self._stored_scan(kind, odd) if odd else set()
            fresh = [row for row in rows if not _index_finds(row[0]) and row[0] not in known]
            plan += [(_CREATE_FORMS[kind], {"rows": list(b)}) for b in _batches(fresh)]
            plan += self._forms(kind, [row for row in rows if _index_finds(row[0]) or row[0] in known], "rows")
        rel_rows = [_relation_row(r) for r in changes.relations]
        by_index = [row for row in rel_rows if _index_finds(row[0]) and _index_finds(row[1])]
        by_scan = [row for row in rel_rows if not (_index_finds(row[0]) and _index_finds(row[1]))]
        for query, part in zip(_WRITE_FORMS["relations"], (by_index, by_scan), strict=True):
            plan += [(query, {"rows": list(batch)}) for batch in _batches(part)]
        pipe = self._client.pipeline(transaction=True)
        for query, params in plan:
            pipe.execute_command("GRAPH.QUERY", self._name, with_params(query, params))
        self._call(pipe.execute)

    def ready_to_write(self) -> None:
        """Nothing to prepare: the server takes each write as it comes (MULTI/EXEC)."""

    def undescribed(self) -> list[str]:
        """Ids of the relations without a description (one scan of the relationships)."""
        rows = self._raw("MATCH ()-[r:REL]->() WHERE r.description = '' OR r.description IS NULL RETURN r.id")
        return [row[0] for row in rows]

    def _forms(self, kind: str, rows: list[list[Any]], key: str) -> list[tuple[str, dict[str, Any]]]:
        """Batched statements of `kind`: the index form for keys it finds, the scan form for the rest."""
        indexed, scan = _WRITE_FORMS[kind]
        found = [r for r in rows if _index_finds(r[0])]
        rest = [r for r in rows if not _index_finds(r[0])]
        value = (lambda batch: [r[0] for r in batch]) if key == "ids" else (lambda batch: list(batch))
        return [(query, {key: value(batch)}) for query, part in ((indexed, found), (scan, rest)) for batch in
                _batches(part)]

    def _stored_entities(self, ids: Sequence[str]) -> set[str]:
        found = set(self._internal_ids([i for i in ids if _index_finds(i)]))
        odd = [i for i in ids if not _index_finds(i)]
        return found | (self._stored_scan("entities", odd) if odd else set())

    def _stored_scan(self, kind: str, ids: Sequence[str]) -> set[str]:
        label = {"entities": "Entity", "chunks": "Chunk"}[kind]
        rows = self._query(f"UNWIND $ids AS id MATCH (n:{label}) WHERE toString(n.id) = id RETURN n.id",
                           {"ids": list(ids)})
        return {row[0] for row in rows}

    def _internal_ids(self, ids: Sequence[str]) -> dict[str, int]:
        """FalkorDB's internal node ids of the stored entities among `ids`."""
        found: dict[str, int] = {}
        for batch in _batches(ids):
            rows = self._query("UNWIND $ids AS id MATCH (e:Entity {id: id}) RETURN e.id, ID(e)", {"ids": list(batch)})
            found.update((eid, nid) for eid, nid in rows)
        return found

    def _is_empty(self) -> bool:
        return not any(self._totals())

    def _totals(self) -> tuple[int, int, int]:
        """(entities, relations, chunks), each answered from label/type statistics in constant time."""
        totals = []
        for query in (
            "MATCH (e:Entity) RETURN count(e)",
            "MATCH ()-[r:REL]->() RETURN count(r)",
            "MATCH (c:Chunk) RETURN count(c)",
        ):
            rows = self._query(query)
            totals.append(int(rows[0][0]) if rows else 0)
        return totals[0], totals[1], totals[2]

    def get_entities(self, ids: Sequence[str], *, chunks: bool = True) -> list[Entity]:
        """Entities for `ids`, in the order asked, skipping unknown ids. They always carry their chunks:
        FalkorDB's lists arrive joined into one string either way (see _ENTITY_JOINED)."""
        ids = [i for i in unique(ids) if _indexable(i)]  # longer ids cannot have been stored
        found: dict[str, Entity] = {}
        for match, batch in _lookups(ids, _GET_ENTITIES, _SCAN_ENTITIES):
            found.update((e.id, e) for e in self._entities(match, {"ids": batch}))
        return [found[i] for i in ids if i in found]

    def _entities(self, match: str, params: dict[str, Any]) -> list[Entity]:
        """Entities returned by `match` + fields (verbose protocol, lists joined; see _ENTITY_JOINED)."""
        out: list[Entity] = []
        again: list[str] = []
        for row in self._raw(match + _ENTITY_JOINED, {**params, "sep": _SEP}):
            entity = _entity_joined(row)
            if entity is None:
                again.append(row[0])
            else:
                out.append(entity)
        if again:
            out.extend(_entity(row) for row in self._query(_GET_ENTITIES + _ENTITY_FIELDS, {"ids": again}))
        return out

    def get_relations(self, ids: Sequence[str]) -> list[Relation]:
        """Relations for `ids`, in the order asked, skipping unknown ids."""
        ids = [i for i in unique(ids) if _indexable(i)]  # longer ids cannot have been stored
        found: dict[str, Relation] = {}
        for match, batch in _lookups(ids, _GET_RELATIONS, _SCAN_RELATIONS):
            again: list[str] = []
            for row in self._raw(match + _RELATION_JOINED, {"ids": batch, "sep": _SEP}):
                relation = _relation_joined(row)
                if relation is None:
                    again.append(row[0])
                else:
                    found[relation.id] = relation
            if again:
                rows = self._query(match + _RELATION_FIELDS, {"ids": again})
                found.update((row[0], _relation(row)) for row in rows)
        return [found[i] for i in ids if i in found]

    def find_entities(self, name: str, *, fuzzy: bool = False, limit: int = 10) -> list[Entity]:
        """Exact: case-insensitive name or alias match. Fuzzy: rapidfuzz WRatio over names and aliases."""
        key = name.strip().lower()
        if not key or limit < 1:
            return []
        if fuzzy:
            labels, owners = self._name_table()
            return self.get_entities(fuzzy_ids(key, labels, owners, limit))
        if _index_finds(key):
            # Two indexed lookups (name, then alias) instead of an OR, which FalkorDB answers with a scan.
            found = self._entities("MATCH (e:Entity) WHERE e.name_lower = $q RETURN ", {"q": key})
            found += self._entities("MATCH (e:Entity) WHERE $q IN e.aliases_lower RETURN ", {"q": key})
        else:  # toString()/any() keep the planner off the index, which cannot match these keys
            found = self._entities(
                "MATCH (e:Entity) WHERE toString(e.name_lower) = $q OR any(a IN e.aliases_lower WHERE a = $q) "
                "RETURN ",
                {"q": key},
            )
        by_id = {e.id: e for e in found}
        return sorted(by_id.values(), key=lambda e: (e.name.lower() != key, e.id))[:limit]

    def _name_table(self) -> tuple[list[str], list[str]]:
        """Lower-cased names and aliases with their entity ids, fetched once per upsert."""
        with self._lock:
            if self._names is None:
                labels: list[str] = []
                owners: list[str] = []
                for eid, lowered in self._raw("MATCH (e:Entity) RETURN e.id, e.name_lower"):
                    labels.append(lowered)
                    owners.append(eid)
                for eid, alias in self._raw("MATCH (e:Entity) UNWIND e.aliases_lower AS a RETURN e.id, a"):
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
        """Breadth-first k-hop expansion (`base.expand`, as in Kuzu), at most `max_edges` edges by id order."""
        types = None if relation_types is None else list(relation_types)
        seeds = [e.id for e in self.get_entities(seed_ids)]
        reach = expand(seeds, hops, max_edges, types, self._incident, self._neighbours)
        nodes = self.get_entities(reach.nodes)
        return Subgraph(
            nodes=tuple(nodes), edges=tuple(self.get_relations(reach.edges)), total_nodes=reach.total_nodes,
            truncated=reach.truncated,
        )

    def _incident(self, frontier: Sequence[str], types: list[str] | None, limit: int) -> list[tuple[str, str, str]]:
        """The first `limit` relations by id (code-point order, as Python sorts) touching `frontier`."""
        found: dict[str, tuple[str, str, str]] = {}
        for batch in _batches(frontier):
            rows = self._raw(
                f"{_TOUCHING} WITH DISTINCT r RETURN r.id, startNode(r).id, endNode(r).id ORDER BY r.id LIMIT $limit",
                {"ids": list(batch), "types": types, "limit": limit},
            )
            found.update((rid, (rid, src, dst)) for rid, src, dst in rows)
        return [found[rid] for rid in sorted(found)[:limit]]

    def _neighbours(self, frontier: Sequence[str], types: list[str] | None) -> set[str]:
        found: set[str] = set()
        for batch in _batches(frontier):
            rows = self._raw(f"{_TOUCHING} RETURN DISTINCT o.id", {"ids": list(batch), "types": types})
            found.update(row[0] for row in rows)
        return found

    def export_edges(self) -> EdgeArrays:
        """All entities and relations as arrays, read in internal-id ranges on parallel connections.

        Each range comes back column-wise: ids as JSON arrays, strings joined by a separator and split here,
        so a million edges cost a handful of reply objects instead of millions (FalkorDB runs read queries
        on a thread pool, so the ranges also overlap on the server). Weights come with FalkorDB's 15
        significant digits.
        """
        top = self._raw("MATCH (e:Entity) RETURN max(ID(e))")
        max_id = -1 if not top or top[0][0] is None else int(top[0][0])
        step = max(EXPORT_BATCH, -(-(max_id + 1) // (4 * EXPORT_WORKERS)))
        starts = range(0, max_id + 1, step)
        with ThreadPoolExecutor(max_workers=EXPORT_WORKERS) as pool:
            parts = list(pool.map(self._export_range, starts, [step] * len(starts)))
        internal = [i for part in parts for i in part.internal]
        position = np.full(max_id + 1, -1, dtype=np.int64)
        position[np.asarray(internal, dtype=np.int64)] = np.arange(len(internal), dtype=np.int64)
        return EdgeArrays(
            node_ids=[x for part in parts for x in part.ids],
            node_names=[x for part in parts for x in part.names],
            node_types=[x for part in parts for x in part.types],
            node_chunks=[tuple(x) for part in parts for x in part.chunks],
            src=position[np.asarray([x for part in parts for x in part.src], dtype=np.int64)],
            dst=position[np.asarray([x for part in parts for x in part.dst], dtype=np.int64)],
            weight=np.asarray([x for part in parts for x in part.weight], dtype=np.float64),
            relation_ids=[x for part in parts for x in part.rel_ids],
            relation_types=[x for part in parts for x in part.rel_types],
            node_aliases=[tuple(x) for part in parts for x in part.aliases],
        )

    def _export_range(self, lo: int, size: int) -> _Columns:
        """Entities with internal id in [lo, lo+size) and their outgoing relations, column-wise.

        A string that contains the separator makes a split come out with the wrong count; that range is
        then read again row by row (the verbose protocol returns scalars exactly, arrays unwound to rows).
        """
        params = {"lo": lo, "hi": lo + size, "sep": _SEP}
        cols = _Columns()
        nodes = self._raw(_EXPORT_NODES_COLUMNS, params)
        edges = self._raw(_EXPORT_EDGES_COLUMNS, params)
        if nodes and edges and cols.fill(nodes[0], edges[0]):
            return cols
        bounds = {"lo": lo, "hi": lo + size}
        cols = _Columns()
        at: dict[int, int] = {}
        for nid, eid, name, etype in self._raw(f"{_IN_RANGE} RETURN ID(e), e.id, e.name, e.type", bounds):
            at[nid] = len(cols.internal)
            cols.add_node(nid, eid, name, etype)
        for nid, chunk in self._raw(f"{_IN_RANGE} UNWIND e.source_chunks AS c RETURN ID(e), c", bounds):
            cols.chunks[at[nid]].append(chunk)
        for nid, alias in self._raw(f"{_IN_RANGE} UNWIND e.aliases AS a RETURN ID(e), a", bounds):
            cols.aliases[at[nid]].append(alias)
        for row in self._raw(f"{_OUT_OF_RANGE} RETURN ID(a), ID(b), r.weight, r.id, r.relation_type", bounds):
            cols.add_edge(*row)
        return cols

    def counts(self) -> dict[str, int]:
        """entities, relations, chunks, books (distinct chunk books), chapters (distinct book+chapter pairs)."""
        entities, relations, chunks = self._totals()
        rows = self._query(
            "MATCH (c:Chunk) RETURN "  # empty book/chapter names are not books/chapters (as data_counts)
            "count(DISTINCT CASE WHEN c.original_document <> '' THEN c.original_document END), "
            "count(DISTINCT CASE WHEN c.chapter <> '' THEN [c.original_document, c.chapter] END)"
        )
        books, chapters = rows[0] if rows else (0, 0)
        return {
            "entities": entities, "relations": relations, "chunks": chunks,
            "books": int(books), "chapters": int(chapters),
        }

    def close(self) -> None:
        self._pool.disconnect()


def delete_graph(settings: Settings, location: StoreLocation) -> bool:
    """Delete the server-side graph of a retired version; False if it did not exist."""
    pool = connection_pool(settings.falkordb_url)
    try:
        client = redis.Redis(connection_pool=pool)
        return bool(FalkorGraphStore(pool, location.key, settings.falkordb_url)._call(
            lambda: client.delete(location.key)
        ))
    finally:
        pool.disconnect()
