"""The read-only Cypher console (issue 17): checked parameters, JSON-safe rows, nodes and relationships as records.

Each graph back end's module runs a console query read-only by construction (`read_only_query`: Kuzu opened
read-only, FalkorDB through GRAPH.RO_QUERY) and explains one (`explain_query`); a write is refused by the
engine. This module holds what the back ends share: the limits, the parameter and query checks, the value
conversion (a `Collector` turns the nodes and relationships met in the rows into Entity/Relation records for
the graph view), example queries built from the graph's schema, and natural language to Cypher with Gemini.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel

from retrieval.config import Settings
from retrieval.errors import ValidationError
from retrieval.graph.catalog import GraphHandle
from retrieval.models import FewShotExample, QueryResult
from retrieval.stores.base import CHUNKS, graph_console
from retrieval.stores.console import MAX_ROWS, TIMEOUT_MS, Hold

if TYPE_CHECKING:
    from retrieval.graph.runtime import KG

MAX_QUERY_CHARS = 20_000
MAX_PARAMS_CHARS = 100_000
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def check_query(query: str) -> str:
    """A non-empty Cypher string of at most 20,000 characters, without NUL (ValidationError otherwise)."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise ValidationError(f"the query is {len(query):,} characters long; the limit is {MAX_QUERY_CHARS:,}")
    if "\x00" in query:
        raise ValidationError("the query contains a NUL character")
    return query.strip()


def check_params(params: Any) -> dict[str, Any]:
    """Parameters are a JSON object whose names are identifiers (they are sent as parameters, never as text)."""
    if not isinstance(params, Mapping):
        raise ValidationError("parameters must be a JSON object, e.g. {\"name\": \"price elasticity\"}")
    bad = [str(k) for k in params if not isinstance(k, str) or not _NAME.fullmatch(k)]
    if bad:
        raise ValidationError(f"parameter name {bad[0][:40]!r} is not an identifier (letters, digits, '_')")
    return dict(params)


def parse_params(text: str) -> dict[str, Any]:
    """The console's parameter box: empty means none; otherwise a JSON object (see check_params)."""
    if not text or not text.strip():
        return {}
    if len(text) > MAX_PARAMS_CHARS:
        raise ValidationError(f"parameters are {len(text):,} characters long; the limit is {MAX_PARAMS_CHARS:,}")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"parameters are not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") \
            from exc
    return check_params(value)


def run_query(settings: Settings, handle: GraphHandle, query: str, params: Mapping[str, Any] | None = None, *,
              timeout_ms: int = TIMEOUT_MS, max_rows: int = MAX_ROWS) -> QueryResult:
    """Run `query` read-only on the graph version `handle`, with the time limit and the row cap."""
    if not 1 <= max_rows <= 100_000:
        raise ValidationError(f"max rows must be 1-100,000, got {max_rows}")
    if not 100 <= timeout_ms <= 600_000:
        raise ValidationError(f"the time limit must be 100-600,000 ms, got {timeout_ms}")
    result: QueryResult = graph_console(settings).read_only_query(
        settings, handle.location, check_query(query), check_params(params or {}), timeout_ms, max_rows,
        unchanging=_unchanging(settings, handle))
    return result


def _unchanging(settings: Settings, handle: GraphHandle) -> Hold:
    """The graph's read lock, for a back end that reads the version's files (Kuzu copies them once per state of the
    files): a curation changeset waits meanwhile, so the console answers from the graph as it is, never half of one
    and never an old copy."""
    from retrieval.graph.lock import GraphLock
    from retrieval.graph.runtime import lock_path

    return GraphLock(lock_path(settings, handle.name)).reading


def explain(settings: Settings, handle: GraphHandle, query: str, params: Mapping[str, Any] | None = None) -> str:
    """The engine's plan of `query` (Kuzu EXPLAIN, FalkorDB GRAPH.EXPLAIN): a dry run that refuses what
    `run_query` would refuse, without running it."""
    plan: str = graph_console(settings).explain_query(settings, handle.location, check_query(query),
                                                check_params(params or {}), unchanging=_unchanging(settings, handle))
    return plan


# --- examples and natural language -------------------------------------------------------------


@dataclass(frozen=True)
class ExampleQuery:
    title: str
    query: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Vocabulary:
    """The graph's own words for the examples: types by frequency and two connected entity names."""

    entity_types: Sequence[str]
    relation_types: Sequence[str]
    hub: str  # the best-connected entity's name
    neighbour: str  # a name two hops from it or next to it ('' if none)
    book: str = ""


# Table and relationship names per back end (retrieval/stores/kuzu.py, falkordb.py).
EDGE_LABEL = {"kuzu": "RELATES", "falkordb": "REL"}


