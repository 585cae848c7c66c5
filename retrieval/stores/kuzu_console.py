"""Kuzu's read-only console adapter: each query opens the console's private copy of the version's database
read-only, is prepared alone (one statement) and its plan is checked for what reaches outside the graph (files,
extensions, other databases, transactions and checkpoints).

The copy is the guarantee that no statement changes the live version: Kuzu 0.11.3 opened read-only still runs
CHECKPOINT, which writes kuzu.shadow and kuzu.wal beside the database and then fails, after which every read-only
open of it fails. The console therefore never opens a file of the live version folder: it copies the database
into DATA_DIR/console/ (a private temporary folder if the data directory is read-only) and queries the copy. A copy
is of one state of the version's files (their sizes, times and inodes): a curation changeset writes them in place,
so the next query copies them again (under the graph's read lock, which a changeset's write waits for) and the old
copy is removed; a deleted entity or a redacted text is never answered from a stale copy. A copy that anything left
with extra files is replaced before the next query too."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.errors import StoreError, ValidationError
from retrieval.models import QueryResult
from retrieval.stores.base import StoreLocation
from retrieval.stores.console import Collector, ConsoleError, Hold, json_safe, refused_message, timeout_message
from retrieval.stores.kuzu import recover

if TYPE_CHECKING:
    from retrieval.config import Settings

CONSOLE_BUFFER_POOL = 256 * 1024**2  # bytes: a runaway result fails with a message instead of swelling the app
_DATABASE = "kuzu"
_COPY_LOCK = threading.Lock()
_STALE_S = 3600.0  # an unfinished copy older than this was left by a killed process
_CHILD = Path(__file__).with_name("kuzu_console_child.py")
_CHILD_GRACE_S = 30.0  # beyond the query's own time limit: a worker's start and the database's open
CHECK_PLAN = True  # refuse what reaches outside the graph (tests switch it off to show the copy alone suffices)


def drop_copy(settings: Settings, version_dir: Path) -> None:
    """Remove the console's copies of a retired version (the console also drops such copies when it next makes one)."""
    for root in (settings.data_dir / "console", _fallback_root(settings)):
        for entry in root.glob(f"{version_dir.name}*") if root.is_dir() else ():
            if _version_of(entry.name) == version_dir.name:
                _remove(entry)


def _version_of(copy_name: str) -> str:
    """The version folder a copy was made of (`NAME-VERSION+STAMP`)."""
    return copy_name.split("+", 1)[0]


