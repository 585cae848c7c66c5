"""What the graph back ends' read-only console adapters share: the limits, the error type, JSON-safe values and
a `Collector` that turns the nodes and relationships met in a result into Entity/Relation records."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid
from collections.abc import Callable, Hashable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

from retrieval.errors import RetrievalError
from retrieval.models import Entity, Relation, Subgraph

TIMEOUT_MS = 10_000  # the console's time limit per query
MAX_ROWS = 1_000  # rows shown (one more is read to tell that the result was cut)
# Held while a console reads a version's live files, so that no change writes them meanwhile (the graph's read lock).
Hold = Callable[[], AbstractContextManager[object]]
# Properties that are the engine's bookkeeping, not data (Kuzu's node and relationship values carry them).
_INTERNAL = frozenset({"_id", "_label", "_src", "_dst", "_nodes", "_rels"})


class ConsoleError(RetrievalError):
    """A console query was refused by the engine (a write), stopped by the time limit, or cannot run."""

    def __init__(self, kind: Literal["refused", "timeout", "invalid"], message: str) -> None:
        self.kind = kind
        super().__init__(message)


def json_safe(value: Any) -> Any:
    """A JSON-serialisable copy of an engine value: dates as ISO text, non-finite floats and others as text."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in value]
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (dt.timedelta, decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _props(props: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): json_safe(v) for k, v in props.items() if k not in _INTERNAL}


@dataclass
class Collector:
    """Gathers the nodes and relationships met in a result's values, keyed by the engine's own ids."""

    nodes: dict[Hashable, Entity] = field(default_factory=dict)
    edges: dict[Hashable, tuple[Hashable, Hashable, Relation]] = field(default_factory=dict)

    def node(self, key: Hashable, label: str, props: Mapping[str, Any]) -> dict[str, Any]:
        """Record a node; returns its table cell ({"label", "properties"})."""
        data = _props(props)
        if key not in self.nodes:
            own = data.get("id")
            eid = str(own) if label == "Entity" and own is not None else f"{label}:{own if own is not None else key}"
            name = next((str(data[k]) for k in ("name", "title", "relation_type", "id") if data.get(k) is not None),
                        label)
            text = data.get("description") or data.get("text") or ""
            self.nodes[key] = Entity(id=eid, name=name, type=str(data.get("type") or label),
                                     description=str(text)[:600])
        return {"label": label, "properties": data}

    def edge(self, key: Hashable, source: Hashable, target: Hashable, rel_type: str,
             props: Mapping[str, Any]) -> dict[str, Any]:
        """Record a relationship between two engine node keys; returns its table cell ({"type", "properties"})."""
        data = _props(props)
        if key not in self.edges:
            weight = data.get("weight")
            self.edges[key] = (source, target, Relation(
                id=str(data.get("id") or f"{rel_type}:{key}"), source_id="", target_id="",
                relation_type=str(data.get("relation_type") or rel_type),
                description=str(data.get("description") or ""),
                weight=float(weight) if isinstance(weight, (int, float)) and not isinstance(weight, bool) else 1.0,
            ))
        return {"type": rel_type, "properties": data}

    def subgraph(self) -> Subgraph:
        """The nodes and relationships met; a relationship's endpoint that no column returned is drawn as a
        placeholder named by the engine's id."""
        nodes = dict(self.nodes)
        edges = []
        for source, target, rel in self.edges.values():
            for end in (source, target):
                if end not in nodes:
                    nodes[end] = Entity(id=f"node:{end}", name=f"node {end}", type="(not in the result)")
            edges.append(rel.model_copy(update={"source_id": nodes[source].id, "target_id": nodes[target].id}))
        return Subgraph(nodes=tuple(nodes.values()), edges=tuple(edges), total_nodes=len(nodes))


def refused_message(engine: str, detail: str) -> str:
    return f"{engine} refused the query: the console is read-only ({detail.strip()})"


def timeout_message(timeout_ms: int) -> str:
    return f"the query was stopped at the console's time limit of {timeout_ms / 1000:g} s"
