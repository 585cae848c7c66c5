"""Named query sets in the label database: import `queries.tsv` or JSONL, validated whole before anything is stored.

TSV: `query_id<TAB>query text` per line (blank and `#` lines skipped). JSONL: one object per line with an id
(`id`, `query_id`, `qid` or `_id`) and a text (`query`, `text` or `question`), as in BEIR and MS MARCO files.
Refused, with `file:line: field: reason`: a missing or non-token id, an empty query or one over 2,000 characters,
a duplicate id, and the same query text under two ids (labels key on the text, so both would share grades).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from retrieval.config import Settings
from retrieval.errors import IngestError, NotFoundError, ValidationError, excerpt
from retrieval.evaluation.labels import LabelStore, normalize_query
from retrieval.evaluation.trec import FORMULA_ID, file_lines, read_text_file, tsv_query_rows
from retrieval.items import opens_as_formula
from retrieval.models import MAX_QUERY_CHARS, Record

MAX_SET_NAME = 100
ID_KEYS = ("id", "query_id", "qid", "_id")
TEXT_KEYS = ("query", "text", "question")
QueryFormat = Literal["tsv", "jsonl"]


class SetQuery(Record):
    """One query of a set: its id (as in the file), text (whitespace collapsed) and place in the file."""

    query_id: str
    text: str
    position: int


class QuerySet(Record):
    """A named query set and where it came from."""

    name: str
    source: str = ""
    created_at: str = ""
    queries: tuple[SetQuery, ...] = ()

    def texts(self) -> dict[str, str]:
        """query id -> query text (what `read_qrels` resolves qrels ids through)."""
        return {q.query_id: q.text for q in self.queries}


def _pick(obj: dict[str, object], keys: tuple[str, ...], file: str, number: int, field: str) -> str:
    for key in keys:
        if key in obj and obj[key] is not None:
            value = obj[key]
            if isinstance(value, bool) or not isinstance(value, str | int):
                raise IngestError(file, number, key, f"must be a string, got {type(value).__name__}")
            return str(value)
    raise IngestError(file, number, field, f"missing: give one of {', '.join(keys)}")


def _rows_jsonl(text: str, file: str) -> Iterator[tuple[int, str, str]]:
    for number, line in file_lines(text):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise IngestError(file, number, "json", f"not valid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise IngestError(file, number, "json", f"expected one JSON object per line, got {type(obj).__name__}")
        yield number, _pick(obj, ID_KEYS, file, number, "id").strip(), _pick(obj, TEXT_KEYS, file, number, "query")


def sniff_format(text: str, file: str = "") -> QueryFormat:
    """jsonl for a .jsonl/.ndjson/.json file or text whose first non-blank line starts with `{`; else tsv."""
    if Path(file).suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if Path(file).suffix.lower() in (".tsv", ".txt"):
        return "tsv"
    first = next((line.strip() for _, line in file_lines(text) if line.strip()), "")
    return "jsonl" if first.startswith("{") else "tsv"


def parse_query_set(text: str, file: str, fmt: QueryFormat | None = None, *,
                    max_queries: int | None = None) -> list[SetQuery]:
    """Every query of a TSV or JSONL query file, validated (raises IngestError at the first bad line); at most
    `max_queries` (KG_MAX_QUERY_SET), refused at the first query past it."""
    limit = max_queries or Settings().max_query_set
    fmt = fmt or sniff_format(text, file)
    rows = _rows_jsonl(text, file) if fmt == "jsonl" else tsv_query_rows(text, file)
    out: list[SetQuery] = []
    id_line: dict[str, int] = {}
    text_line: dict[str, tuple[int, str]] = {}
    for number, qid, raw in rows:
        if len(out) == limit:
            raise IngestError(file, number, "file", f"more than {limit:,} queries; a query set holds at most "
                                                    f"{limit:,} (KG_MAX_QUERY_SET)")
        query = normalize_query(raw)
        if not qid or any(ch.isspace() for ch in qid):
            raise IngestError(file, number, "query_id", f"must be one non-empty token, got {qid[:40]!r}")
        if opens_as_formula(qid):  # a TSV row's id is checked as it is read; a JSONL one here
            raise IngestError(file, number, "query_id", f"{excerpt(qid)} {FORMULA_ID}")
        if not query:
            raise IngestError(file, number, "text", "query text is empty")
        if len(query) > MAX_QUERY_CHARS:
            raise IngestError(file, number, "text", f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
        if qid in id_line:
            raise IngestError(file, number, "query_id", f"duplicate id {qid[:40]!r} (first on line {id_line[qid]})")
        if query in text_line:
            line, other = text_line[query]
            raise IngestError(file, number, "text", f"same query as {other[:40]!r} on line {line}")
        id_line[qid] = number
        text_line[query] = (number, qid)
        out.append(SetQuery(query_id=qid, text=query, position=len(out)))
    if not out:
        raise IngestError(file, 0, "file", "no queries found")
    return out


def set_name(name: str) -> str:
    out = " ".join(str(name).split())
    if not out or len(out) > MAX_SET_NAME:
        raise ValidationError(f"query set name must be 1-{MAX_SET_NAME} characters, got {name[:40]!r}")
    return out


def import_queries(
    store: LabelStore,
    path_or_text: Path | str,
    name: str | None = None,
    *,
    replace: bool = False,
    fmt: QueryFormat | None = None,
    max_queries: int | None = None,
) -> QuerySet:
    """Store a query set from a file (a Path) or from its text (a str: the Data page's upload); all or nothing.

    The name defaults to the file's stem. An existing name is refused unless `replace`, which also drops that
    set's pools (their queries may have changed); labels are never touched.
    """
    if isinstance(path_or_text, Path):
        text, source = read_text_file(path_or_text), str(path_or_text)
        name = name or path_or_text.stem
    else:
        text, source = path_or_text, "(text)"
        if not name:
            raise ValidationError("a query set given as text needs a name")
    queries = parse_query_set(text, source, fmt, max_queries=max_queries)
    name = set_name(name or "")
    created = datetime.now(UTC).isoformat(timespec="seconds")

    def store_set(conn: sqlite3.Connection) -> None:
        exists = conn.execute("SELECT 1 FROM query_sets WHERE name = ?", (name,)).fetchone()
        if exists and not replace:
            raise ValidationError(f"query set {excerpt(name)} exists; pass --replace (replace=True) or another --name")
        for table in ("queries", "pool_items", "pools", "query_sets"):
            key = "name" if table == "query_sets" else "set_name"
            conn.execute(f"DELETE FROM {table} WHERE {key} = ?", (name,))  # noqa: S608 (table names are ours)
        conn.execute("INSERT INTO query_sets (name, source, created_at) VALUES (?, ?, ?)", (name, source, created))
        conn.executemany("INSERT INTO queries (set_name, query_id, position, query_text) VALUES (?, ?, ?, ?)",
                         [(name, q.query_id, q.position, q.text) for q in queries])

    store.write(store_set)
    return QuerySet(name=name, source=source, created_at=created, queries=tuple(queries))


def list_query_sets(store: LabelStore) -> list[tuple[QuerySet, int]]:
    """Every stored set (without its queries) and its query count, by name."""
    rows = store.rows(
        "SELECT s.name, s.source, s.created_at, COUNT(q.query_id) FROM query_sets s "
        "LEFT JOIN queries q ON q.set_name = s.name GROUP BY s.name ORDER BY s.name"
    )
    return [(QuerySet(name=str(n), source=str(src), created_at=str(at)), int(c)) for n, src, at, c in rows]


def get_query_set(store: LabelStore, name: str | None = None) -> QuerySet:
    """A stored set with its queries in file order; without a name, the only set (an error if none or several)."""
    names = [qs.name for qs, _ in list_query_sets(store)]
    if name is None:
        if len(names) != 1:
            raise NotFoundError("no query set yet: run `labels queries import FILE`" if not names else
                                f"several query sets ({', '.join(names)}); choose one with --set NAME")
        name = names[0]
    head = store.rows("SELECT name, source, created_at FROM query_sets WHERE name = ?", (name,))
    if not head:
        raise NotFoundError(f"no query set {excerpt(name)}; known: {', '.join(names) or 'none'}")
    rows = store.rows("SELECT query_id, query_text, position FROM queries WHERE set_name = ? ORDER BY position",
                      (name,))
    queries = tuple(SetQuery(query_id=str(q), text=str(t), position=int(p)) for q, t, p in rows)
    n, src, at = head[0]
    return QuerySet(name=str(n), source=str(src), created_at=str(at), queries=queries)
