"""Kuzu's read-only console adapter: each query opens the version's database read-only, is prepared alone (one
statement) and its plan is checked for what reaches outside the graph (files, extensions, other databases)."""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import kuzu

from retrieval.errors import StoreError
from retrieval.models import QueryResult
from retrieval.stores.base import StoreLocation
from retrieval.stores.console import Collector, ConsoleError, json_safe, refused_message, timeout_message

if TYPE_CHECKING:
    from retrieval.config import Settings

CONSOLE_BUFFER_POOL = 256 * 1024**2  # bytes: a runaway result fails with a message instead of swelling the app
# A read-only database still runs statements that reach outside it. They are found in the engine's own plan
# (EXPLAIN), never in the query text, and refused: the console reads this graph and nothing else. (Explaining
# EXPORT DATABASE already makes its target directory, empty; nothing is written into it.)
_OUTSIDE_OPERATORS = {
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
}
_PLAN_OPERATOR = re.compile(r"\b([A-Z][A-Z_]+)\[\d+\]")
_PLAN_FUNCTION = re.compile(r"Function: ([A-Z_]+)")


def _outside(plan: str) -> str:
    """Why the plan reaches outside the database ('' when it does not): an operator above, or a table function
    that scans files or the caller's Python objects (LOAD FROM: READ_CSV_*, READ_PARQUET, READ_PANDAS, ...)."""
    for op in _PLAN_OPERATOR.findall(plan):
        if op in _OUTSIDE_OPERATORS:
            return f"{op} {_OUTSIDE_OPERATORS[op]}"
    for fn in _PLAN_FUNCTION.findall(plan):
        if (fn.startswith("READ_") and fn != "READ_FTABLE") or fn == "JSON_SCAN":  # READ_FTABLE: internal
            return f"{fn} reads data from outside the database"
    return ""


@contextmanager
def _console(location: StoreLocation) -> Iterator[kuzu.Connection]:
    """A connection to the version's database opened read-only for this one query (the app's own store stays
    as it is; Kuzu lets several read-only databases share a path)."""
    path = location.dir / "kuzu"
    if not path.exists():
        raise StoreError(f"no Kuzu database at {path}")
    try:
        db = kuzu.Database(str(path), read_only=True, buffer_pool_size=CONSOLE_BUFFER_POOL)
        conn = kuzu.Connection(db)
    except RuntimeError as exc:
        raise StoreError(f"cannot open Kuzu database {path} read-only: {exc}") from exc
    try:
        yield conn
    finally:
        conn.close()
        db.close()


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


def _checked(conn: kuzu.Connection, query: str, params: dict[str, Any], timeout_ms: int) -> tuple[Any, str]:
    """(prepared statement, plan): prepare refuses a write (read-only database) and a second statement before
    anything runs; the plan is then checked for what reaches outside the database."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # prepare() is how one statement is checked alone
        prepared = conn.prepare(query)
    if not prepared.is_success():
        raise _console_error(prepared.get_error_message(), timeout_ms)
    result = conn.execute("EXPLAIN " + query, params)
    assert not isinstance(result, list)  # one statement: prepare said so
    plan = "\n".join(str(row[0]) for row in result.get_all())  # type: ignore[index]  # rows are lists
    why = _outside(plan)
    if why:
        raise ConsoleError("refused", refused_message("Kuzu", f"the plan reaches outside the graph: {why}"))
    return prepared, plan


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
                    timeout_ms: int, max_rows: int) -> QueryResult:
    """Run one Cypher statement on the database opened read-only, stopped after `timeout_ms`, at most
    `max_rows` rows kept (one more is read to tell that the result was cut)."""
    collector = Collector()
    rows: list[tuple[Any, ...]] = []
    more = False
    with _console(location) as conn:
        conn.set_query_timeout(timeout_ms)
        try:
            prepared, _ = _checked(conn, query, params, timeout_ms)
            start = time.perf_counter()
            result = conn.execute(prepared, params)
            assert not isinstance(result, list)
            columns = tuple(result.get_column_names())
            while result.has_next():
                if len(rows) == max_rows:
                    more = True
                    break
                rows.append(tuple(_cell(v, collector) for v in result.get_next()))
            elapsed = (time.perf_counter() - start) * 1000
            result.close()
        except RuntimeError as exc:
            raise _console_error(str(exc), timeout_ms) from exc
    return QueryResult(query=query, params=params, backend="kuzu", columns=columns, rows=tuple(rows),
                       subgraph=collector.subgraph(), more_rows=more, max_rows=max_rows, timeout_ms=timeout_ms,
                       elapsed_ms=elapsed)


def explain_query(settings: Settings, location: StoreLocation, query: str, params: dict[str, Any]) -> str:
    """Kuzu's plan of `query` without running it; refuses what read_only_query refuses."""
    with _console(location) as conn:
        try:
            return _checked(conn, query, params, 60_000)[1]
        except RuntimeError as exc:
            raise _console_error(str(exc), 60_000) from exc
