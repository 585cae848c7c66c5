"""TREC-style pooling and the grading queue: every system's top-k items per query, graded blind.

A *system* is a search mode of `retrieval.search.modes` (kg, vector, graph, hybrid, comprehensive, dual, multidoc: its
result list) or a reranker `rerank:<name>` (the Inspector's facts pool, `retrieval.evaluation.inspect.candidate_pool`,
ranked by `apply_rerankers`). The pool of a query is the union of every system's top `depth` items (Spärck
Jones & van Rijsbergen 1975; Voorhees & Harman, "TREC", 2005, ch. 3), so every item any system ranks in its top
k gets judged. Items carry the ids of `retrieval.items`, the same the Search, Paths and Inspector pages show.

The queue gives an annotator the pooled items query by query, each query's items in a shuffle fixed per
annotator (SHA-1 of annotator, query id, item id), so position carries no hint of which system found an item
and two annotators do not see the same order; system names and ranks stay hidden unless `reveal=True`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import Field

from retrieval.errors import NotFoundError, RetrievalError, ValidationError
from retrieval.evaluation.labels import LabelStore, normalize_annotator
from retrieval.evaluation.querysets import QuerySet
from retrieval.graph.runtime import KG
from retrieval.models import Record, SourceMetadata, VerbalizedFact
from retrieval.rerank import CrossEncoderReranker, Reranker
from retrieval.search.verbalize import screen_text

RERANK_PREFIX = "rerank:"
RERANK_POOL_SIZE = 50  # facts retrieved (rerank none) before each reranker orders them, as eval-labels always did
MAX_DEPTH = 50  # the search tools' result limit


@dataclass
class SystemRuns:
    """system -> query text -> its top items (deduplicated, best first), and every warning, counted."""

    runs: dict[str, dict[str, list[VerbalizedFact]]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def ids(self) -> dict[str, dict[str, list[str]]]:
        """system -> query text -> item ids: the shape `retrieval.evaluation.evaluate.evaluate` scores."""
        return {s: {q: [f.id for f in facts] for q, facts in by_q.items()} for s, by_q in self.runs.items()}


def choose_rerankers(kg: KG, names: Sequence[str] | None = None) -> tuple[dict[str, Reranker], list[str]]:
    """The rerankers to run by name (None: every one this configuration has), and why any is left out.

    A cross-encoder that cannot load is left out with its one-sentence reason: as a passthrough it would only
    copy `rerank:none`.
    """
    from retrieval.rerank import build_rerankers
    from retrieval.search.retriever import kg_fact_vectors

    found = build_rerankers(kg.settings, kg.embedder, kg, kg_fact_vectors(kg))
    valid = [*found, *(["llm"] if "llm" not in found else [])]
    wanted = list(found) if names is None else list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in valid]
    if unknown:
        raise ValidationError(f"unknown reranker(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
    notes: list[str] = []
    if "llm" in wanted and "llm" not in found:
        notes.append("The LLM reranker is left out: GEMINI_API_KEY is not set.")
    ce = found.get("cross_encoder")
    if "cross_encoder" in wanted and isinstance(ce, CrossEncoderReranker) and not ce.available:
        notes.append(f"{ce.reason} It is left out of the pool and the metrics.")
        wanted.remove("cross_encoder")
    return {n: found[n] for n in wanted if n in found}, notes


def run_systems(
    kg: KG,
    queries: Sequence[str],
    depth: int,
    modes: Sequence[str],
    rerankers: dict[str, Reranker],
    progress: Callable[[int], None] | None = None,
) -> SystemRuns:
    """Run every mode and every reranker on every query; keep each system's top `depth` items.

    A system that fails on a query raises (naming both): a silently empty run would score as a bad system.
    """
    from retrieval.evaluation.inspect import apply_rerankers, candidate_pool
    from retrieval.search.modes import MODES, run_mode

    if not 1 <= depth <= MAX_DEPTH:
        raise ValidationError(f"depth must be 1-{MAX_DEPTH}, got {depth}")
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValidationError(f"unknown mode(s) {', '.join(unknown)}; valid: {', '.join(MODES)}")
    systems = [*modes, *(RERANK_PREFIX + r for r in rerankers)]
    out = SystemRuns({s: {} for s in systems})
    seen: Counter[str] = Counter()
    for n, query in enumerate(queries, start=1):
        for mode in modes:
            try:
                # the no-match gate off, as passage ranking has it: a pool judges what each mode ranks, however weak
                result = run_mode(kg, mode, query, limit=depth, settings=kg.settings, no_match=False)
            except RetrievalError as exc:
                raise RetrievalError(f"mode {mode} failed on query {query[:80]!r}: {exc}") from exc
            out.runs[mode][query] = _top(result.facts, depth)
            seen.update(f"{mode}: {w}" for w in result.warnings)
        if rerankers:
            pool = candidate_pool(kg, query, "facts", RERANK_POOL_SIZE)
            seen.update(f"rerank pool: {w}" for w in pool.warnings)
            inspection = apply_rerankers(query, pool.candidates, rerankers)
            by_id = {c.id: c for c in inspection.candidates}
            for name, order in inspection.orders.items():
                out.runs[RERANK_PREFIX + name][query] = _top([by_id[i] for i in order], depth)
            seen.update(f"{RERANK_PREFIX}{name}: {w}" for name, ws in inspection.warnings.items() for w in ws)
        if progress is not None:
            progress(n)
    out.warnings = [f"{w} (x{c})" if c > 1 else w for w, c in seen.items()]
    return out


def _top(facts: Sequence[VerbalizedFact], depth: int) -> list[VerbalizedFact]:
    unique = {f.id: f for f in reversed(facts)}  # first occurrence wins
    return [unique[i] for i in dict.fromkeys(f.id for f in facts)][:depth]


# --- pools in the label database --------------------------------------------------------------


class PoolItem(Record):
    """A pooled item of one query: what the annotator sees, and (hidden by default) who found it at which rank."""

    query_id: str
    query: str
    item_id: str
    kind: str  # VerbalizedFact.type: local | global | document | entity
    text: str
    sources: tuple[SourceMetadata, ...] = ()
    ranks: dict[str, int] = Field(default_factory=dict)  # system -> 1-based rank


class PoolInfo(Record):
    """One stored pool: a query set on a graph version at a depth, built from these systems."""

    set_name: str
    graph_version: str
    depth: int
    systems: tuple[str, ...]
    queries: int = 0
    items: int = 0
    warnings: tuple[str, ...] = ()
    created_at: str = ""


def pool_items(query_set: QuerySet, runs: SystemRuns) -> list[PoolItem]:
    """The union of every system's run per query, in set order then first-seen order."""
    out: list[PoolItem] = []
    for q in query_set.queries:
        found: dict[str, tuple[VerbalizedFact, dict[str, int]]] = {}
        for system, by_query in runs.runs.items():
            for rank, fact in enumerate(by_query.get(q.text, []), start=1):
                found.setdefault(fact.id, (fact, {}))[1][system] = rank
        out += [PoolItem(query_id=q.query_id, query=q.text, item_id=i, kind=f.type, text=screen_text(f),
                         sources=f.sources, ranks=ranks) for i, (f, ranks) in found.items()]
    return out


