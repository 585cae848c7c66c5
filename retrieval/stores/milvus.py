"""Milvus VectorStore: Milvus Lite in the version directory by default, or a Milvus server by URI.

Three collections (base.COLLECTIONS), each `id` VARCHAR primary key, a `vector` searched by inner product
(vectors are L2-normalised, so IP is cosine) and plain scalar payload fields, which the Milvus 2.3 server
supports too (it has no nullable fields and no sparse/BM25). Ids reach filter expressions only as escaped
string literals.

Milvus Lite (milvus-lite 3) keeps rows and payloads, but its search walks every stored row in Python before
it asks its index (measured: 400 ms per query on 100k rows, ~4 s on 1M), so Lite collections get no Milvus
index and are searched through a side index instead: a faiss index per collection next to the database
(`milvus.db.ann/`), exact up to ANN_EXACT_MAX rows and HNSW above, built from the inserted vectors when the
writer finishes (wait_ready, close, or the first search).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
from pymilvus import DataType, MilvusClient, MilvusException

from retrieval.errors import ConfigError, StoreError, ValidationError
from retrieval.stores.base import COLLECTIONS, INT_FIELDS, PAYLOAD_FIELDS, StoreLocation, VectorHit, unique

if TYPE_CHECKING:
    from retrieval.config import Settings

MAX_ID = 512
MAX_TEXT = 65_535  # bytes of UTF-8: Milvus's VARCHAR limit
INSERT_BATCH = 2_000  # rows per insert call: ~3 MB of 384-d vectors, well under gRPC's message limit
GET_BATCH = 1_000  # ids per `id in [...]` filter
CONNECT_TIMEOUT_S = 10.0
CONSISTENCY = "Strong"  # a server reads its own writes only at Strong
# A store that has not written reads at Bounded: a committed version was flushed and indexed before its commit
# (wait_ready), and Strong makes every read wait for the next time tick: ~200 ms per call on Milvus 2.3.
READ_CONSISTENCY = "Bounded"
WAIT_READY_S = 3600.0  # HNSW over 1M 384-d vectors takes ~15 min on 2 quiet cores (100k: 94 s), more under load
SERVER_EF = 256  # HNSW search breadth on a server (see search)
MIN_INDEXED_ROWS = 1024  # Milvus 2.3 indexes no segment smaller (minSegmentNumRowsToEnableIndex)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")
_HNSW = {"index_type": "HNSW", "metric_type": "IP", "params": {"M": 16, "efConstruction": 200}}
ANN_EXACT_MAX = 20_000  # Lite side index: exact inner product up to this many rows, HNSW above
ANN_M = 16  # HNSW links per node
ANN_EF_CONSTRUCTION = 40  # faiss's default; 200 (Milvus's) built 5x slower here for little recall on top
ANN_EF_SEARCH = 256  # 100k hash-384 relation vectors: recall@50 0.92 at 1.6 ms per query (ef 128: 0.81)


def is_server_uri(uri: str) -> bool:
    """True for http(s)://host:port (or tcp://) URIs; anything else is a Milvus Lite path."""
    return uri.startswith(("http://", "https://", "tcp://", "grpc://"))


def collection_names(uri: str, key: str) -> dict[str, str]:
    """Logical -> physical collection names: `{key}_Name` on a server (versions share it), plain on Lite."""
    prefix = f"{key}_" if is_server_uri(uri) else ""
    if prefix and not prefix[0].isalpha():
        prefix = f"kg_{prefix}"  # Milvus names must start with a letter or underscore
    names = {name: prefix + name for name in COLLECTIONS}
    bad = [n for n in names.values() if not _NAME.match(n)]
    if bad:
        raise ConfigError(f"invalid Milvus collection name {bad[0]!r}: use letters, digits and underscores")
    return names


