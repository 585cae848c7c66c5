"""A readers-writer lock per graph, across the threads of a process and across processes.

Searches hold it shared for their whole run; a curation changeset holds it exclusively while it changes the
stores and swaps the in-memory index, so a search sees the graph before or after a changeset, never half of it.
Across processes (the CLI editing a graph that a server-backed app serves) the same holds through `flock` on
`DATA_DIR/curation/NAME.lock`; a data directory that cannot hold that file (read-only) has no writer to wait for.
A writer waits its turn at most `wait_s` (KG_LOCK_WAIT_S), then gives up with a ConflictError that says so: two
curators at once are normal, the second goes after the first.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from retrieval.errors import ConflictError


class GraphLock:
    """Shared (`reading`) / exclusive (`writing`) lock; a thread may nest reads, and read inside its own write.

    Writers are preferred: once one waits, new readers wait too, so a stream of searches cannot starve an edit.
    """

    def __init__(self, path: Path | None, wait_s: float | None = None) -> None:
        self._path = path
        self._wait_s = wait_s  # a writer's longest wait for its turn (None: as long as it takes)
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer: int | None = None
        self._waiting = 0
        self._local = threading.local()

    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    def _file(self, exclusive: bool, deadline: float | None = None) -> int | None:
        """An flock on the graph's lock file (shared or exclusive; an exclusive one waited for until `deadline`), or
        None where the file cannot be made."""
        if self._path is None:
            return None
        try:
            if exclusive:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
            else:
                fd = os.open(self._path, os.O_RDONLY)
        except OSError:
            return None  # no lock file (nobody ever wrote) or a read-only directory (nobody can write)
        if not exclusive or deadline is None:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            return fd
        pause = 0.01
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES) or time.monotonic() >= deadline:
                    os.close(fd)
                    if exc.errno in (errno.EAGAIN, errno.EACCES):
                        raise self._timeout() from exc
                    raise
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.25)

    def _timeout(self) -> ConflictError:
        name = self._path.stem if self._path is not None else "this graph"
        return ConflictError(f"another curator is changing graph {name!r}; waited {self._wait_s:g} s for the turn "
                             "(KG_LOCK_WAIT_S) and gave up: nothing was written, try again once it is done")

    @contextmanager
    def reading(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._depth() or self._writer == me:
            self._local.depth = self._depth() + 1
            try:
                yield
            finally:
                self._local.depth -= 1
            return
        with self._cond:
            while self._writer is not None or self._waiting:
                self._cond.wait()
            self._readers += 1
        self._local.depth = 1
        fd = None
        try:
            fd = self._file(exclusive=False)
            yield
        finally:
            if fd is not None:
                os.close(fd)
            self._local.depth = 0
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._writer == me:
            yield
            return
        if self._depth():
            raise RuntimeError("a thread reading the graph cannot start writing it (it would wait for itself)")
        deadline = None if self._wait_s is None else time.monotonic() + self._wait_s
        with self._cond:
            self._waiting += 1
            try:
                while self._writer is not None or self._readers:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise self._timeout()
                    self._cond.wait(left)
            finally:
                self._waiting -= 1
                self._cond.notify_all()  # readers held off by this waiting writer go on if it gave up
            self._writer = me
        fd = None
        try:
            fd = self._file(exclusive=True, deadline=deadline)
            yield
        finally:
            if fd is not None:
                os.close(fd)
            with self._cond:
                self._writer = None
                self._cond.notify_all()