def _stamp(version_dir: Path) -> str:
    """The state of the version's database files (size, modification and change times, inode of each): a curation
    changeset, a recovery or a repair writes them in place and so changes it."""
    parts = []
    for name in (_DATABASE, f"{_DATABASE}.wal", f"{_DATABASE}.shadow"):
        try:
            st = (version_dir / name).stat()
        except FileNotFoundError:
            continue
        parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _fallback_root(settings: Settings) -> Path:
    key = hashlib.sha256(str(settings.data_dir.resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"kg-lens-console-{os.getuid()}-{key}"


def _copies_root(settings: Settings) -> Path:
    """Where the console keeps its copies: DATA_DIR/console, else (a read-only data directory) a private folder
    in the system's temporary directory, one per data directory."""
    root = settings.data_dir / "console"
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        if os.access(root, os.W_OK):
            return root
    except OSError:
        pass
    root = _fallback_root(settings)
    root.mkdir(mode=0o700, exist_ok=True)
    info = root.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:  # made by someone else: their folder, not ours
        raise StoreError(f"the console's folder {root} is not private to this user; remove it")
    return root


def _intact(copy: Path) -> bool:
    """The copy holds its database file and nothing else (a statement that wrote would have left kuzu.shadow or
    kuzu.wal: Kuzu opens the file itself read-only, so it cannot change in place)."""
    try:
        return os.listdir(copy) == [_DATABASE]
    except OSError:
        return False


def _remove(path: Path) -> None:
    """Move `path` aside in one rename, then delete it (a query that has it open keeps reading its files)."""
    trash = path.with_name(f".trash-{uuid.uuid4().hex}")
    try:
        path.rename(trash)
    except OSError:
        return  # gone already, or another process moved it
    shutil.rmtree(trash, ignore_errors=True)


def _tidy(root: Path, settings: Settings, keep: Path) -> None:
    """Drop copies of versions that were retired, older copies of the kept one's version (the graph changed since),
    and what killed processes left half-made."""
    versions = settings.data_dir / "versions"
    for entry in root.iterdir():
        if entry.name.startswith("."):
            if entry.name.startswith(".trash-") or time.time() - entry.stat().st_mtime > _STALE_S:
                shutil.rmtree(entry, ignore_errors=True)
        elif entry != keep and (_version_of(entry.name) == _version_of(keep.name)
                                or (versions.is_dir() and not (versions / _version_of(entry.name)).is_dir())):
            _remove(entry)


COPY_ATTEMPTS = 3


def private_copy(settings: Settings, location: StoreLocation, unchanging: Hold | None = None) -> Path:
    """The console's own copy of the version's Kuzu database as it is now (made outside the version folder, again
    whenever the version's files changed); the live folder's files are only ever read, to make it. `unchanging` is
    held while they are read (the graph's read lock: a curation changeset waits); a copy whose files changed while
    it was made is made again."""
    source = location.dir / _DATABASE
    if not source.exists():
        raise StoreError(f"no Kuzu database at {source}")
    root = _copies_root(settings)
    with unchanging() if unchanging is not None else nullcontext():
        for _ in range(COPY_ATTEMPTS):
            stamp = _stamp(location.dir)
            copy = root / f"{location.dir.name}+{stamp}"
            with _COPY_LOCK:
                if _intact(copy):
                    return copy / _DATABASE
                fresh = root / f".copy-{uuid.uuid4().hex}"
                fresh.mkdir(mode=0o700)
                try:
                    for name in (_DATABASE, f"{_DATABASE}.wal", f"{_DATABASE}.shadow"):
                        if (location.dir / name).is_file():
                            shutil.copyfile(location.dir / name, fresh / name)
                    if _stamp(location.dir) != stamp:  # written while copied (no lock file yet): copy again
                        shutil.rmtree(fresh, ignore_errors=True)
                        continue
                    if not _intact(fresh):  # copied with a WAL or an interrupted checkpoint: recovered in the copy
                        recover(fresh / _DATABASE)
                    _remove(copy)
                    fresh.rename(copy)
                except OSError as exc:
                    shutil.rmtree(fresh, ignore_errors=True)
                    if not _intact(copy):  # another process put its copy in place first: use that one
                        raise StoreError(f"cannot copy the Kuzu database for the console into {root}: {exc}") from exc
                _tidy(root, settings, keep=copy)
            return copy / _DATABASE
    raise StoreError(f"the graph's database changed {COPY_ATTEMPTS} times while the console copied it; run the "
                     "query again")


class _Worker:
    """One console worker process (kuzu_console_child.py): jobs as JSON lines in, answers as JSON lines out.
    State is real (a process and its pipes), hence a class."""

    def __init__(self) -> None:
        # -I: the child's own folder (which holds kuzu.py) is not put on its import path
        self.proc = subprocess.Popen([sys.executable, "-I", str(_CHILD)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def ask(self, text: str, wait_s: float) -> str | None:
        """The answer line to one job line; None if the worker died or did not answer in `wait_s` (then it is
        killed)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(text + "\n")
            self.proc.stdin.flush()
        except OSError:
            return None
        ready, _, _ = select.select([self.proc.stdout], [], [], wait_s)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.kill()
            self.proc.wait()
        return line or None

    def exit_note(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "no answer in time"
        return f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


_IDLE: queue.Queue[_Worker] = queue.Queue()
_WORKERS = threading.BoundedSemaphore(2)  # console queries at a time per app process (one per core here)


def _in_child(settings: Settings, location: StoreLocation, query: str, params: dict[str, Any], timeout_ms: int,
              max_rows: int, *, explain_only: bool = False, unchanging: Hold | None = None) -> dict[str, Any]:
    """Run the console's job on the private copy in a worker process (kuzu_console_child.py): a statement that
    crashes Kuzu ends that process, not the app; the next query starts a fresh one."""
    job = {"path": str(private_copy(settings, location, unchanging)), "query": query, "params": params,
           "timeout_ms": timeout_ms, "max_rows": max_rows, "buffer_pool": CONSOLE_BUFFER_POOL,
           "explain_only": explain_only, "check_plan": CHECK_PLAN}
    try:
        text = json.dumps(job, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"console parameters must be JSON values: {exc}") from exc
    if not _WORKERS.acquire(timeout=timeout_ms / 1000):
        raise ConsoleError("timeout", f"the console is busy with other queries; {timeout_message(timeout_ms)}")
    try:
        try:
            worker = _IDLE.get_nowait()
        except queue.Empty:
            worker = _Worker()
        line = worker.ask(text, timeout_ms / 1000 + _CHILD_GRACE_S)
        if line is None:
            raise ConsoleError("invalid", f"Kuzu crashed on this query ({worker.exit_note()}); it ran in a process "
                                          f"of its own, so nothing else was affected")
        _IDLE.put(worker)
    finally:
        _WORKERS.release()
    answer: dict[str, Any] = json.loads(line)
    if "error" in answer:
        raise _console_error(answer["error"], timeout_ms)
    if answer.get("refused"):
        raise ConsoleError("refused", refused_message("Kuzu", f"the plan reaches outside the graph: "
                                                              f"{answer['refused']}"))
    return answer


def _console_error(message: str, timeout_ms: int) -> ConsoleError:
    msg = " ".join(message.split())
    if "read-only" in msg:
        return ConsoleError("refused", refused_message("Kuzu", msg))
    if "Interrupted" in msg:
        return ConsoleError("timeout", timeout_message(timeout_ms))
    if "multiple statements" in msg:  # two statements, or a procedure Kuzu expands into several (create_fts_index)
        return ConsoleError("refused", f"Kuzu refused the query: it prepares as more than one statement (a second "
                                       f"statement, or a procedure such as create_fts_index that writes); the "
                                       f"console runs one read statement at a time ({msg})")
    if "Buffer manager" in msg:
        return ConsoleError("invalid", f"the query needs more than the console's {CONSOLE_BUFFER_POOL >> 20} MB "
                                       f"of memory ({msg})")
    return ConsoleError("invalid", f"Kuzu cannot run the query: {msg}")


def _cell(value: Any, collector: Collector) -> Any:
    """A JSON-safe cell; nodes ({_id, _label}), relationships ({_src, _dst}) and paths ({_nodes, _rels}) are
    recorded in the collector."""
    if isinstance(value, dict):
        if "_nodes" in value and "_rels" in value:
            return {"nodes": [_cell(n, collector) for n in value["_nodes"]],
                    "relationships": [_cell(r, collector) for r in value["_rels"]]}
        if {"_src", "_dst", "_id"} <= value.keys():
            return collector.edge(_key(value["_id"]), _key(value["_src"]), _key(value["_dst"]),
                                  str(value.get("_label", "")), value)
        if {"_id", "_label"} <= value.keys():
            return collector.node(_key(value["_id"]), str(value["_label"]), value)
        return {str(k): _cell(v, collector) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cell(v, collector) for v in value]
    return json_safe(value)


def _key(internal: Any) -> str:
    return f"{internal.get('table')}:{internal.get('offset')}" if isinstance(internal, dict) else str(internal)


def read_only_query(settings: Settings, location: StoreLocation, query: str, params: dict[str, Any],
                    timeout_ms: int, max_rows: int, unchanging: Hold | None = None) -> QueryResult:
    """Run one Cypher statement on the console's copy of the version as it is now (`private_copy`) opened read-only,
    stopped after `timeout_ms`, at most `max_rows` rows kept (one more is read to tell that the result was cut)."""
    answer = _in_child(settings, location, query, params, timeout_ms, max_rows, unchanging=unchanging)
    collector = Collector()
    rows = tuple(tuple(_cell(v, collector) for v in row) for row in answer["rows"])
    return QueryResult(query=query, params=params, backend="kuzu", columns=tuple(answer["columns"]), rows=rows,
                       subgraph=collector.subgraph(), more_rows=answer["more"], max_rows=max_rows,
                       timeout_ms=timeout_ms, elapsed_ms=answer["elapsed_ms"])


def explain_query(settings: Settings, location: StoreLocation, query: str, params: dict[str, Any],
                  unchanging: Hold | None = None) -> str:
    """Kuzu's plan of `query` without running it; refuses what read_only_query refuses."""
    answer = _in_child(settings, location, query, params, 60_000, 1, explain_only=True, unchanging=unchanging)
    plan: str = answer["plan"]
    return plan
