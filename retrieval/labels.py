"""Relevance labels in SQLite (WAL) at DATA_DIR/labels.sqlite, keyed by (query text, item id, graph version).

Durability: WAL with `synchronous=FULL`, so a label is fsynced before `put_label` returns; NORMAL
would be crash-safe for the process but could lose the last acknowledged labels on power loss, and
labels are written at human speed, so the fsync costs nothing that matters.
Concurrency: every write is one `BEGIN IMMEDIATE` transaction (the write lock is taken up front, so
no reader-to-writer upgrade can deadlock), waits on `busy_timeout`, and is retried on a leftover
SQLITE_BUSY. Each process holds one connection, used by one thread at a time.
Files: TREC qrels `query_id 0 item_id grade` with a companion `queries.tsv` (`query_id<TAB>text`);
runs `query_id Q0 item_id rank score tag`.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO, TypeVar

from pydantic import Field

from retrieval.errors import IngestError, StoreError, ValidationError
from retrieval.models import Record

LABELS_FILE = "labels.sqlite"
QRELS_FILE = "qrels.txt"
QUERIES_FILE = "queries.tsv"
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS labels (
    query_text    TEXT NOT NULL,
    item_id       TEXT NOT NULL,
    graph_version TEXT NOT NULL,
    grade         INTEGER NOT NULL CHECK (grade BETWEEN 0 AND 3),
    note          TEXT NOT NULL DEFAULT '',
    annotator     TEXT NOT NULL DEFAULT '',
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (query_text, item_id, graph_version)
) WITHOUT ROWID
"""
_UPSERT = """
INSERT INTO labels (query_text, item_id, graph_version, grade, note, annotator, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (query_text, item_id, graph_version) DO UPDATE SET
    grade = excluded.grade, note = excluded.note, annotator = excluded.annotator, updated_at = excluded.updated_at
"""
_FIELDS = ("query_text", "item_id", "graph_version", "grade", "note", "annotator", "updated_at")
_SELECT = "SELECT query_text, item_id, graph_version, grade, note, annotator, updated_at FROM labels"
_BY_QUERY = _SELECT + " WHERE query_text = ? ORDER BY item_id, graph_version"
_BY_QUERY_VERSION = _SELECT + " WHERE query_text = ? AND graph_version = ? ORDER BY item_id"
_ALL = _SELECT + " ORDER BY query_text, item_id, graph_version"
_ALL_VERSION = _SELECT + " WHERE graph_version = ? ORDER BY query_text, item_id"


class Label(Record):
    """One relevance judgement: the current grade (0-3) of an item for a query on a graph version."""

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


