"""Relevance labels in SQLite (WAL) at DATA_DIR/labels.sqlite, keyed by (query text, item id, graph version,
annotator); the same file holds the query sets and the pools built from them (retrieval.evaluation.querysets, .pooling).

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
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO, TypeVar

from pydantic import Field

from retrieval.errors import IngestError, StoreError, ValidationError
from retrieval.models import Record

LABELS_FILE = "labels.sqlite"
QRELS_FILE = "qrels.txt"
QUERIES_FILE = "queries.tsv"
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
    """A validated Label (normalised query and annotator, stripped item id, grade an int in 0-3)."""
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
        note=note or "", annotator=normalize_annotator(annotator or ""), updated_at=updated_at or _now(),
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


class LabelStore:
    """The label database of one SQLite file; safe for concurrent threads and processes.

    `migrated` is the number of schema-1 labels this open carried over (None: no migration ran).
    """

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
        self.migrated: int | None = self.write(_migrate, wal=True)

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

    def write(self, fn: Callable[[sqlite3.Connection], T], *, wal: bool = False) -> T:
        """Run `fn` in one BEGIN IMMEDIATE transaction (all or nothing), retrying while another writer holds
        the lock; for the modules that keep their tables in this file."""
        reopened = False
        for attempt in range(self.retries + 2):
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
                if "readonly" in str(exc) and not reopened:
                    # A connection opened while the file was read-only (a read-only mount, since remounted; a
                    # permission since fixed) stays read-only: reopen once before reporting the error.
                    self.close()
                    reopened = True
                    continue
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or attempt >= self.retries:
                    raise StoreError(f"label store {self.path}: {exc}") from exc
                time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))  # jitter so writers don't collide again
            except sqlite3.Error as exc:
                raise StoreError(f"label store {self.path}: {exc}") from exc
        raise AssertionError("unreachable")

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """The rows of one parameterised SELECT (for the modules that keep their tables in this file)."""
        try:
            with self._connect() as conn:
                return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"label store {self.path}: {exc}") from exc

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
            (lb.query_text, lb.item_id, lb.graph_version, lb.annotator, lb.grade, lb.note, lb.updated_at or _now())
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


# --- one grade per (query, item): the adjudication rule -----------------------------------------


class Unresolved(Record):
    """A (query, item) whose annotators' grades give no consensus and that nobody adjudicated."""

    query_text: str
    item_id: str
    grades: dict[str, int]  # annotator -> grade


def latest_per_annotator(labels: Iterable[Label], graph_version: str | None = None) -> list[Label]:
    """One label per (query, item, annotator): the one on `graph_version`, or else the most recently updated."""
    latest: dict[tuple[str, str, str], Label] = {}
    for lb in labels:
        if graph_version is not None and lb.graph_version != graph_version:
            continue
        key = (lb.query_text, lb.item_id, lb.annotator)
        if key not in latest or lb.updated_at > latest[key].updated_at:
            latest[key] = lb
    return list(latest.values())


