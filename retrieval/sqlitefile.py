"""One SQLite file shared by threads and processes: WAL, `synchronous=FULL`, one connection per process, every
write one `BEGIN IMMEDIATE` transaction, retried while another writer holds the lock.

Durability: WAL with `synchronous=FULL`, so a write is fsynced before it returns; NORMAL would be crash-safe for
the process but could lose the last acknowledged writes on power loss. Concurrency: the write lock is taken up
front (no reader-to-writer upgrade can deadlock), waits on `busy_timeout`, and a leftover SQLITE_BUSY is retried.
The label store (`retrieval.evaluation.labels`) and the curation log (`retrieval.curation.log`) are such files.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from retrieval.errors import StoreError

T = TypeVar("T")


class SQLiteFile:
    """A SQLite database file used by this process through one connection, one thread at a time."""

    def __init__(self, path: Path, *, what: str, busy_timeout_ms: int = 30_000, retries: int = 8) -> None:
        self.path = Path(path)
        self.what = what
        self.busy_timeout_ms = busy_timeout_ms
        self.retries = retries
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the {what} directory {self.path.parent}: {exc}") from exc

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """This process's connection, one thread at a time (closing the last WAL connection checkpoints
        and fsyncs the database, so a connection per call would cost ~20 ms per write)."""
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
                    raise StoreError(f"{self.what} {self.path}: {exc}") from exc
                time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))  # jitter so writers don't collide again
            except sqlite3.Error as exc:
                raise StoreError(f"{self.what} {self.path}: {exc}") from exc
        raise AssertionError("unreachable")

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """The rows of one parameterised SELECT (for the modules that keep their tables in this file)."""
        try:
            with self._connect() as conn:
                return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"{self.what} {self.path}: {exc}") from exc
