"""Relevance labels in SQLite (WAL) at DATA_DIR/labels.sqlite, keyed by (query text, item id, graph version,
annotator); the same file holds the query sets and the pools built from them (querysets, pooling).

Durability: WAL with `synchronous=FULL`, so a label is fsynced before `put_label` returns; NORMAL
would be crash-safe for the process but could lose the last acknowledged labels on power loss, and
labels are written at human speed, so the fsync costs nothing that matters.
Concurrency: every write is one `BEGIN IMMEDIATE` transaction (the write lock is taken up front, so
no reader-to-writer upgrade can deadlock), waits on `busy_timeout`, and is retried on a leftover
SQLITE_BUSY. Each process holds one connection, used by one thread at a time.
Schema: `PRAGMA user_version` 2. A file of schema 1 (labels keyed without the annotator, user_version 0) is
migrated in place when opened, in one transaction: a crash midway leaves the old table as it was.
Annotators: `''` is the anonymous annotator (every label written before annotators existed keeps the name it had,
usually `''` or `import`). `adjudicated` is reserved: its label is the explicit decision on a disagreement.
`consensus` is reserved for labels derived by `resolve_labels` and is never stored.
The adjudication rule is in `consensus`, TREC files in `trec`.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from pydantic import Field

from retrieval.errors import StoreError, ValidationError, excerpt
from retrieval.models import Record
from retrieval.sqlitefile import SQLiteFile

LABELS_FILE = "labels.sqlite"
ADJUDICATED = "adjudicated"
CONSENSUS = "consensus"
MAX_ANNOTATOR_CHARS = 80
SCHEMA_VERSION = 2
T = TypeVar("T")

_LABELS_TABLE = """
CREATE TABLE labels (
    query_text    TEXT NOT NULL,
    item_id       TEXT NOT NULL,
    graph_version TEXT NOT NULL,
    annotator     TEXT NOT NULL DEFAULT '',
    grade         INTEGER NOT NULL CHECK (grade BETWEEN 0 AND 3),
    note          TEXT NOT NULL DEFAULT '',
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (query_text, item_id, graph_version, annotator)
) WITHOUT ROWID
"""
# Query sets (evaluation.querysets) and pools (evaluation.pooling) live beside the labels they are graded with.
_OTHER_TABLES = (
    """CREATE TABLE IF NOT EXISTS query_sets (
        name TEXT PRIMARY KEY, source TEXT NOT NULL DEFAULT '', created_at TEXT NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS queries (
        set_name TEXT NOT NULL, query_id TEXT NOT NULL, position INTEGER NOT NULL, query_text TEXT NOT NULL,
        PRIMARY KEY (set_name, query_id), UNIQUE (set_name, query_text)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS pools (
        set_name TEXT NOT NULL, graph_version TEXT NOT NULL, depth INTEGER NOT NULL, systems TEXT NOT NULL,
        warnings TEXT NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (set_name, graph_version)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS pool_items (
        set_name TEXT NOT NULL, graph_version TEXT NOT NULL, query_id TEXT NOT NULL, item_id TEXT NOT NULL,
        position INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL, sources TEXT NOT NULL, ranks TEXT NOT NULL,
        PRIMARY KEY (set_name, graph_version, query_id, item_id)) WITHOUT ROWID""",
)
_COPY_V1 = """
INSERT INTO labels (query_text, item_id, graph_version, annotator, grade, note, updated_at)
SELECT query_text, item_id, graph_version, {annotator}, grade, note, updated_at FROM labels_v1
"""
_UPSERT = """
INSERT INTO labels (query_text, item_id, graph_version, annotator, grade, note, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (query_text, item_id, graph_version, annotator) DO UPDATE SET
    grade = excluded.grade, note = excluded.note, updated_at = excluded.updated_at
"""
_FIELDS = ("query_text", "item_id", "graph_version", "annotator", "grade", "note", "updated_at")
_SELECT = "SELECT query_text, item_id, graph_version, annotator, grade, note, updated_at FROM labels"
_ORDER = " ORDER BY query_text, item_id, graph_version, annotator"


class Label(Record):
    """One relevance judgement: an annotator's current grade (0-3) of an item for a query on a graph version."""

    query_text: str
    item_id: str
    graph_version: str = ""
    grade: int = Field(ge=0, le=3)
    note: str = ""
    annotator: str = ""
    updated_at: str = ""


def normalize_query(text: str) -> str:
    """Labels key on the query with whitespace collapsed, so `a  b` and `a b` share labels."""
    return " ".join(str(text).split())


def normalize_annotator(name: str) -> str:
    """An annotator name with whitespace collapsed ('' is the anonymous annotator); bounded in length."""
    out = " ".join(str(name).split())
    if len(out) > MAX_ANNOTATOR_CHARS:
        raise ValidationError(f"annotator name is {len(out)} characters; the limit is {MAX_ANNOTATOR_CHARS}")
    if out == CONSENSUS:
        raise ValidationError(f"annotator name {CONSENSUS!r} is reserved for derived labels")
    return out


def query_id(text: str) -> str:
    """A stable TREC query id for a query text (same text, same id, in every export)."""
    return "q" + hashlib.sha1(normalize_query(text).encode("utf-8", "surrogatepass")).hexdigest()[:12]


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def make_label(
    query_text: str,
    item_id: str,
    grade: int,
    *,
    graph_version: str = "",
    note: str = "",
    annotator: str = "",
    updated_at: str = "",
) -> Label:
    """A validated Label (normalised query and annotator, stripped item id, grade an int in 0-3)."""
    query = normalize_query(query_text)
    item = str(item_id).strip()
    if not query:
        raise ValidationError("label: query text is empty")
    if not item:
        raise ValidationError("label: item id is empty")
    if isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade <= 3:
        raise ValidationError(f"label: grade must be an integer 0-3, got {excerpt(grade)}")
    return Label(
        query_text=query, item_id=item, graph_version=graph_version or "", grade=grade,
        note=note or "", annotator=normalize_annotator(annotator or ""), updated_at=updated_at or utc_now(),
    )


def _migrate(conn: sqlite3.Connection) -> int | None:
    """Bring the file to SCHEMA_VERSION inside the caller's transaction; the count of labels carried over from
    schema 1, or None when there was nothing to migrate."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return None
    if version > SCHEMA_VERSION:
        raise StoreError(f"labels schema {version} is newer than this KG Lens understands ({SCHEMA_VERSION})")
    old = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'labels'").fetchone()
    moved: int | None = None
    if old:  # schema 1: one label per (query, item, version), annotator a plain column (absent in early files)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(labels)")}
        conn.execute("ALTER TABLE labels RENAME TO labels_v1")
        conn.execute(_LABELS_TABLE)
        moved = conn.execute(_COPY_V1.format(annotator="annotator" if "annotator" in columns else "''")).rowcount
        conn.execute("DROP TABLE labels_v1")
    else:
        conn.execute(_LABELS_TABLE)
    for sql in _OTHER_TABLES:
        conn.execute(sql)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return moved


class LabelStore(SQLiteFile):
    """The label database of one SQLite file; safe for concurrent threads and processes.

    `migrated` is the number of schema-1 labels this open carried over (None: no migration ran).
    """

    def __init__(self, path: Path, *, busy_timeout_ms: int = 30_000, retries: int = 8) -> None:
        super().__init__(path, what="label store", busy_timeout_ms=busy_timeout_ms, retries=retries)
        self.migrated: int | None = self.write(_migrate, wal=True)

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> LabelStore:
        return cls(Path(data_dir) / LABELS_FILE)

    def _labels(self, where: Mapping[str, str | None]) -> list[Label]:
        given = {k: v for k, v in where.items() if v is not None}
        sql = _SELECT + (" WHERE " + " AND ".join(f"{k} = ?" for k in given) if given else "") + _ORDER
        rows = self.rows(sql, list(given.values()))
        return [Label.model_validate(dict(zip(_FIELDS, row, strict=True))) for row in rows]

    def put_label(
        self,
        query_text: str,
        item_id: str,
        grade: int,
        *,
        graph_version: str = "",
        note: str = "",
        annotator: str = "",
    ) -> Label:
        """Set an annotator's grade of (query, item, version): a new label or an update of their current one."""
        label = make_label(query_text, item_id, grade, graph_version=graph_version, note=note, annotator=annotator)
        self.put_labels([label])
        return label

    def put_labels(self, labels: Iterable[Label]) -> int:
        """Upsert many labels in one transaction (all or nothing); returns how many."""
        rows = [
            (lb.query_text, lb.item_id, lb.graph_version, lb.annotator, lb.grade, lb.note, lb.updated_at or utc_now())
            for lb in labels
        ]
        self.write(lambda conn: conn.executemany(_UPSERT, rows))
        return len(rows)

    def get_labels(
        self, query_text: str, graph_version: str | None = None, annotator: str | None = None
    ) -> list[Label]:
        """Labels of one query (all versions and annotators, or one of each), by item id."""
        return self._labels({"query_text": normalize_query(query_text), "graph_version": graph_version,
                             "annotator": annotator})

    def all_labels(self, graph_version: str | None = None, annotator: str | None = None) -> list[Label]:
        """Every label (or those of one graph version and/or one annotator), by query then item."""
        return self._labels({"graph_version": graph_version, "annotator": annotator})

    def annotators(self) -> list[str]:
        """Every annotator name that has a label (adjudicated included), sorted."""
        return [str(r[0]) for r in self.rows("SELECT DISTINCT annotator FROM labels ORDER BY annotator")]

    def delete_label(
        self, query_text: str, item_id: str, graph_version: str = "", annotator: str | None = None
    ) -> bool:
        """Remove an annotator's label of (query, item, version), or every annotator's (None); True if any existed."""
        sql = "DELETE FROM labels WHERE query_text = ? AND item_id = ? AND graph_version = ?"
        params = [normalize_query(query_text), str(item_id).strip(), graph_version]
        if annotator is not None:
            sql, params = sql + " AND annotator = ?", [*params, annotator]

        def delete(conn: sqlite3.Connection) -> int:
            return conn.execute(sql, params).rowcount

        return self.write(delete) > 0