def query_id(text: str) -> str:
    """A stable TREC query id for a query text (same text, same id, in every export)."""
    return "q" + hashlib.sha1(normalize_query(text).encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _now() -> str:
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
    """A validated Label (normalised query, stripped item id, grade an int in 0-3)."""
    query = normalize_query(query_text)
    item = str(item_id).strip()
    if not query:
        raise ValidationError("label: query text is empty")
    if not item:
        raise ValidationError("label: item id is empty")
    if isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade <= 3:
        raise ValidationError(f"label: grade must be an integer 0-3, got {grade!r}")
    return Label(
        query_text=query, item_id=item, graph_version=graph_version or "", grade=grade,
        note=note or "", annotator=annotator or "", updated_at=updated_at or _now(),
    )


class LabelStore:
    """The label table of one SQLite file; safe for concurrent threads and processes."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 30_000, retries: int = 8) -> None:
        self.path = Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self.retries = retries
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create label directory {self.path.parent}: {exc}") from exc
        self._write(lambda conn: conn.execute(_SCHEMA), wal=True)

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> LabelStore:
        return cls(Path(data_dir) / LABELS_FILE)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """This process's connection, one thread at a time (closing the last WAL connection checkpoints
        and fsyncs the database, so a connection per call would cost ~20 ms per label)."""
        with self._lock:
            if self._conn is None or self._pid != os.getpid():  # never reuse a connection across fork
                self._conn = sqlite3.connect(
                    self.path, timeout=self.busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
                )
                self._conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
                self._conn.execute("PRAGMA synchronous = FULL")
                self._pid = os.getpid()
            yield self._conn

    def close(self) -> None:
        """Close this process's connection (a later call reopens it)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def _write(self, fn: Callable[[sqlite3.Connection], T], *, wal: bool = False) -> T:
        """Run `fn` in one BEGIN IMMEDIATE transaction, retrying while another writer holds the lock."""
        for attempt in range(self.retries + 1):
            try:
                with self._connect() as conn:
                    if wal:  # persistent in the file; must run outside a transaction
                        conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        result = fn(conn)
                        conn.execute("COMMIT")
                    except BaseException:
                        if conn.in_transaction:
                            conn.execute("ROLLBACK")
                        raise
                    return result
            except sqlite3.OperationalError as exc:
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or attempt == self.retries:
                    raise StoreError(f"label store {self.path}: {exc}") from exc
                time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))  # jitter so writers don't collide again
            except sqlite3.Error as exc:
                raise StoreError(f"label store {self.path}: {exc}") from exc
        raise AssertionError("unreachable")

    def _read(self, sql: str, params: Sequence[object]) -> list[Label]:
        try:
            with self._connect() as conn:
                rows = conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"label store {self.path}: {exc}") from exc
        return [Label(**dict(zip(_FIELDS, row, strict=True))) for row in rows]

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
        """Set the grade of (query, item, version): a new label or an update of the current one."""
        label = make_label(query_text, item_id, grade, graph_version=graph_version, note=note, annotator=annotator)
        self.put_labels([label])
        return label

    def put_labels(self, labels: Iterable[Label]) -> int:
        """Upsert many labels in one transaction (all or nothing); returns how many."""
        rows = [
            (lb.query_text, lb.item_id, lb.graph_version, lb.grade, lb.note, lb.annotator, lb.updated_at or _now())
            for lb in labels
        ]
        self._write(lambda conn: conn.executemany(_UPSERT, rows))
        return len(rows)

    def get_labels(self, query_text: str, graph_version: str | None = None) -> list[Label]:
        """Labels of one query (all versions, or one), by item id."""
        if graph_version is None:
            return self._read(_BY_QUERY, (normalize_query(query_text),))
        return self._read(_BY_QUERY_VERSION, (normalize_query(query_text), graph_version))

    def all_labels(self, graph_version: str | None = None) -> list[Label]:
        """Every label (or those of one graph version), by query then item."""
        if graph_version is None:
            return self._read(_ALL, ())
        return self._read(_ALL_VERSION, (graph_version,))

    def delete_label(self, query_text: str, item_id: str, graph_version: str = "") -> bool:
        """Remove one label; True if it existed."""
        def delete(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "DELETE FROM labels WHERE query_text = ? AND item_id = ? AND graph_version = ?",
                (normalize_query(query_text), str(item_id).strip(), graph_version),
            )
            return cur.rowcount

        return self._write(delete) > 0


def current_labels(labels: Iterable[Label], graph_version: str | None = None) -> list[Label]:
    """One label per (query, item): those of `graph_version`, or else the most recently updated."""
    latest: dict[tuple[str, str], Label] = {}
    for lb in labels:
        if graph_version is not None and lb.graph_version != graph_version:
            continue
        key = (lb.query_text, lb.item_id)
        if key not in latest or lb.updated_at > latest[key].updated_at:
            latest[key] = lb
    return sorted(latest.values(), key=lambda lb: (query_id(lb.query_text), lb.item_id))


# --- TREC files -------------------------------------------------------------------------------


@contextmanager
def _text_out(target: Path | TextIO) -> Iterator[TextIO]:
    if isinstance(target, Path | str):
        path = Path(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="\n") as fh:
            yield fh
    else:
        yield target