def example_queries(backend: str, words: Vocabulary) -> list[ExampleQuery]:
    """Read queries for this graph's schema, with its real type and entity names as parameters."""
    rel = EDGE_LABEL.get(backend, "RELATES")
    out = [
        ExampleQuery("Most connected entities",
                     f"MATCH (e:Entity)-[r:{rel}]-() RETURN e.name AS name, e.type AS type, count(r) AS degree "
                     "ORDER BY degree DESC LIMIT 20", {}),
        ExampleQuery("Relation types by count",
                     f"MATCH ()-[r:{rel}]->() RETURN r.relation_type AS relation_type, count(*) AS n "
                     "ORDER BY n DESC", {}),
        ExampleQuery(f"Neighbourhood of {words.hub[:60]!r} (as a graph)",
                     f"MATCH (a:Entity {{name: $name}})-[r:{rel}]-(b:Entity) RETURN a, r, b LIMIT 50",
                     {"name": words.hub}),
    ]
    if words.entity_types:
        out.append(ExampleQuery(f"Entities of type {words.entity_types[0][:40]!r}",
                                "MATCH (e:Entity) WHERE e.type = $type RETURN e.name AS name, e.description AS "
                                "description ORDER BY name LIMIT 25", {"type": words.entity_types[0]}))
    if words.relation_types:
        out.append(ExampleQuery(f"{words.relation_types[0][:40]} relations (as a graph)",
                                f"MATCH (a:Entity)-[r:{rel}]->(b:Entity) WHERE r.relation_type = $type "
                                "RETURN a, r, b LIMIT 50", {"type": words.relation_types[0]}))
    if words.neighbour:
        out.append(ExampleQuery(f"Paths from {words.hub[:40]!r} to {words.neighbour[:40]!r}",
                                f"MATCH p = (a:Entity {{name: $source}})-[:{rel}*1..3]-(b:Entity {{name: $target}}) "
                                "RETURN p LIMIT 5", {"source": words.hub, "target": words.neighbour}))
    if words.book and backend == "kuzu":
        out.append(ExampleQuery(f"Passages of {words.book[:40]!r}",
                                "MATCH (c:Chunk) WHERE c.original_document = $book RETURN c.chapter AS chapter, "
                                "c.position AS position, c.text AS text ORDER BY position LIMIT 20",
                                {"book": words.book}))
    return out


SCHEMA = {
    "kuzu": (
        "Kuzu property graph.\n"
        "Node table Entity(id STRING, name STRING, name_lower STRING, type STRING, description STRING, "
        "aliases STRING[], source_chunks STRING[]).\n"
        "Node table Chunk(id STRING, text STRING, source STRING, original_document STRING (the book), "
        "chapter STRING, author STRING, position INT64).\n"
        "Node table Relation(id STRING, source_id STRING, target_id STRING, relation_type STRING, description "
        "STRING, weight DOUBLE, source_chunks STRING[]): one row per relationship, with its description.\n"
        "Relationship table RELATES(FROM Entity TO Entity, id STRING, relation_type STRING, weight DOUBLE); "
        "join r.id = Relation.id for the description. Paths: -[:RELATES*1..3]-."
    ),
    "falkordb": (
        "FalkorDB property graph.\n"
        "Nodes (:Entity {id, name, name_lower, type, description, aliases, source_chunks}).\n"
        "Nodes (:Chunk {id, text, source, original_document (the book), chapter, author, position}).\n"
        "Relationships (:Entity)-[:REL {id, relation_type, description, weight, source_chunks}]->(:Entity). "
        "Paths: -[:REL*1..3]-."
    ),
}


class CypherParam(BaseModel):
    name: str
    value: str


class CypherDraft(BaseModel):
    """What Gemini returns for a question: one read-only Cypher query, its parameters, a one-line explanation."""

    cypher: str
    params: list[CypherParam] = []
    explanation: str = ""

    def param_dict(self) -> dict[str, Any]:
        return {p.name: p.value for p in self.params}


def draft_cypher(settings: Settings, question: str, backend: str, words: Vocabulary,
                 examples: Sequence[FewShotExample] = ()) -> CypherDraft:
    """Natural language to Cypher with Gemini: the schema and the graph's types in the prompt, parameters for
    the values. The draft is for the analyst to check and edit; it is never run unseen."""
    from retrieval.llm import gemini_json

    lines = [
        SCHEMA.get(backend, SCHEMA["kuzu"]),
        f"Entity types (most frequent first): {', '.join(words.entity_types[:30])}",
        f"Relation types (r.relation_type, most frequent first): {', '.join(words.relation_types[:40])}",
        "",
    ]
    for e in examples:
        lines += [f"Question: {e.question}", f"Cypher: {e.cypher}", ""]
    lines += [f"Question: {question}"]
    system = (
        "You write one read-only Cypher query (no CREATE, MERGE, SET, DELETE, DROP, COPY, LOAD or CALL of a "
        "procedure that writes) that answers the question on the graph described. Use only the labels, "
        "relationship types and properties given. Every value taken from the question (a name, a type) is a "
        "parameter $name, listed in `params` with its value. Give the RETURN columns clear aliases, and a LIMIT "
        "of at most 100 unless the question asks for counts."
    )
    draft = gemini_json(settings, "\n".join(lines), CypherDraft, system_instruction=system)
    if not draft.cypher.strip():
        raise ValidationError("Gemini returned an empty query")
    check_params(draft.param_dict())
    return draft


def vocabulary(kg: KG) -> Vocabulary:
    """Types by frequency, the best-connected entity and one two hops away (else next to it), and a book."""
    arrays = kg.index.arrays
    entity_types = [t for t, _ in Counter(arrays.node_types).most_common()]
    relation_types = [t for t, _ in Counter(arrays.relation_types).most_common()]
    if not arrays.node_ids:
        return Vocabulary(entity_types, relation_types, hub="", neighbour="")
    degree = np.bincount(np.concatenate([arrays.src, arrays.dst]), minlength=len(arrays.node_ids))
    hub = int(degree.argmax())
    one = set(kg.index.out_csr[hub].indices.tolist()) | set(kg.index.out_csr.T.tocsr()[hub].indices.tolist())
    two = {int(j) for i in one for j in kg.index.out_csr[i].indices} - one - {hub}
    near = sorted(two or one - {hub})
    first_chunk = next((c for chunks in arrays.node_chunks for c in chunks), None)
    rows = kg.vectors.get(CHUNKS, [first_chunk]) if first_chunk else []
    return Vocabulary(entity_types, relation_types, hub=arrays.node_names[hub],
                      neighbour=arrays.node_names[near[0]] if near else "",
                      book=str(rows[0].get("original_document") or "") if rows else "")
