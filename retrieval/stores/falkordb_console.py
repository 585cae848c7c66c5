"""FalkorDB's read-only console adapter: queries run through GRAPH.RO_QUERY (the server refuses writes) after
GRAPH.EXPLAIN is checked for what reaches outside the graph (LOAD CSV); parameters travel in the header."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import redis
from falkordb import Edge, Node, Path

from retrieval.errors import StoreError, ValidationError
from retrieval.models import QueryResult
from retrieval.stores.base import StoreLocation
from retrieval.stores.console import Collector, ConsoleError, Hold, json_safe, refused_message, timeout_message
from retrieval.stores.falkordb import FalkorGraphStore, connection_pool, cypher_literal

if TYPE_CHECKING:
    from retrieval.config import Settings

# Plan operations of GRAPH.EXPLAIN that write (the dry run refuses them; GRAPH.RO_QUERY refuses them when run)
# or that reach outside the graph (LOAD CSV reads files or URLs: refused before the query runs).
_WRITE_OPERATIONS = frozenset({"Create", "Delete", "Update", "Merge", "MergeCreate", "Create Index", "Drop Index"})
_OUTSIDE_OPERATIONS = {"Load CSV": "LOAD CSV reads a file or URL"}


def _console_literal(value: Any) -> str:
    """A parameter value of the console (any JSON value): maps get backtick-quoted keys, the rest as
    cypher_literal."""
    if isinstance(value, dict):
        for key in value:
            if not key or "`" in key:
                raise ValidationError(f"a map key of a FalkorDB parameter cannot be empty or hold a backtick: {key!r}")
        return "{" + ", ".join(f"`{k}`: {_console_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_console_literal(v) for v in value) + "]"
    return cypher_literal(value)


def _console_text(query: str, params: dict[str, Any]) -> str:
    """The query behind FalkorDB's `CYPHER name=value` header (names are identifiers: console.check_params)."""
    if not params:
        return query
    header = "CYPHER " + " ".join(f"{name}={_console_literal(value)}" for name, value in params.items())
    if "\x00" in header:
        raise ValidationError("FalkorDB parameters cannot hold a NUL character")
    return f"{header} {query}"


def _console_call(store: FalkorGraphStore, fn: Any, timeout_ms: int) -> Any:
    """`store._call` (one retry on a lost connection, clear messages), with the server's refusals translated."""
    try:
        return store._call(fn)
    except StoreError as exc:
        cause = exc.__cause__
        if not isinstance(cause, redis.ResponseError) or "empty key" in str(cause):
            raise
        msg = " ".join(str(cause).split())
        if "read-only" in msg:
            raise ConsoleError("refused", refused_message("FalkorDB", msg)) from cause
        if "timed out" in msg.lower():
            raise ConsoleError("timeout", timeout_message(timeout_ms)) from cause
        raise ConsoleError("invalid", f"FalkorDB cannot run the query: {msg}") from cause


def _plan(store: FalkorGraphStore, text: str, timeout_ms: int) -> list[str]:
    plan = _console_call(store, lambda: store._client.execute_command("GRAPH.EXPLAIN", store._name, text),
                         timeout_ms)
    lines = [plan] if isinstance(plan, str) else list(plan or [])
    for line in lines:
        op = line.strip().split(" | ")[0]
        if op in _OUTSIDE_OPERATIONS:
            raise ConsoleError("refused", refused_message(
                "FalkorDB", f"the plan reaches outside the graph: {_OUTSIDE_OPERATIONS[op]}"))
    return lines


def _falkor_cell(value: Any, collector: Collector) -> Any:
    """A JSON-safe cell; Node, Edge and Path values are recorded in the collector (keys: internal ids)."""
    if isinstance(value, Node):
        return collector.node(value.id, (value.labels or ["node"])[0], value.properties)
    if isinstance(value, Edge):
        src = value.src_node.id if isinstance(value.src_node, Node) else value.src_node
        dst = value.dest_node.id if isinstance(value.dest_node, Node) else value.dest_node
        return collector.edge(value.id, src, dst, str(value.relation or ""), value.properties)
    if isinstance(value, Path):
        return {"nodes": [_falkor_cell(n, collector) for n in value.nodes()],
                "relationships": [_falkor_cell(e, collector) for e in value.edges()]}
    if isinstance(value, dict):
        return {str(k): _falkor_cell(v, collector) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_falkor_cell(v, collector) for v in value]
    return json_safe(value)


def read_only_query(settings: Settings, location: StoreLocation, query: str, params: dict[str, Any],
                    timeout_ms: int, max_rows: int, unchanging: Hold | None = None) -> QueryResult:
    """Run `query` through GRAPH.RO_QUERY (the server refuses writes) with the server-side `timeout_ms`;
    at most `max_rows` rows kept. The plan is checked first for what reaches outside the graph (LOAD CSV)."""
    pool = connection_pool(settings.falkordb_url)
    try:
        store = FalkorGraphStore(pool, location.key, settings.falkordb_url, committed=True)
        text = _console_text(query, params)
        _plan(store, text, timeout_ms)
        start = time.perf_counter()
        result = _console_call(store, lambda: store._graph.ro_query(text, timeout=timeout_ms), timeout_ms)
        elapsed = (time.perf_counter() - start) * 1000
    finally:
        pool.disconnect()
    collector = Collector()
    found = result.result_set if result is not None else []
    rows = tuple(tuple(_falkor_cell(v, collector) for v in row) for row in found[:max_rows])
    columns = tuple(str(h[1]) for h in result.header) if result is not None else ()
    return QueryResult(query=query, params=params, backend="falkordb", columns=columns, rows=rows,
                       subgraph=collector.subgraph(), more_rows=len(found) > max_rows, max_rows=max_rows,
                       timeout_ms=timeout_ms, elapsed_ms=elapsed)


def explain_query(settings: Settings, location: StoreLocation, query: str, params: dict[str, Any],
                  unchanging: Hold | None = None) -> str:
    """FalkorDB's plan of `query` (GRAPH.EXPLAIN) without running it; a plan that writes is refused, as
    GRAPH.RO_QUERY would refuse it."""
    pool = connection_pool(settings.falkordb_url)
    try:
        store = FalkorGraphStore(pool, location.key, settings.falkordb_url, committed=True)
        lines = _plan(store, _console_text(query, params), 60_000)
    finally:
        pool.disconnect()
    writes = [op for op in (line.strip().split(" | ")[0] for line in lines) if op in _WRITE_OPERATIONS]
    if writes:
        raise ConsoleError("refused", refused_message("FalkorDB", f"the plan writes ({', '.join(writes)})"))
    return "\n".join(lines)