def _token(value: str, what: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise ValidationError(f"{what} {value!r} cannot be written to a TREC file: it is empty or contains whitespace")
    return value


def export_qrels(labels: Iterable[Label], qrels: Path | TextIO, queries: Path | TextIO | None = None) -> int:
    """Write `query_id 0 item_id grade` lines (and `query_id<TAB>text` lines); returns the label count.

    Pass `current_labels(...)` first when the store holds several graph versions.
    """
    rows = current_labels(labels)
    with _text_out(qrels) as fh:
        for lb in rows:
            fh.write(f"{query_id(lb.query_text)} 0 {_token(lb.item_id, 'item id')} {lb.grade}\n")
    if queries is not None:
        with _text_out(queries) as fh:
            seen: dict[str, str] = {}
            for lb in rows:
                seen.setdefault(query_id(lb.query_text), lb.query_text)
            for qid, text in seen.items():
                fh.write(f"{qid}\t{text}\n")
    return len(rows)


def export_run(rankings: Mapping[str, Sequence[str]], out: Path | TextIO, tag: str) -> int:
    """Write a TREC run (`query_id Q0 item_id rank score tag`) from query text -> ranked item ids.

    score = N - rank + 1, so trec_eval (which sorts by score) keeps our order. Returns the line count.
    """
    _token(tag, "run tag")
    count = 0
    with _text_out(out) as fh:
        for query, items in sorted(rankings.items(), key=lambda kv: query_id(kv[0])):
            qid = query_id(query)
            for rank, item in enumerate(items, start=1):
                fh.write(f"{qid} Q0 {_token(item, 'item id')} {rank} {len(items) - rank + 1} {tag}\n")
                count += 1
    return count


def _lines(text: str) -> Iterator[tuple[int, str]]:
    # Split on \n only, so line numbers match what an editor shows.
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.rstrip("\r")


def parse_queries(text: str, file: str) -> dict[str, str]:
    """`query_id<TAB>query text` lines (blank and `#` lines skipped) -> {query_id: normalised text}."""
    out: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, line in _lines(text):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "\t" not in line:
            raise IngestError(file, number, "line", "expected `query_id<TAB>query text`")
        qid, raw = line.split("\t", 1)
        qid, query = qid.strip(), normalize_query(raw)
        if not qid or any(ch.isspace() for ch in qid):
            raise IngestError(file, number, "query_id", f"must be one non-empty token, got {qid!r}")
        if not query:
            raise IngestError(file, number, "text", "query text is empty")
        if qid in out and out[qid] != query:
            raise IngestError(file, number, "query_id", f"{qid!r} already defined on line {first_line[qid]}")
        out[qid] = query
        first_line.setdefault(qid, number)
    return out


def parse_qrels(text: str, file: str, queries: Mapping[str, str]) -> list[tuple[str, str, int]]:
    """TREC qrels lines `query_id iteration item_id grade` -> [(query text, item id, grade)].

    Grades must be integers 0-3; every query id must be in `queries`; a (query, item) pair once.
    """
    out: list[tuple[str, str, int]] = []
    seen: dict[tuple[str, str], int] = {}
    for number, line in _lines(text):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 4:
            raise IngestError(file, number, "line", f"expected 4 fields `query_id 0 item_id grade`, got {len(fields)}")
        qid, _iteration, item, grade_text = fields
        try:
            grade = int(grade_text)
        except ValueError:
            raise IngestError(file, number, "grade", f"not an integer: {grade_text[:40]!r}") from None
        if not 0 <= grade <= 3:
            raise IngestError(file, number, "grade", f"must be 0-3, got {grade}")
        if qid not in queries:
            raise IngestError(file, number, "query_id", f"{qid[:40]!r} is not in the queries file")
        if (qid, item) in seen:
            first = seen[qid, item]
            raise IngestError(file, number, "item_id", f"{item[:40]!r} judged twice for {qid!r} (line {first})")
        seen[qid, item] = number
        out.append((queries[qid], item, grade))
    return out


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(str(path), 0, "file", f"cannot read: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise IngestError(str(path), line, "encoding", "not valid UTF-8") from exc


def read_qrels(
    qrels_path: Path, queries_path: Path | None = None, *, graph_version: str = "", annotator: str = "import"
) -> list[Label]:
    """Parse a qrels file and its queries file (default: `queries.tsv` beside it) into Labels."""
    qrels_path = Path(qrels_path)
    queries_path = Path(queries_path) if queries_path else qrels_path.parent / QUERIES_FILE
    if not queries_path.is_file():
        raise IngestError(str(queries_path), 0, "file", "no queries file (query_id<TAB>text); pass --queries FILE")
    queries = parse_queries(_read_text(queries_path), str(queries_path))
    rows = parse_qrels(_read_text(qrels_path), str(qrels_path), queries)
    stamp = _now()
    return [
        make_label(q, item, grade, graph_version=graph_version, annotator=annotator, updated_at=stamp)
        for q, item, grade in rows
    ]


def import_qrels(
    store: LabelStore,
    qrels_path: Path,
    queries_path: Path | None = None,
    *,
    graph_version: str = "",
    annotator: str = "import",
) -> int:
    """Validate a whole qrels file first, then upsert its labels in one transaction; returns the count."""
    labels = read_qrels(qrels_path, queries_path, graph_version=graph_version, annotator=annotator)
    return store.put_labels(labels)
