"""Vectors by content hash, shared by every graph of a data directory (`DATA_DIR/vector-cache.sqlite`): a
re-import, under its own name or another, and a second graph over the same texts embed each text once per model.

Keyed by the embedder's identity (name and dimension) and the sha256 of the text, so vectors of two models never
mix. Bounded (KG_VECTOR_CACHE_MB): past the bound the least recently used rows go. Safe under concurrent writers
(one SQLite file in WAL, each write one transaction, `retrieval.sqlitefile`). The cache is an optimisation: a
cache that cannot be read or written is said once in the import's warnings and every text is embedded.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retrieval.embedding import Embedder
from retrieval.errors import RetrievalError
from retrieval.sqlitefile import SQLiteFile

FILE = "vector-cache.sqlite"
LOOKUP = 500  # hashes per `IN (...)` (SQLite's default limit on parameters is 999)
ROW_OVERHEAD = 96  # bytes a row costs besides its vector (key, hash, index entries), for the bound

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vectors (id INTEGER PRIMARY KEY, model TEXT NOT NULL, hash BLOB NOT NULL, "
    "vec BLOB NOT NULL, used INTEGER NOT NULL, UNIQUE (model, hash))",
    "CREATE INDEX IF NOT EXISTS vectors_used ON vectors (used)",
)


def text_hash(text: str) -> bytes:
    """sha256 of the text's UTF-8 (lone surrogates kept as they are: such a text is its own key)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class VectorCache:
    """The cache file of one data directory. State is an open SQLite file, hence a class."""

    def __init__(self, path: Path, max_mb: int) -> None:
        self.path = Path(path)
        self.max_bytes = max_mb * 1_000_000
        self._db = SQLiteFile(self.path, what="vector cache")
        self._ready = False

    @classmethod
    def in_data_dir(cls, data_dir: Path, max_mb: int) -> VectorCache:
        return cls(Path(data_dir) / FILE, max_mb)

    def _schema(self) -> None:
        if not self._ready:
            self._db.write(lambda conn: [conn.execute(s) for s in _SCHEMA], wal=True)
            self._ready = True

    def get(self, model: str, dim: int, hashes: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """The cached vectors among `hashes` (marked used now)."""
        self._schema()
        found: dict[bytes, np.ndarray] = {}
        for start in range(0, len(hashes), LOOKUP):
            part = list(hashes[start : start + LOOKUP])
            marks = ",".join("?" * len(part))
            rows = self._db.rows(f"SELECT hash, vec FROM vectors WHERE model = ? AND hash IN ({marks})",  # noqa: S608
                                 (model, *part))
            for h, vec in rows:
                v = np.frombuffer(vec, dtype=np.float32)
                if len(v) == dim:
                    found[bytes(h)] = v
        if found:
            now = time.time_ns()
            keys = list(found)

            def touch(conn: sqlite3.Connection) -> None:
                for start in range(0, len(keys), LOOKUP):
                    part = keys[start : start + LOOKUP]
                    conn.execute(f"UPDATE vectors SET used = ? WHERE model = ? AND hash IN "  # noqa: S608
                                 f"({','.join('?' * len(part))})", (now, model, *part))

            self._db.write(touch)
        return found

    def put(self, model: str, hashes: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store `vectors` under their hashes, then drop the least recently used rows beyond the bound."""
        self._schema()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        now = time.time_ns()
        rows = [(model, h, v.tobytes(), now) for h, v in zip(hashes, vectors, strict=True)]
        keep = max(self.max_bytes // (vectors.shape[1] * 4 + ROW_OVERHEAD), 0) if len(vectors) else 0

        def write(conn: sqlite3.Connection) -> None:
            conn.executemany("INSERT OR REPLACE INTO vectors (model, hash, vec, used) VALUES (?, ?, ?, ?)", rows)
            excess = conn.execute("SELECT count(*) FROM vectors").fetchone()[0] - keep
            if excess > 0:
                conn.execute("DELETE FROM vectors WHERE id IN (SELECT id FROM vectors ORDER BY used LIMIT ?)",
                             (excess,))

        self._db.write(write)

    def close(self) -> None:
        self._db.close()


class CachingEmbedder:
    """An embedder that takes each text's vector from the data directory's cache and embeds only the texts it does
    not hold (each distinct one once), storing them. Counts are real state, hence a class."""

    def __init__(self, embedder: Embedder, cache: VectorCache) -> None:
        self.embedder = embedder
        self.name, self.dim = embedder.name, embedder.dim
        self._cache = cache
        self._model = f"{embedder.name}:{embedder.dim}"
        self.reused = 0  # texts whose vector came from the cache
        self.embedded = 0  # texts sent to the embedder
        self.problem = ""  # why the cache could not be used (then every text is embedded)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        hashes = [text_hash(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        if not self.problem:
            try:
                found = self._cache.get(self._model, self.dim, list(dict.fromkeys(hashes)))
            except RetrievalError as exc:
                self._give_up(exc)
        todo = {h: t for h, t in zip(hashes, texts, strict=True) if h not in found}
        if todo:
            fresh = np.asarray(self.embedder.embed(list(todo.values())), dtype=np.float32)
            found.update(zip(todo, fresh, strict=True))
            self.embedded += len(todo)
            if not self.problem:
                try:
                    self._cache.put(self._model, list(todo), fresh)
                except RetrievalError as exc:
                    self._give_up(exc)
        self.reused += len(texts) - len(todo)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, h in enumerate(hashes):
            out[row] = found[h]
        return out

    def _give_up(self, exc: RetrievalError) -> None:
        self.problem = f"the vector cache could not be used ({exc}): its texts were embedded"

    def close(self) -> None:
        self._cache.close()


def caching_embedder(data_dir: Path, max_mb: int, embedder: Embedder) -> Embedder:
    """`embedder` behind the data directory's vector cache; as it is where the cache is off (`max_mb` 0) or the
    embedder is cheaper than a lookup (the hash embedder says so with `cacheable = False`)."""
    if max_mb <= 0 or not getattr(embedder, "cacheable", True):
        return embedder
    return CachingEmbedder(embedder, VectorCache.in_data_dir(data_dir, max_mb))