def string_literal(value: str) -> str:
    """A double-quoted Milvus expression literal. Raw CR/LF are not allowed inside one; other characters are."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


class _LiteServers:
    """Counts this process's open stores per Milvus Lite path, to stop its in-process server after the last one.

    pymilvus starts one server per Lite path and never stops it; the server keeps the path's file lock, so the
    same data could not be opened again after ingest renames its build directory. State is real, hence a class.
    """

    def __init__(self) -> None:
        self._users: dict[str, int] = {}
        self._lock = threading.Lock()

    def acquire(self, key: str) -> None:
        with self._lock:
            self._users[key] = self._users.get(key, 0) + 1

    def release(self, key: str) -> None:
        with self._lock:
            self._users[key] -= 1
            if self._users[key] > 0:
                return
            del self._users[key]
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(key)


_LITE = _LiteServers()


def _batches(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))


class MilvusVectorStore:
    """The three collections of one graph version. State is a client connection, hence a class."""

    def __init__(self, client: MilvusClient, names: dict[str, str], where: str, lite_path: Path | None) -> None:
        self._client = client
        self._names = names  # logical collection name -> physical name
        self._where = where
        self._lite_path = lite_path
        self._server = lite_path is None
        self._lock = threading.Lock()
        self._closed = False
        self._loaded: set[str] = set()
        self._wrote = False  # reads wait for this store's own writes (Strong) once it has written
        # Lite side indexes: loaded (ids, faiss index) per collection, and rows inserted but not yet indexed
        self._ann: dict[str, SideIndex] = {}
        self._pending: dict[str, list[tuple[list[str], np.ndarray]]] = {}
        self._ann_lock = threading.RLock()

    @classmethod
    def open(cls, settings: Settings, location: StoreLocation) -> MilvusVectorStore:
        """Connect to `settings.milvus_uri`, or open Milvus Lite at `location.dir / "milvus.db"`.

        On a server every collection is prefixed with `location.key` so graph versions do not collide.
        """
        uri = settings.milvus_uri or str(location.dir / "milvus.db")
        server = is_server_uri(uri)
        names = collection_names(uri, location.key)
        lite_path = None if server else Path(uri)
        if lite_path is not None:
            if lite_path.suffix != ".db":
                raise ConfigError(f"a Milvus Lite path must end in .db (or use http://host:19530), got {uri!r}")
            lite_path.parent.mkdir(parents=True, exist_ok=True)
            _LITE.acquire(os.path.abspath(uri))  # the key pymilvus's server manager uses
        try:
            # Lite has no auth; a server or cluster with auth takes "user:password" or an API key as token.
            token = settings.milvus_token if server else ""
            client = MilvusClient(uri=uri, token=token, timeout=CONNECT_TIMEOUT_S if server else None)
        except MilvusException as exc:
            if lite_path is not None:
                _LITE.release(os.path.abspath(uri))
            hint = "is the server running?" if server else "Milvus Lite lets one process at a time open a database"
            raise StoreError(f"cannot open Milvus at {uri}: {exc.message} ({hint})") from exc
        return cls(client, names, uri, lite_path)

    # --- plumbing ---------------------------------------------------------------------------

    def _call(self, what: str, fn: Any) -> Any:
        if self._closed:
            raise StoreError(f"the Milvus store at {self._where} is closed")
        if self._lite_path is not None and not self._lite_path.exists():
            raise StoreError(f"the Milvus Lite database {self._lite_path} was deleted; re-ingest the graph")
        try:
            with self._lock:
                return fn()
        except MilvusException as exc:
            raise StoreError(f"Milvus {what} failed at {self._where}: {exc.message}") from exc
        except UnicodeEncodeError as exc:
            raise ValidationError(f"Milvus cannot store text that is not valid Unicode: {exc}") from exc

    def _read_level(self) -> str:
        return CONSISTENCY if self._wrote else READ_CONSISTENCY

    def _name(self, collection: str) -> str:
        if collection not in self._names:
            raise StoreError(f"unknown collection {collection!r}; valid: {', '.join(COLLECTIONS)}")
        return self._names[collection]

    def _ready(self, collection: str) -> str | None:
        """The physical name, loaded for reads; None if the collection was never created.

        A (re)started server, Lite's included, holds collections released until `load_collection`.
        """
        name = self._name(collection)
        if name in self._loaded:
            return name
        if not self._call("has_collection", lambda: self._client.has_collection(name)):
            return None
        self._call("load", lambda: self._client.load_collection(name))
        self._loaded.add(name)
        return name

    def _existing(self, collection: str) -> str:
        name = self._ready(collection)
        if name is None:
            missing = self._name(collection)
            raise StoreError(f"Milvus collection {missing} does not exist at {self._where}; ingest first")
        return name

    def _schema(self, collection: str, dim: int) -> Any:
        schema = self._client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=MAX_ID)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        for field in PAYLOAD_FIELDS[collection]:
            if field in INT_FIELDS:
                schema.add_field(field, DataType.INT64)
            else:
                schema.add_field(field, DataType.VARCHAR, max_length=MAX_TEXT)
        return schema

    def _dim(self, name: str) -> int:
        info = self._call("describe", lambda: self._client.describe_collection(name))
        for field in info["fields"]:
            if field["name"] == "vector":
                return int(field["params"]["dim"])
        raise StoreError(f"Milvus collection {name} has no vector field")

    # --- VectorStore ------------------------------------------------------------------------

    def ensure(self, dim: int) -> None:
        """Create the three collections with their index if missing; an existing one must have `dim`."""
        for collection, name in self._names.items():
            if self._call("has_collection", lambda n=name: self._client.has_collection(n)):
                have = self._dim(name)
                if have != dim:
                    raise StoreError(f"Milvus collection {name} holds {have}-d vectors, not {dim}-d; re-ingest")
                continue
            index = self._client.prepare_index_params()
            if self._server:
                index.add_index(field_name="vector", **_HNSW)
            # Lite: no Milvus index (a collection without one is always loaded); the side index serves searches
            schema = self._schema(collection, dim)
            self._call("create_collection", lambda n=name, s=schema, i=index: self._client.create_collection(
                n, schema=s, index_params=i, consistency_level=CONSISTENCY
            ))
            self._loaded.add(name)  # created with an index, hence loaded

    def insert(self, collection: str, rows: Sequence[dict[str, Any]], vectors: np.ndarray) -> None:
        """Write rows (`id` plus payload fields; absent ones stored empty) with their vectors, then flush.

        A row whose id is already stored replaces it, so re-inserting the same data changes nothing.
        """
        name = self._existing(collection)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(rows):
            raise ValidationError(f"{len(rows)} rows need a ({len(rows)}, dim) vector array, got {vectors.shape}")
        if not rows:
            return
        records = [_record(collection, row, vec) for row, vec in zip(rows, vectors, strict=True)]
        # Lite's insert already replaces a row with the same key (its storage keeps the newest write per key),
        # and its upsert only adds a lookup per row; a server's insert would keep both, hence upsert there.
        write = self._client.upsert if self._server else self._client.insert
        self._wrote = True
        for part in _batches(len(records), INSERT_BATCH):
            self._call("insert", lambda p=part: write(name, records[p]))
        # Without a flush, searches scan the growing segment: measured 300 ms instead of 11 ms.
        self._call("flush", lambda: self._client.flush(name))
        if not self._server:
            with self._ann_lock:
                self._pending.setdefault(collection, []).append(([str(r["id"]) for r in records], vectors))

    def search(
        self, collection: str, vectors: np.ndarray, limit: int, *, payload: bool = True
    ) -> list[list[VectorHit]]:
        """The `limit` nearest rows for each query vector (one batched call); score = cosine similarity.
        `payload=False` returns ids and scores only (no row fetch: the cheap way to rank many rows)."""
        name = self._existing(collection)
        queries = np.asarray(vectors, dtype=np.float32)
        if queries.ndim == 1:
            queries = queries[None, :]
        if len(queries) == 0 or limit < 1:
            return [[] for _ in range(len(queries))]
        if not self._server:
            found = self._ann_search(collection, queries, limit, payload)
            if found is not None:
                return found
        fields = list(PAYLOAD_FIELDS[collection]) if payload else []
        params: dict[str, Any] = {"metric_type": "IP"}
        if self._server:
            # Server-specific (H7): ef 64 gave recall@50 0.977 on MuSiQue's 17k relations, ef 256 gave 1.0.
            params["params"] = {"ef": max(SERVER_EF, limit)}
        result = self._call("search", lambda: self._client.search(
            name, data=queries, limit=limit, output_fields=fields, search_params=params,
            consistency_level=self._read_level(),
        ))
        return [
            [VectorHit(id=str(hit["id"]), score=float(hit["distance"]),
                       payload=_payload(collection, hit["entity"]) if payload else {})
             for hit in hits]
            for hits in result
        ]

    def get(self, collection: str, ids: Sequence[str]) -> list[dict[str, Any]]:
        """Rows (`id` plus payload, no vector) for `ids`, in the order asked, skipping unknown ids."""
        fields = list(PAYLOAD_FIELDS[collection])
        found = self._by_ids(collection, ids, fields)
        return [{"id": i, **_payload(collection, found[i])} for i in unique(ids) if i in found]

    def vectors(self, collection: str, ids: Sequence[str]) -> np.ndarray:
        """The stored vectors of `ids`, one row per id in the order asked (a zero row for an unknown id).
        On Lite they come from the side index in memory (8 ms less per call than a query on 1M rows)."""
        local = self._ann_vectors(collection, ids) if self._lite_path is not None else None
        if local is not None:
            return local
        found = self._by_ids(collection, ids, ["vector"])
        dim = len(next(iter(found.values()))["vector"]) if found else self._dim(self._existing(collection))
        out = np.zeros((len(ids), dim), dtype=np.float32)
        for row, i in enumerate(ids):
            if i in found:
                out[row] = found[i]["vector"]
        return out

    def _by_ids(self, collection: str, ids: Sequence[str], fields: list[str]) -> dict[str, dict[str, Any]]:
        name = self._existing(collection)
        wanted = unique(ids)
        found: dict[str, dict[str, Any]] = {}
        for part in _batches(len(wanted), GET_BATCH):
            expr = "id in [" + ", ".join(string_literal(i) for i in wanted[part]) + "]"
            rows = self._call("query", lambda e=expr: self._client.query(
                name, filter=e, output_fields=["id", *fields], consistency_level=self._read_level()
            ))
            found.update((str(row["id"]), row) for row in rows)
        return found

    def count(self, collection: str) -> int:
        """Rows stored in `collection` (0 if it was never created)."""
        name = self._ready(collection)
        if name is None:
            return 0
        rows = self._call("count", lambda: self._client.query(
            name, filter="", output_fields=["count(*)"], consistency_level=self._read_level()
        ))
        return int(rows[0]["count(*)"]) if rows else 0

    def drop(self) -> None:
        """Drop this graph version's collections (only those; other versions on a server stay)."""
        for name in self._names.values():
            if self._call("has_collection", lambda n=name: self._client.has_collection(n)):
                self._call("drop_collection", lambda n=name: self._client.drop_collection(n))
            self._loaded.discard(name)
        if self._lite_path is not None:
            with self._ann_lock:
                self._ann.clear()
                self._pending.clear()
                shutil.rmtree(ann_dir(self._lite_path), ignore_errors=True)

    def wait_ready(self, timeout_s: float = WAIT_READY_S) -> None:
        """Block until every collection is searched through its built index (on Lite: build the side indexes).

        Server-specific (added by H7): Milvus 2.3 serves freshly flushed rows through a temporary IVF index
        until the HNSW index is built and its sealed segments are handed to the query node. Measured on the
        MuSiQue graph's 17k relation vectors: recall@50 0.93 for ~20 s after insert, 1.0 after. Ingest calls
        this before it commits a version, so a committed version always answers from its real index.
        """
        if not self._server:
            self._index_pending()
            return
        deadline = time.monotonic() + timeout_s
        for collection in COLLECTIONS:
            name = self._ready(collection)
            while name is not None and not self._served_from_index(name):
                if time.monotonic() > deadline:
                    raise StoreError(f"Milvus at {self._where} did not finish indexing {name} in {timeout_s:.0f} s")
                time.sleep(0.5)

    def _served_from_index(self, name: str) -> bool:
        info = self._call("describe_index", lambda: self._client.describe_index(name, "vector"))
        segments = self._call("list_loaded_segments", lambda: self._client.list_loaded_segments(name))
        loaded_rows = sum(s.num_rows for s in segments)
        return (
            int(info.get("pending_index_rows", 0)) == 0
            and loaded_rows >= int(info.get("total_rows", 0))  # nothing left in growing segments
            and all(s.index_id or s.num_rows < MIN_INDEXED_ROWS for s in segments)  # small ones are brute-forced
        )

    # --- Lite side index ---------------------------------------------------------------------

    def _index_pending(self, only: str | None = None) -> None:
        """Fold rows inserted since the last build into the side index (the newest write of an id wins): into a
        new base index while the collection is small or has none yet, else into its delta (see SideIndex)."""
        assert self._lite_path is not None
        with self._ann_lock:
            for collection in [c for c in list(self._pending) if only in (None, c)]:
                parts = self._pending.pop(collection)
                ids = [i for part_ids, _ in parts for i in part_ids]
                vecs = np.concatenate([v for _, v in parts])
                side = self._load_ann(collection)
                if side is None:
                    side = SideIndex.build(ids, vecs)
                else:
                    side = side.written(ids, vecs)
                side.save(ann_dir(self._lite_path), collection)
                self._ann[collection] = side

    def _load_ann(self, collection: str) -> SideIndex | None:
        assert self._lite_path is not None
        with self._ann_lock:
            if collection not in self._ann:
                loaded = SideIndex.load(ann_dir(self._lite_path), collection)
                if loaded is None:
                    return None
                self._ann[collection] = loaded
            return self._ann[collection]

    def _ann_vectors(self, collection: str, ids: Sequence[str]) -> np.ndarray | None:
        """Vectors of `ids` from the side index (zero rows for unknown ids); None if there is none."""
        self._index_pending(collection)
        side = self._load_ann(collection)
        return None if side is None else side.vectors(ids)

    def _ann_search(
        self, collection: str, queries: np.ndarray, limit: int, payload: bool = True
    ) -> list[list[VectorHit]] | None:
        """Search the Lite side index; None if this version has none (built before it existed)."""
        self._index_pending(collection)
        side = self._load_ann(collection)
        if side is None:
            return None
        ranked = side.search(queries, limit)
        if not payload:
            return [[VectorHit(id=rid, score=score, payload={}) for rid, score in hits] for hits in ranked]
        rows = {r["id"]: r for r in self.get(collection, [rid for hits in ranked for rid, _ in hits])}
        return [
            [VectorHit(id=rid, score=score, payload=_payload(collection, rows[rid])) for rid, score in hits
             if rid in rows]
            for hits in ranked
        ]

    # --- VectorUpdates ----------------------------------------------------------------------

    def delete(self, collection: str, ids: Sequence[str]) -> None:
        """Remove the rows of `ids` (unknown ids are ignored), from Milvus and from the Lite side index."""
        wanted = unique(str(i) for i in ids)
        if not wanted:
            return
        name = self._existing(collection)
        self._wrote = True
        for part in _batches(len(wanted), GET_BATCH):
            # our own escaped literals: pymilvus's `ids=` quotes string keys without escaping them
            expr = "id in [" + ", ".join(string_literal(i) for i in wanted[part]) + "]"
            self._call("delete", lambda e=expr: self._client.delete(name, filter=e))
        self._call("flush", lambda: self._client.flush(name))
        if self._lite_path is not None:
            with self._ann_lock:
                self._index_pending(collection)
                side = self._load_ann(collection)
                if side is not None:
                    side = side.without(wanted)
                    side.save(ann_dir(self._lite_path), collection)
                    self._ann[collection] = side

    def sync(self) -> None:
        """Read at Strong consistency from now on: another process has written (Lite: one process per file)."""
        self._wrote = True

    def close(self) -> None:
        if self._lite_path is not None and not self._closed:
            self._index_pending()  # a writer's last inserts become searchable before the version is committed
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._client.close()
            if self._lite_path is not None:
                _LITE.release(os.path.abspath(self._where))


