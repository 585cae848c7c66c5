"""The Kuzu console's worker process (`kuzu_console` starts it by file path and keeps it for the next query).

Some statements crash Kuzu 0.11.3 itself (`CALL read_npy('a.csv') RETURN *` is a segmentation fault while it is
prepared): in the app's process that would end the server for every user. Here it ends this worker, and the
console reports it and starts another. The module needs only the standard library and kuzu.

Reads jobs (one JSON line each) on stdin and writes one JSON line per job on stdout: {"columns", "rows", "more",
"elapsed_ms"}, {"plan"}, {"refused": why} (the plan reaches outside the graph) or {"error": Kuzu's message}. It
exits when stdin closes (its app is gone).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import time
import warnings
from typing import Any

import kuzu

# A read-only database still runs statements that reach outside it. They are found in the engine's own plan
# (EXPLAIN), never in the query text, and refused: the console reads this graph and nothing else. (Explaining
# EXPORT DATABASE already makes its target directory, empty; nothing is written into it.) The console's copy of
# the database keeps the live version safe whatever runs; these refusals keep the copy and the rest of the disk.
OUTSIDE_OPERATORS = {
    "COPY_TO": "writes a file",
    "EXPORT_DATABASE": "writes files",
    "IMPORT_DATABASE": "reads files",
    "ATTACH_DATABASE": "opens another database",
    "DETACH_DATABASE": "detaches a database",
    "USE_DATABASE": "switches the database",
    "INSTALL_EXTENSION": "installs an extension",
    "LOAD_EXTENSION": "loads an extension",
    "UNINSTALL_EXTENSION": "removes an extension",
    "STANDALONE_CALL": "changes a setting of the engine",
    "TRANSACTION": "controls transactions or checkpoints (the console runs one read statement at a time)",
}
_PLAN_OPERATOR = re.compile(r"\b([A-Z][A-Z_]+)\[\d+\]")
_PLAN_FUNCTION = re.compile(r"Function: ([A-Z_]+)")


def outside(plan: str) -> str:
    """Why the plan reaches outside the database ('' when it does not): an operator above, or a table function
    that scans files or the caller's Python objects (LOAD FROM: READ_CSV_*, READ_PARQUET, READ_PANDAS, ...)."""
    for op in _PLAN_OPERATOR.findall(plan):
        if op in OUTSIDE_OPERATORS:
            return f"{op} {OUTSIDE_OPERATORS[op]}"
    for fn in _PLAN_FUNCTION.findall(plan):
        if (fn.startswith("READ_") and fn != "READ_FTABLE") or fn == "JSON_SCAN":  # READ_FTABLE: internal
            return f"{fn} reads data from outside the database"
    return ""


def _plain(value: Any) -> Any:
    """A value json cannot write as is: dates as ISO text, bytes as hex, the rest (Decimal, UUID, ...) as text."""
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


class _Open:
    """The database last queried, kept open for the next job on the same copy (the same path and file)."""

    key: tuple[str, int] | None = None
    db: kuzu.Database | None = None

    @classmethod
    def get(cls, path: str, buffer_pool: int) -> kuzu.Database:
        key = (path, os.stat(path).st_ino)  # a replaced copy is a new file: opened anew
        if cls.key != key or cls.db is None:
            cls.drop()
            cls.db, cls.key = kuzu.Database(path, read_only=True, buffer_pool_size=buffer_pool), key
        return cls.db

    @classmethod
    def drop(cls) -> None:
        if cls.db is not None:
            cls.db.close()
        cls.db = cls.key = None


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Prepare alone (a write or a second statement is refused before anything runs), check the plan, run. A job
    that fails closes the database (the next one opens it afresh)."""
    try:
        answer = _run(job)
    except RuntimeError as exc:
        answer = {"error": str(exc)}
    if "error" in answer:
        _Open.drop()
    return answer


def _run(job: dict[str, Any]) -> dict[str, Any]:
    db = _Open.get(job["path"], job["buffer_pool"])
    conn = kuzu.Connection(db)
    try:
        conn.set_query_timeout(job["timeout_ms"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # prepare() is how one statement is checked alone
            prepared = conn.prepare(job["query"])
        if not prepared.is_success():
            return {"error": prepared.get_error_message()}
        explained = conn.execute("EXPLAIN " + job["query"], job["params"])
        assert not isinstance(explained, list)  # one statement: prepare said so
        plan = "\n".join(str(row[0]) for row in explained.get_all())  # type: ignore[index]  # rows are lists
        why = outside(plan) if job["check_plan"] else ""
        if why or job["explain_only"]:
            return {"refused": why} if why else {"plan": plan}
        start = time.perf_counter()
        result = conn.execute(prepared, job["params"])
        assert not isinstance(result, list)
        rows: list[Any] = []
        more = False
        while result.has_next():
            if len(rows) == job["max_rows"]:
                more = True
                break
            rows.append(result.get_next())
        elapsed = (time.perf_counter() - start) * 1000
        columns = result.get_column_names()
        result.close()
        return {"columns": columns, "rows": rows, "more": more, "elapsed_ms": elapsed}
    finally:
        conn.close()


if __name__ == "__main__":
    for line in sys.stdin:
        sys.stdout.write(json.dumps(run(json.loads(line)), default=_plain) + "\n")
        sys.stdout.flush()
