"""The audit log: who did what, when, and whether it was allowed, appended to SQLite at DATA_DIR/audit.sqlite.

Append-only twice over: the class has no update or delete, and triggers in the file abort any UPDATE or DELETE,
and an INSERT (OR REPLACE) onto a row it holds.
Durable: WAL with `synchronous=FULL`, one transaction per entry, so an entry is fsynced before `record` returns
(the same rule as the labels: evaluation/labels.py). Anyone who can write the data directory can still remove the
file; the log is evidence against the app's users, not against the server's administrators.
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from retrieval.errors import StoreError, ValidationError
from retrieval.models import Record

AUDIT_FILE = "audit.sqlite"
MAX_DETAIL = 2000  # characters of a detail kept (a console query, a refusal's message)
MAX_NAME = 200  # characters of an actor, action, graph or tenant kept (a crafted link can name anything)
OUTCOMES = ("ok", "refused")

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL,
        outcome TEXT NOT NULL, graph TEXT NOT NULL DEFAULT '', tenant TEXT NOT NULL DEFAULT '',
        detail TEXT NOT NULL DEFAULT '')""",
    "CREATE INDEX IF NOT EXISTS audit_at ON audit (at)",
    """CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
    # INSERT OR REPLACE / REPLACE deletes the row it collides with without firing the DELETE trigger: an insert
    # may not name a sequence number the log holds
    """CREATE TRIGGER IF NOT EXISTS audit_no_replace BEFORE INSERT ON audit
        WHEN EXISTS (SELECT 1 FROM audit WHERE seq = NEW.seq)
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END""",
)
_INSERT = "INSERT INTO audit (at, actor, action, outcome, graph, tenant, detail) VALUES (?, ?, ?, ?, ?, ?, ?)"
_COLUMNS = ("seq", "at", "actor", "action", "outcome", "graph", "tenant", "detail")
_LAST = ("SELECT seq, at, actor, action, outcome, graph, tenant, detail FROM audit WHERE actor = ? AND action = ? "
         "ORDER BY seq DESC LIMIT 1")
_SELECT = "SELECT seq, at, actor, action, outcome, graph, tenant, detail FROM audit WHERE at >= ? ORDER BY seq DESC"


class AuditEntry(Record):
    """One line of the log. `at` is UTC ISO 8601 with microseconds (sorts as text)."""

    seq: int
    at: str
    actor: str
    action: str
    outcome: str
    graph: str = ""
    tenant: str = ""
    detail: str = ""


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_since(text: str, now: datetime | None = None) -> str:
    """`--since` as an ISO timestamp: an ISO date or date-time (UTC unless it says), or an age such as 15m, 24h, 7d."""
    raw = text.strip()
    now = now or datetime.now(UTC)
    units = {"m": "minutes", "h": "hours", "d": "days"}
    if raw[-1:] in units and raw[:-1].isdigit():
        return (now - timedelta(**{units[raw[-1]]: int(raw[:-1])})).isoformat(timespec="microseconds")
    try:
        when = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise ValidationError(f"--since {raw[:200]!r}: use an ISO date (2026-11-26), a date-time, or an age "
                              "such as 15m, 24h or 7d") from exc
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="microseconds")


class AuditLog:
    """The audit log of one data directory; safe for concurrent threads and processes (state: one connection)."""

    def __init__(self, path: Path, *, busy_timeout_ms: int = 30_000) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout_ms / 1000, isolation_level=None,
                                         check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = FULL")
            with self._lock:
                self._conn.execute("BEGIN IMMEDIATE")
                for sql in _SCHEMA:
                    self._conn.execute(sql)
                self._conn.execute("COMMIT")
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"audit log {self.path}: {exc}") from exc

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> AuditLog:
        return cls(Path(data_dir) / AUDIT_FILE)

    def record(self, actor: str, action: str, *, outcome: str = "ok", graph: str = "", tenant: str = "",
               detail: str = "") -> AuditEntry:
        """Append one entry (fsynced before this returns) and return it."""
        if outcome not in OUTCOMES:
            raise ValidationError(f"audit outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
        row = (datetime.now(UTC).isoformat(timespec="microseconds"), _cap(actor, MAX_NAME), _cap(action, MAX_NAME),
               outcome, _cap(graph or "", MAX_NAME), _cap(tenant or "", MAX_NAME), _cap(detail, MAX_DETAIL))
        try:
            with self._lock:
                seq = self._conn.execute(_INSERT, row).lastrowid  # autocommit: one fsynced transaction
        except sqlite3.Error as exc:
            raise StoreError(f"audit log {self.path}: {exc}") from exc
        return AuditEntry(seq=int(seq or 0), **dict(zip(_COLUMNS[1:], row, strict=True)))

    def entries(self, since: str | None = None, *, limit: int | None = None) -> list[AuditEntry]:
        """Entries at or after `since` (an ISO timestamp; `parse_since` makes one), oldest first; the newest `limit`."""
        sql = _SELECT
        params: list[object] = [since or ""]
        if limit is not None:
            sql, params = sql + " LIMIT ?", [*params, int(limit)]
        try:
            with self._lock:
                rows = self._conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"audit log {self.path}: {exc}") from exc
        return [AuditEntry(**dict(zip(_COLUMNS, r, strict=True))) for r in reversed(rows)]

    def last(self, actor: str, action: str) -> AuditEntry | None:
        """The newest entry of `actor` doing `action`, or None."""
        try:
            with self._lock:
                row = self._conn.execute(_LAST, (_cap(actor, MAX_NAME), action)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"audit log {self.path}: {exc}") from exc
        return AuditEntry(**dict(zip(_COLUMNS, row, strict=True))) if row else None

    def close(self) -> None:
        with self._lock:
            self._conn.close()