def _record(collection: str, row: dict[str, Any], vector: np.ndarray) -> dict[str, Any]:
    """One Milvus row; unknown keys and over-long values are refused with the field named."""
    fields = PAYLOAD_FIELDS[collection]
    extra = set(row) - {"id", *fields}
    if extra:
        raise ValidationError(
            f"{collection} rows take id, {', '.join(fields)}; unknown field(s): {', '.join(sorted(extra))}"
        )
    rid = str(row.get("id", ""))
    if not rid or _utf8_len(collection, rid, "id", rid) > MAX_ID:
        raise ValidationError(f"{collection} id must be 1-{MAX_ID} bytes of UTF-8, got {rid[:40]!r}")
    record: dict[str, Any] = {"id": rid, "vector": vector}
    for field in fields:
        value = row.get(field)
        if field in INT_FIELDS:
            record[field] = int(value or 0)
            continue
        text = "" if value is None else str(value)
        if _utf8_len(collection, rid, field, text) > MAX_TEXT:
            raise ValidationError(f"{collection} {rid[:40]!r}: {field} is longer than Milvus's {MAX_TEXT} bytes")
        record[field] = text
    return record


def _utf8_len(collection: str, rid: str, field: str, text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{collection} {rid[:40]!r}: {field} is not valid Unicode ({exc.reason})") from exc


def _payload(collection: str, entity: dict[str, Any]) -> dict[str, Any]:
    return {field: entity.get(field, 0 if field in INT_FIELDS else "") for field in PAYLOAD_FIELDS[collection]}


# --- Lite side index (faiss) ----------------------------------------------------------------------


def ann_dir(lite_path: Path) -> Path:
    """Where the side indexes of a Lite database live: next to it, inside the version directory."""
    return lite_path.with_name(lite_path.name + ".ann")


def build_ann(vectors: np.ndarray) -> Any:
    """A faiss inner-product index over L2-normalised vectors: exact (flat) up to ANN_EXACT_MAX rows, else
    HNSW (Malkov & Yashunin 2018, "Efficient and robust approximate nearest neighbor search using
    Hierarchical Navigable Small World graphs"), the index Milvus builds for AUTOINDEX too."""
    import faiss

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n, dim = vectors.shape
    index: Any
    if n <= ANN_EXACT_MAX:
        index = faiss.IndexFlatIP(dim)
    else:
        index = faiss.IndexHNSWFlat(dim, ANN_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ANN_EF_CONSTRUCTION
        _set_probes(index)
    index.add(vectors)
    return index


def _set_probes(index: Any) -> None:
    if hasattr(index, "hnsw"):
        index.hnsw.efSearch = ANN_EF_SEARCH


def ann_vectors(index: Any) -> np.ndarray:
    """Every vector stored in a side index, in insertion order (to merge later inserts into it)."""
    return np.asarray(index.reconstruct_n(0, index.ntotal), dtype=np.float32)


def _newest(ids: list[str], vecs: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Each id once, with its last vector, in first-kept order."""
    last = {rid: k for k, rid in enumerate(ids)}
    if len(last) == len(ids):
        return ids, vecs
    keep = sorted(last.values())
    return [ids[k] for k in keep], vecs[keep]


DELTA_MAX = 20_000  # rows written after the base was built (or hidden in it) before the base is rebuilt


@dataclass
class SideIndex:
    """One collection's side index: a base faiss index (ids by row), plus the rows written after it was built
    (`delta`, searched exactly) and the base ids those rows replaced or that were deleted (`gone`, skipped).

    An in-place edit of a committed version then costs its own rows: rebuilding an HNSW base over 1M vectors
    takes minutes. A flat base that stays within ANN_EXACT_MAX rows, or a delta past DELTA_MAX, is rebuilt.
    """

    ids: list[str]
    index: Any
    delta_ids: list[str] = dataclasses.field(default_factory=list)
    delta: np.ndarray | None = None
    gone: frozenset[str] = frozenset()
    _pos: dict[str, int] | None = dataclasses.field(default=None, repr=False)
    base_saved: bool = False  # the base files on disk hold this base (only the delta file needs writing)

    @classmethod
    def build(cls, ids: list[str], vecs: np.ndarray) -> SideIndex:
        ids, vecs = _newest(ids, vecs)
        return cls(ids, build_ann(vecs))

    @property
    def pos(self) -> dict[str, int]:
        if self._pos is None:
            self._pos = {rid: k for k, rid in enumerate(self.ids)}
        return self._pos

    def _live(self) -> tuple[list[str], np.ndarray]:
        """Every live (id, vector), base rows first: what a rebuild starts from."""
        keep = [k for k, rid in enumerate(self.ids) if rid not in self.gone]
        base = ann_vectors(self.index)[keep] if keep else np.zeros((0, self.index.d), dtype=np.float32)
        ids = [self.ids[k] for k in keep]
        if self.delta is not None and len(self.delta_ids):
            return ids + self.delta_ids, np.concatenate([base, self.delta])
        return ids, base

    def _small(self, extra: int) -> bool:
        return not hasattr(self.index, "hnsw") and self.index.ntotal + len(self.delta_ids) + extra <= ANN_EXACT_MAX

    def written(self, ids: list[str], vecs: np.ndarray) -> SideIndex:
        """This index with rows `ids` written (replacing any row of the same id)."""
        ids, vecs = _newest(ids, vecs)
        if self._small(len(ids)) or len(self.delta_ids) + len(self.gone) + len(ids) > DELTA_MAX:
            old_ids, old_vecs = self._live()
            return SideIndex.build(old_ids + ids, np.concatenate([old_vecs, vecs]))
        fresh = set(ids)
        keep = [k for k, rid in enumerate(self.delta_ids) if rid not in fresh]
        delta_ids = [self.delta_ids[k] for k in keep] + ids
        parts = [self.delta[keep]] if self.delta is not None and keep else []
        delta = np.concatenate([*parts, vecs])
        return SideIndex(self.ids, self.index, delta_ids, delta, self.gone | (fresh & self.pos.keys()), self._pos,
                         self.base_saved)

    def without(self, ids: Sequence[str]) -> SideIndex:
        """This index with the rows of `ids` removed."""
        dead = set(ids)
        if self._small(0):
            live_ids, live_vecs = self._live()
            keep = [k for k, rid in enumerate(live_ids) if rid not in dead]
            return SideIndex([live_ids[k] for k in keep], build_ann(live_vecs[keep]))
        keep = [k for k, rid in enumerate(self.delta_ids) if rid not in dead]
        delta = self.delta[keep] if self.delta is not None else None
        return SideIndex(self.ids, self.index, [self.delta_ids[k] for k in keep], delta,
                         self.gone | (dead & self.pos.keys()), self._pos, self.base_saved)

    def vectors(self, ids: Sequence[str]) -> np.ndarray:
        """Vectors of `ids` (a zero row for an id the index does not hold)."""
        out = np.zeros((len(ids), self.index.d), dtype=np.float32)
        in_delta = {rid: k for k, rid in enumerate(self.delta_ids)}
        base_rows: list[tuple[int, int]] = []
        for r, rid in enumerate(ids):
            if rid in in_delta and self.delta is not None:
                out[r] = self.delta[in_delta[rid]]
            elif rid not in self.gone and rid in self.pos:
                base_rows.append((r, self.pos[rid]))
        if base_rows:
            out[[r for r, _ in base_rows]] = self.index.reconstruct_batch(
                np.array([k for _, k in base_rows], dtype=np.int64))
        return out

    def search(self, queries: np.ndarray, limit: int) -> list[list[tuple[str, float]]]:
        """The `limit` best (id, inner product) per query: the base (asked for enough rows to make up for the
        hidden ones) merged with an exact pass over the delta."""
        out: list[list[tuple[str, float]]] = [[] for _ in range(len(queries))]
        if self.index.ntotal:
            k = min(limit + len(self.gone), self.index.ntotal)
            scores, positions = self.index.search(queries, k)
            for row, (pos_row, score_row) in enumerate(zip(positions.tolist(), scores.tolist(), strict=True)):
                out[row] = [(self.ids[p], float(s)) for p, s in zip(pos_row, score_row, strict=True)
                            if p >= 0 and self.ids[p] not in self.gone]
        if self.delta is not None and len(self.delta_ids):
            sims = queries @ self.delta.T
            for row in range(len(queries)):
                top = np.argsort(-sims[row])[:limit]
                out[row] += [(self.delta_ids[k], float(sims[row, k])) for k in top.tolist()]
        return [sorted(hits, key=lambda h: -h[1])[:limit] for hits in out]

    def save(self, folder: Path, collection: str) -> None:
        """The base files (rewritten only when the base changed) and the delta file, each replaced atomically."""
        import faiss

        folder.mkdir(parents=True, exist_ok=True)
        delta_path = folder / f"{collection}.delta.npz"
        if not self.base_saved:
            _replace(folder / f"{collection}.faiss", lambda p: faiss.write_index(self.index, str(p)))
            _replace(folder / f"{collection}.ids.json", lambda p: p.write_bytes(orjson.dumps(self.ids)))
            self.base_saved = True
        if self.delta_ids or self.gone:
            delta = self.delta if self.delta is not None else np.zeros((0, self.index.d), dtype=np.float32)

            def write_delta(path: Path) -> None:
                with path.open("wb") as fh:
                    np.savez(fh, ids=np.array(self.delta_ids, dtype=str), vectors=delta,
                             gone=np.array(sorted(self.gone), dtype=str))

            _replace(delta_path, write_delta)
        else:
            delta_path.unlink(missing_ok=True)

    @classmethod
    def load(cls, folder: Path, collection: str) -> SideIndex | None:
        """The side index of `collection`, or None if it was never built; StoreError if its files disagree."""
        import faiss

        index_path, ids_path = folder / f"{collection}.faiss", folder / f"{collection}.ids.json"
        if not index_path.is_file() or not ids_path.is_file():
            return None
        index = faiss.read_index(str(index_path))
        ids = orjson.loads(ids_path.read_bytes())
        if index.ntotal != len(ids):
            raise StoreError(f"side index {index_path} holds {index.ntotal} vectors for {len(ids)} ids; re-ingest")
        _set_probes(index)
        side = cls(ids, index, base_saved=True)
        delta_path = folder / f"{collection}.delta.npz"
        if delta_path.is_file():
            with np.load(delta_path, allow_pickle=False) as parts:
                side.delta_ids = [str(i) for i in parts["ids"].tolist()]
                side.delta = np.asarray(parts["vectors"], dtype=np.float32)
                side.gone = frozenset(str(i) for i in parts["gone"].tolist())
            if len(side.delta_ids) != len(side.delta):
                raise StoreError(f"side index delta {delta_path} is inconsistent; re-ingest")
        return side


def _replace(target: Path, write: Any) -> None:
    tmp = target.with_name(target.name + ".tmp")
    write(tmp)
    os.replace(tmp, target)
