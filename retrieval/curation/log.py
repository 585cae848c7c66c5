"""The curation log of one graph: `DATA_DIR/curation/NAME.sqlite` (WAL, fsynced; `retrieval.sqlitefile`).

It outlives the graph's versions: a re-import replays it. Tables:
  changesets   every edit, undo and redo: author, time, reason, operations, each record's before and after,
               state (`applying` is written before any store is touched, so a crash leaves a trace), generation
  touches      which records each changeset touched, for history and per-record revisions
  meta         the graph's generation (bumped by every applied change) and the version it applies to
  not_duplicates  pairs an analyst said are not duplicates
  replays      what the last re-import did with each changeset (applied / skipped, and why)
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from retrieval.curation.ops import Change, Changeset, Op
from retrieval.errors import NotFoundError
from retrieval.graph import catalog
from retrieval.models import Record
from retrieval.sqlitefile import SQLiteFile

LOG_DIR = "curation"
SCHEMA_VERSION = 1
_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS changesets (
        id INTEGER PRIMARY KEY AUTOINCREMENT, action TEXT NOT NULL, target INTEGER, author TEXT NOT NULL,
        created_at TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', ops TEXT NOT NULL, changes TEXT NOT NULL,
        state TEXT NOT NULL, version TEXT NOT NULL DEFAULT '', generation INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS changesets_state ON changesets (state)",
    """CREATE TABLE IF NOT EXISTS touches (
        kind TEXT NOT NULL, target TEXT NOT NULL, changeset INTEGER NOT NULL,
        PRIMARY KEY (kind, target, changeset)) WITHOUT ROWID""",
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    """CREATE TABLE IF NOT EXISTS not_duplicates (
        a TEXT NOT NULL, b TEXT NOT NULL, author TEXT NOT NULL, created_at TEXT NOT NULL,
        PRIMARY KEY (a, b)) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS replays (
        version TEXT NOT NULL, changeset INTEGER NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL,
        created_at TEXT NOT NULL, PRIMARY KEY (version, changeset)) WITHOUT ROWID""",
)
_SELECT = ("SELECT id, action, target, author, created_at, reason, ops, changes, state, version, generation "
           "FROM changesets")
_INSERT = ("INSERT INTO changesets (action, target, author, created_at, reason, ops, changes, state, version, "
           "generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
_HISTORY = ("SELECT c.id, c.action, c.target, c.author, c.created_at, c.reason, c.ops, c.changes, c.state, "
            "c.version, c.generation FROM touches t JOIN changesets c ON c.id = t.changeset "
            "WHERE t.kind = ? AND t.target = ? ORDER BY c.id")
_OPS: TypeAdapter[list[Op]] = TypeAdapter(list[Op])
_CHANGES: TypeAdapter[list[Change]] = TypeAdapter(list[Change])


class ReplayLine(Record):
    """What a re-import did with one changeset of the log."""

    changeset: int
    status: str  # applied | skipped
    reason: str = ""
    summary: str = ""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def log_path(data_dir: Path, name: str) -> Path:
    return Path(data_dir) / LOG_DIR / f"{catalog.check_name(name)}.sqlite"


def _init(conn: sqlite3.Connection) -> None:
    for sql in _SCHEMA:
        conn.execute(sql)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _row(row: Sequence[Any], graph: str) -> Changeset:
    cid, action, target, author, created, reason, ops, changes, state, version, generation = row
    return Changeset(id=cid, graph=graph, action=action, target=target, author=author, created_at=created,
                     reason=reason, ops=tuple(_OPS.validate_json(ops)), changes=tuple(_CHANGES.validate_json(changes)),
                     state=state, version=version, generation=generation)


class CurationLog(SQLiteFile):
    """One graph's changesets; safe for concurrent threads and processes."""

    def __init__(self, data_dir: Path, name: str) -> None:
        super().__init__(log_path(data_dir, name), what="curation log")
        self.graph = name
        self.write(_init, wal=True)

    # --- changesets ----------------------------------------------------------------------------

    def begin(self, cs: Changeset) -> Changeset:
        """Record `cs` (state `applying` or `draft`) and return it with its id; fsynced before it returns."""
        def insert(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                _INSERT,
                (cs.action, cs.target, cs.author, cs.created_at or utc_now(), cs.reason,
                 _OPS.dump_json(list(cs.ops)).decode(), _CHANGES.dump_json(list(cs.changes)).decode(), cs.state,
                 cs.version, cs.generation),
            )
            return int(cur.lastrowid or 0)

        cid = self.write(insert)
        return self.get(cid)

    def finish(self, cid: int, state: str, *, edit_state: tuple[int, str] | None = None,
               changes: Sequence[Change] | None = None) -> int:
        """Close changeset `cid` as `state`, bump the generation, index its records (and flip the state of the
        edit an undo/redo acted on) in one transaction; returns the new generation."""
        def close(conn: sqlite3.Connection) -> int:
            generation = _generation(conn) + 1
            conn.execute("INSERT INTO meta (key, value) VALUES ('generation', ?) ON CONFLICT (key) DO UPDATE "
                         "SET value = excluded.value", (str(generation),))
            if changes is not None:
                conn.execute("UPDATE changesets SET changes = ? WHERE id = ?",
                             (_CHANGES.dump_json(list(changes)).decode(), cid))
            conn.execute("UPDATE changesets SET state = ?, generation = ? WHERE id = ?", (state, generation, cid))
            if edit_state is not None:
                conn.execute("UPDATE changesets SET state = ? WHERE id = ?", (edit_state[1], edit_state[0]))
            if state == "applied":
                stored = conn.execute("SELECT changes FROM changesets WHERE id = ?", (cid,)).fetchone()[0]
                conn.executemany("INSERT OR IGNORE INTO touches (kind, target, changeset) VALUES (?, ?, ?)",
                                 [(c.kind, c.id, cid) for c in _CHANGES.validate_json(stored)])
            return generation

        return self.write(close)

    def get(self, cid: int) -> Changeset:
        rows = self.rows(_SELECT + " WHERE id = ?", (cid,))
        if not rows:
            raise NotFoundError(f"no changeset #{cid} in the curation log of graph {self.graph!r}")
        return _row(rows[0], self.graph)

    def changesets(self, *, states: Sequence[str] | None = None, limit: int | None = None,
                   newest_first: bool = True) -> list[Changeset]:
        """Changesets (of `states`), newest first by default."""
        sql = _SELECT
        params: list[Any] = []
        if states:
            sql += " WHERE state IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(states)))
        sql += " ORDER BY id " + ("DESC" if newest_first else "ASC")
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_row(r, self.graph) for r in self.rows(sql, params)]

    def effective(self) -> list[Changeset]:
        """The edits in force (applied and not undone), oldest first: what a re-import replays."""
        return [c for c in self.changesets(states=["applied"], newest_first=False) if c.action == "edit"]

    def interrupted(self) -> list[Changeset]:
        return self.changesets(states=["applying"], newest_first=False)

    def drafts(self) -> list[Changeset]:
        return self.changesets(states=["draft"], newest_first=False)

    def update_draft(self, cid: int, ops: Sequence[Op], reason: str) -> None:
        def update(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE changesets SET ops = ?, reason = ? WHERE id = ? AND state = 'draft'",
                         (_OPS.dump_json(list(ops)).decode(), reason, cid))
        self.write(update)

    def discard_draft(self, cid: int) -> None:
        self.write(lambda conn: conn.execute("DELETE FROM changesets WHERE id = ? AND state = 'draft'", (cid,)))

    def generation(self) -> int:
        rows = self.rows("SELECT value FROM meta WHERE key = 'generation'")
        return int(rows[0][0]) if rows else 0

    # --- history -------------------------------------------------------------------------------

    def history(self, kind: str, target: str) -> list[Changeset]:
        """Every applied changeset (edits, undos, redos) that touched one record, oldest first."""
        rows = self.rows(_HISTORY, (kind, target))
        return [_row(r, self.graph) for r in rows]

    def revision(self, kind: str, target: str) -> int:
        """The id of the last changeset that touched a record (0: never changed): what an editor saw."""
        rows = self.rows("SELECT max(changeset) FROM touches WHERE kind = ? AND target = ?", (kind, target))
        return int(rows[0][0] or 0)

    # --- not duplicates and re-imports -----------------------------------------------------------

    def add_not_duplicates(self, a: str, b: str, author: str) -> None:
        lo, hi = sorted((a, b))
        self.write(lambda conn: conn.execute(
            "INSERT OR IGNORE INTO not_duplicates (a, b, author, created_at) VALUES (?, ?, ?, ?)",
            (lo, hi, author, utc_now())))

    def not_duplicates(self) -> set[tuple[str, str]]:
        return {(a, b) for a, b in self.rows("SELECT a, b FROM not_duplicates")}

    def record_replay(self, version: str, lines: Sequence[ReplayLine],
                      changes: dict[int, Sequence[Change]] | None = None) -> None:
        """What a re-import onto `version` did with each edit. An applied edit now describes the records it
        changed in that version (so it can be undone there); a skipped one is `skipped` until redone."""
        def save(conn: sqlite3.Connection) -> None:
            for ln in lines:
                if ln.status == "applied" and changes and ln.changeset in changes:
                    conn.execute("UPDATE changesets SET changes = ?, version = ? WHERE id = ?",
                                 (_CHANGES.dump_json(list(changes[ln.changeset])).decode(), version, ln.changeset))
                    conn.execute("DELETE FROM touches WHERE changeset = ?", (ln.changeset,))
                    conn.executemany("INSERT OR IGNORE INTO touches (kind, target, changeset) VALUES (?, ?, ?)",
                                     [(c.kind, c.id, ln.changeset) for c in changes[ln.changeset]])
                elif ln.status == "skipped":
                    conn.execute("UPDATE changesets SET state = 'skipped' WHERE id = ?", (ln.changeset,))
            conn.execute("DELETE FROM replays WHERE version = ?", (version,))
            conn.executemany(
                "INSERT INTO replays (version, changeset, status, reason, created_at) VALUES (?, ?, ?, ?, ?)",
                [(version, ln.changeset, ln.status, ln.reason, utc_now()) for ln in lines])
            conn.execute("INSERT INTO meta (key, value) VALUES ('replayed', ?) ON CONFLICT (key) DO UPDATE "
                         "SET value = excluded.value", (version,))
        self.write(save)

    def last_replay(self) -> tuple[str, list[ReplayLine]]:
        """The version last re-imported onto and what happened to each changeset ('' and [] if never)."""
        rows = self.rows("SELECT value FROM meta WHERE key = 'replayed'")
        if not rows:
            return "", []
        version = str(rows[0][0])
        lines = self.rows("SELECT changeset, status, reason FROM replays WHERE version = ? ORDER BY changeset",
                          (version,))
        return version, [ReplayLine(changeset=c, status=s, reason=r, summary=self.get(c).summary())
                         for c, s, r in lines]


def _generation(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(row[0]) if row else 0


def has_log(data_dir: Path, name: str) -> bool:
    return log_path(data_dir, name).is_file()