def build_pool(
    store: LabelStore,
    kg: KG,
    query_set: QuerySet,
    depth: int = 10,
    modes: Sequence[str] | None = None,
    rerankers: Sequence[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> PoolInfo:
    """Pool a query set on the graph's current version and store it (replacing that set's pool on this version,
    in one transaction; labels are untouched). modes/rerankers: None for all."""
    from retrieval.search.modes import MODES

    chosen, notes = choose_rerankers(kg, rerankers)
    runs = run_systems(kg, [q.text for q in query_set.queries], depth, list(MODES if modes is None else modes),
                       chosen, progress)
    items = pool_items(query_set, runs)
    info = PoolInfo(set_name=query_set.name, graph_version=kg.version, depth=depth, systems=tuple(runs.runs),
                    queries=len(query_set.queries), items=len(items), warnings=(*notes, *runs.warnings),
                    created_at=datetime.now(UTC).isoformat(timespec="seconds"))

    def save(conn: sqlite3.Connection) -> None:
        key = (info.set_name, info.graph_version)
        conn.execute("DELETE FROM pool_items WHERE set_name = ? AND graph_version = ?", key)
        conn.execute("DELETE FROM pools WHERE set_name = ? AND graph_version = ?", key)
        conn.execute("INSERT INTO pools (set_name, graph_version, depth, systems, warnings, created_at) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     (*key, depth, json.dumps(info.systems), json.dumps(info.warnings), info.created_at))
        conn.executemany(
            "INSERT INTO pool_items (set_name, graph_version, query_id, item_id, position, kind, text, sources, "
            "ranks) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*key, it.query_id, it.item_id, n, it.kind, it.text,
              json.dumps([s.model_dump() for s in it.sources]), json.dumps(it.ranks)) for n, it in enumerate(items)],
        )

    store.write(save)
    return info


def pool_info(store: LabelStore, set_name: str, graph_version: str | None = None) -> PoolInfo:
    """The set's pool on `graph_version`, or its most recently built one."""
    sql = ("SELECT p.set_name, p.graph_version, p.depth, p.systems, p.warnings, p.created_at, "
           "(SELECT COUNT(DISTINCT query_id) FROM pool_items i WHERE i.set_name = p.set_name "
           "AND i.graph_version = p.graph_version), "
           "(SELECT COUNT(*) FROM pool_items i WHERE i.set_name = p.set_name AND i.graph_version = p.graph_version) "
           "FROM pools p WHERE p.set_name = ?")
    params: list[object] = [set_name]
    if graph_version is not None:
        sql, params = sql + " AND p.graph_version = ?", [*params, graph_version]
    rows = store.rows(sql + " ORDER BY p.created_at DESC LIMIT 1", params)
    if not rows:
        on = f" on graph version {graph_version}" if graph_version else ""
        raise NotFoundError(f"query set {set_name!r} has no pool{on}: run `labels pool --set {set_name}` first")
    name, version, depth, systems, warnings, created, n_queries, n_items = rows[0]
    return PoolInfo(set_name=name, graph_version=version, depth=depth, systems=tuple(json.loads(systems)),
                    queries=n_queries, items=n_items, warnings=tuple(json.loads(warnings)), created_at=created)


def stored_pool(store: LabelStore, set_name: str, graph_version: str | None = None) -> tuple[PoolInfo, list[PoolItem]]:
    """A stored pool and its items (in set order, then as pooled)."""
    info = pool_info(store, set_name, graph_version)
    rows = store.rows(
        "SELECT i.query_id, q.query_text, i.item_id, i.kind, i.text, i.sources, i.ranks FROM pool_items i "
        "JOIN queries q ON q.set_name = i.set_name AND q.query_id = i.query_id "
        "WHERE i.set_name = ? AND i.graph_version = ? ORDER BY q.position, i.position",
        (info.set_name, info.graph_version),
    )
    items = [PoolItem(query_id=qid, query=query, item_id=item, kind=kind, text=text,
                      sources=tuple(SourceMetadata(**s) for s in json.loads(sources)), ranks=json.loads(ranks))
             for qid, query, item, kind, text, sources, ranks in rows]
    return info, items


# --- the grading queue ------------------------------------------------------------------------


class QueueItem(Record):
    """One item to grade: the query, the item as shown, this annotator's grade so far (None: not yet), and
    the systems that found it with their ranks (None while blinded)."""

    set_name: str
    graph_version: str
    query_id: str
    query: str
    item_id: str
    kind: str
    text: str
    sources: tuple[SourceMetadata, ...] = ()
    position: int  # 0-based place in this annotator's queue for the set
    grade: int | None = None
    note: str = ""
    systems: dict[str, int] | None = None


class QueryProgress(Record):
    query_id: str
    query: str
    pooled: int
    labeled: int


class Progress(Record):
    """Labeled / pooled per query and overall, for one annotator on one pool."""

    set_name: str
    graph_version: str
    annotator: str
    queries: tuple[QueryProgress, ...] = ()
    pooled: int = 0
    labeled: int = 0

    @property
    def done(self) -> bool:
        return self.labeled >= self.pooled


def shuffle_key(annotator: str, query_id: str, item_id: str) -> str:
    """The fixed per-annotator order of a query's items (SHA-1 of the three, so no system order shows)."""
    return hashlib.sha1("\x1f".join((annotator, query_id, item_id)).encode("utf-8", "surrogatepass")).hexdigest()


def queue(
    store: LabelStore,
    set_name: str,
    annotator: str,
    *,
    graph_version: str | None = None,
    query_id: str | None = None,
    reveal: bool = False,
) -> list[QueueItem]:
    """The annotator's whole queue for a set's pool (latest pool unless `graph_version`): queries in set order,
    each query's items in the annotator's fixed shuffle, with their grades so far; one query with `query_id`."""
    who = normalize_annotator(annotator)
    info, items = stored_pool(store, set_name, graph_version)
    graded = {
        (str(q), str(i)): (int(g), str(n))
        for q, i, g, n in store.rows(
            "SELECT query_text, item_id, grade, note FROM labels WHERE graph_version = ? AND annotator = ? "
            "AND query_text IN (SELECT query_text FROM queries WHERE set_name = ?)",
            (info.graph_version, who, info.set_name),
        )
    }
    order = {q: n for n, q in enumerate(dict.fromkeys(it.query_id for it in items))}
    items.sort(key=lambda it: (order[it.query_id], shuffle_key(who, it.query_id, it.item_id)))
    out = []
    for position, it in enumerate(items):
        if query_id is not None and it.query_id != query_id:
            continue
        grade, note = graded.get((it.query, it.item_id), (None, ""))
        out.append(QueueItem(set_name=info.set_name, graph_version=info.graph_version, query_id=it.query_id,
                             query=it.query, item_id=it.item_id, kind=it.kind, text=it.text, sources=it.sources,
                             position=position, grade=grade, note=note, systems=dict(it.ranks) if reveal else None))
    return out


def next_item(
    store: LabelStore, set_name: str, annotator: str, *, graph_version: str | None = None, reveal: bool = False
) -> QueueItem | None:
    """Where the annotator resumes: the first item of their queue they have not graded (None: all graded)."""
    return next((it for it in queue(store, set_name, annotator, graph_version=graph_version, reveal=reveal)
                 if it.grade is None), None)


def progress(store: LabelStore, set_name: str, annotator: str, *, graph_version: str | None = None) -> Progress:
    """Labeled / pooled per query and overall for the annotator."""
    info = pool_info(store, set_name, graph_version)
    items = queue(store, set_name, annotator, graph_version=info.graph_version)
    per: dict[str, list[QueueItem]] = {}
    for it in items:
        per.setdefault(it.query_id, []).append(it)
    rows = tuple(QueryProgress(query_id=q, query=its[0].query, pooled=len(its),
                               labeled=sum(it.grade is not None for it in its)) for q, its in per.items())
    return Progress(set_name=info.set_name, graph_version=info.graph_version, annotator=normalize_annotator(annotator),
                    queries=rows, pooled=len(items), labeled=sum(r.labeled for r in rows))