def consensus_grade(grades: Sequence[int], *, include_ties: bool = False) -> int | None:
    """The median of the annotators' grades; for an even count whose two middle grades differ, None (a tie),
    or their lower one with `include_ties` (never overstates relevance). A strict majority is always the median."""
    ordered = sorted(grades)
    if not ordered:
        return None
    n = len(ordered)
    low, high = ordered[(n - 1) // 2], ordered[n // 2]
    return low if low == high or include_ties else None


def resolve_labels(
    labels: Iterable[Label], graph_version: str | None = None, *, include_ties: bool = False
) -> tuple[list[Label], list[Unresolved]]:
    """One label per (query, item) by the adjudication rule, and the (query, item)s left unresolved.

    Rule: an `adjudicated` label first; else the only annotator's label; else the consensus grade of every
    annotator's latest label (`consensus_grade`), marked annotator `consensus`. Ties are excluded unless
    `include_ties`.
    """
    groups: dict[tuple[str, str], list[Label]] = defaultdict(list)
    for lb in latest_per_annotator(labels, graph_version):
        groups[lb.query_text, lb.item_id].append(lb)
    out: list[Label] = []
    unresolved: list[Unresolved] = []
    for (query, item), group in groups.items():
        decided = [lb for lb in group if lb.annotator == ADJUDICATED]
        voters = [lb for lb in group if lb.annotator not in (ADJUDICATED, CONSENSUS)]
        if decided:
            out.append(decided[0])
        elif len(voters) == 1 or (not voters and group):
            out.append((voters or group)[0])
        else:
            grades = [lb.grade for lb in voters]
            if consensus_grade(grades) is None:
                unresolved.append(Unresolved(query_text=query, item_id=item,
                                             grades={lb.annotator: lb.grade for lb in voters}))
            grade = consensus_grade(grades, include_ties=include_ties)
            if grade is not None:
                newest = max(voters, key=lambda lb: lb.updated_at)
                out.append(newest.model_copy(update={"grade": grade, "annotator": CONSENSUS, "note": ""}))
    out.sort(key=lambda lb: (query_id(lb.query_text), lb.item_id))
    unresolved.sort(key=lambda u: (query_id(u.query_text), u.item_id))
    return out, unresolved


def shown_labels(labels: Iterable[Label], annotator: str) -> dict[str, Label]:
    """item id -> the label to show `annotator` beside an item of one query: their own, else the resolved one
    (adjudication, consensus, or the only other annotator's), so a grade given anywhere shows everywhere."""
    labels = list(labels)
    out = {lb.item_id: lb for lb in current_labels(labels)}
    out.update({lb.item_id: lb for lb in latest_per_annotator(labels) if lb.annotator == annotator})
    return out


def current_labels(labels: Iterable[Label], graph_version: str | None = None) -> list[Label]:
    """One label per (query, item) by the adjudication rule (`resolve_labels`; ties left out): with a single
    annotator, that annotator's label of `graph_version`, or else their most recent one."""
    return resolve_labels(labels, graph_version)[0]


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


def export_qrels(
    labels: Iterable[Label],
    qrels: Path | TextIO,
    queries: Path | TextIO | None = None,
    ids: Mapping[str, str] | None = None,
) -> int:
    """Write `query_id 0 item_id grade` lines (and `query_id<TAB>text` lines); returns the label count.

    Labels are reduced by `current_labels` (one per query and item). `ids` maps query text to the id to
    write (a query set's); other queries get `query_id(text)`.
    """
    ids = ids or {}
    order = {text: n for n, text in enumerate(ids)}  # a set's queries in set order, then the others
    rows = sorted(current_labels(labels), key=lambda lb: (order.get(lb.query_text, len(order)),
                                                          ids.get(lb.query_text) or query_id(lb.query_text)))
    with _text_out(qrels) as fh:
        for lb in rows:
            fh.write(f"{ids.get(lb.query_text) or query_id(lb.query_text)} 0 {_token(lb.item_id, 'item id')} "
                     f"{lb.grade}\n")
    if queries is not None:
        with _text_out(queries) as fh:
            seen: dict[str, str] = {}
            for lb in rows:
                seen.setdefault(ids.get(lb.query_text) or query_id(lb.query_text), lb.query_text)
            for qid, text in seen.items():
                fh.write(f"{qid}\t{text}\n")
    return len(rows)


def export_run(
    rankings: Mapping[str, Sequence[str]], out: Path | TextIO, tag: str, ids: Mapping[str, str] | None = None
) -> int:
    """Write a TREC run (`query_id Q0 item_id rank score tag`) from query text -> ranked item ids.

    score = N - rank + 1, so trec_eval (which sorts by score) keeps our order. `ids` as in `export_qrels`.
    Returns the line count.
    """
    _token(tag, "run tag")
    ids = ids or {}
    count = 0
    with _text_out(out) as fh:
        for query, items in sorted(rankings.items(), key=lambda kv: query_id(kv[0])):
            qid = ids.get(normalize_query(query)) or query_id(query)
            for rank, item in enumerate(items, start=1):
                fh.write(f"{qid} Q0 {_token(item, 'item id')} {rank} {len(items) - rank + 1} {tag}\n")
                count += 1
    return count


def file_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line without its line ending) for each line of a text file."""
    # Split on \n only, so line numbers match what an editor shows.
    for number, line in enumerate(text.split("\n"), start=1):
        yield number, line.rstrip("\r")


def tsv_query_rows(text: str, file: str) -> Iterator[tuple[int, str, str]]:
    """(line number, query id, raw text) of each `query_id<TAB>query text` line; blank and `#` lines skipped."""
    for number, line in file_lines(text):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "\t" not in line:
            raise IngestError(file, number, "line", "expected `query_id<TAB>query text`")
        qid, raw = line.split("\t", 1)
        yield number, qid.strip(), raw


def parse_queries(text: str, file: str) -> dict[str, str]:
    """`query_id<TAB>query text` lines (blank and `#` lines skipped) -> {query_id: normalised text}."""
    out: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, qid, raw in tsv_query_rows(text, file):
        query = normalize_query(raw)
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
    for number, line in file_lines(text):
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
            raise IngestError(file, number, "query_id", f"{qid[:40]!r} is not in the queries file or set")
        if (qid, item) in seen:
            first = seen[qid, item]
            raise IngestError(file, number, "item_id", f"{item[:40]!r} judged twice for {qid!r} (line {first})")
        seen[qid, item] = number
        out.append((queries[qid], item, grade))
    return out


def read_text_file(path: Path) -> str:
    """A UTF-8 file's text (BOM dropped); unreadable or undecodable files raise IngestError with the line."""
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
    qrels_path: Path,
    queries_path: Path | None = None,
    *,
    queries: Mapping[str, str] | None = None,
    graph_version: str = "",
    annotator: str = "import",
) -> list[Label]:
    """Parse a qrels file into Labels; query ids resolve through `queries` (e.g. a stored query set) or else
    a queries file (default: `queries.tsv` beside the qrels)."""
    qrels_path = Path(qrels_path)
    if queries is None:
        queries_path = Path(queries_path) if queries_path else qrels_path.parent / QUERIES_FILE
        if not queries_path.is_file():
            raise IngestError(str(queries_path), 0, "file",
                              "no queries file (query_id<TAB>text); pass --queries FILE or --set NAME")
        queries = parse_queries(read_text_file(queries_path), str(queries_path))
    rows = parse_qrels(read_text_file(qrels_path), str(qrels_path), queries)
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
    queries: Mapping[str, str] | None = None,
    graph_version: str = "",
    annotator: str = "import",
) -> int:
    """Validate a whole qrels file first, then upsert its labels in one transaction; returns the count."""
    labels = read_qrels(qrels_path, queries_path, queries=queries, graph_version=graph_version, annotator=annotator)
    return store.put_labels(labels)
