"""Tenant-scoped graph memory (seed 003): stored graphs as JSON files, searched through a per-namespace index.

Layout::

    ROOT/<tenant>/<namespace>/graphs/<graph_id>.json   one stored graph (written atomically)
    ROOT/<tenant>/<namespace>/index.json               summaries + search terms of every graph
    ROOT/<tenant>/<namespace>/.lock                    flock held while the index is rewritten

Tenant, namespace and graph ids must match `ID_PATTERN`, so no id can name a path outside ROOT.
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, generate_latest
from pydantic import ValidationError as PydanticValidationError

from retrieval.access.gate import Gate
from retrieval.errors import AccessDenied, NotFoundError, ValidationError
from retrieval.graph.catalog import write_json_atomic
from retrieval.graph.index import build_index
from retrieval.graph.traverse import Direction, bfs
from retrieval.models import (
    Entity,
    MemoryGraphSummary,
    MemoryResult,
    Relation,
    StoredGraph,
)
from retrieval.stores.base import EdgeArrays

if TYPE_CHECKING:
    from retrieval.config import Settings

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
INDEX_FORMAT = "kg-lens-memory-index/1"
MAX_NODES = 50_000
MAX_EDGES = 200_000
MAX_TERMS = 200  # keywords, and node-name terms kept in the index per graph
MAX_TAGS = 50
MAX_BYTES = 32 * 1024 * 1024
_NODE_KEYS = {"id", "name", "type", "description", "properties", "aliases", "source_chunks"}
_EDGE_ALIASES = {"source": "source_id", "target": "target_id", "relation": "relation_type", "type": "relation_type"}
_EDGE_KEYS = set(Relation.model_fields)
_WORD = re.compile(r"\w+")
_OUTCOMES = ("ok", "invalid", "not_found", "corrupt", "io", "forbidden")


def check_id(kind: str, value: object) -> str:
    """A tenant / namespace / graph id: 1-64 ASCII letters, digits, '_' or '-', starting alphanumeric."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        shown = repr(value)[:80]
        raise ValidationError(
            f"invalid {kind} {shown}: use 1-64 letters, digits, '_' or '-', starting with a letter or digit"
        )
    return value


def terms(text: str) -> set[str]:
    """Lower-cased word tokens: what keyword overlap compares."""
    return set(_WORD.findall(text.lower()))


def list_tenants(root: Path) -> list[str]:
    """Tenants that have a memory directory under `root`."""
    return _subdirs(Path(root))


def list_namespaces(root: Path, tenant: str) -> list[str]:
    """Namespaces of one tenant."""
    return _subdirs(Path(root) / check_id("tenant", tenant))


def _subdirs(base: Path) -> list[str]:
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir() and ID_PATTERN.fullmatch(p.name))


class _Fail(Exception):
    """Internal: carries a fail result out of nested helpers."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _fail(exc: _Fail) -> MemoryResult:
    return MemoryResult(ok=False, error=str(exc), error_kind=exc.kind)  # type: ignore[arg-type]


class _GraphDetails:
    """Entity/relation lookup over one stored graph, for `traverse.bfs`."""

    def __init__(self, graph: StoredGraph) -> None:
        self._nodes = {n.id: n for n in graph.nodes}
        self._edges = {e.id: e for e in graph.edges}

    def get_entities(self, ids: Sequence[str]) -> list[Entity]:
        return [self._nodes[i] for i in ids if i in self._nodes]

    def get_relations(self, ids: Sequence[str]) -> list[Relation]:
        return [self._edges[i] for i in ids if i in self._edges]


def _node(raw: Entity | Mapping[str, Any], i: int) -> Entity:
    if isinstance(raw, Entity):
        return raw
    if not isinstance(raw, Mapping):
        raise _Fail("invalid", f"node {i}: expected an object, got {type(raw).__name__}")
    data = {k: v for k, v in raw.items() if k in _NODE_KEYS}
    extra = {k: v for k, v in raw.items() if k not in _NODE_KEYS and k != "label"}
    data.setdefault("name", raw.get("label") or raw.get("id"))
    props = data.get("properties") or {}
    if not isinstance(props, Mapping):
        raise _Fail("invalid", f"node {i}: properties must be an object")
    data["properties"] = {**props, **extra}
    try:
        return Entity.model_validate(data)
    except PydanticValidationError as exc:
        raise _Fail("invalid", f"node {i}: {_first_error(exc)}") from exc


def _edge(raw: Relation | Mapping[str, Any], i: int) -> Relation:
    if isinstance(raw, Relation):
        return raw
    if not isinstance(raw, Mapping):
        raise _Fail("invalid", f"edge {i}: expected an object, got {type(raw).__name__}")
    data = {_EDGE_ALIASES.get(k, k): v for k, v in raw.items()}
    unknown = sorted(set(data) - _EDGE_KEYS)
    if unknown:
        raise _Fail("invalid", f"edge {i}: unknown keys {unknown}")
    data.setdefault("id", f"e{i}")
    data.setdefault("relation_type", "related_to")
    try:
        return Relation.model_validate(data)
    except PydanticValidationError as exc:
        raise _Fail("invalid", f"edge {i}: {_first_error(exc)}") from exc


def _first_error(exc: PydanticValidationError) -> str:
    first = exc.errors()[0]
    return f"{'.'.join(str(p) for p in first['loc']) or 'value'}: {first['msg']}"


def _words(values: Sequence[str] | None, kind: str, limit: int) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    out = []
    for v in values:
        if not isinstance(v, str) or not v.strip() or len(v) > 200:
            raise _Fail("invalid", f"each {kind} must be a non-empty string of at most 200 characters")
        out.append(v.strip().lower())
    out = list(dict.fromkeys(out))
    if len(out) > limit:
        raise _Fail("invalid", f"at most {limit} {kind}s, got {len(out)}")
    return tuple(out)


class GraphMemory:
    """Graph memory rooted at a directory; owns its Prometheus registry (state: root + counters). With a `gate`
    (`as_user`), every operation is authorised for its identity first: read, write or delete on the tenant."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.gate: Gate | None = None
        self.registry = CollectorRegistry()
        labels = ("tenant", "namespace", "outcome")
        self._searches = Counter("graph_memory_searches_total", "Graph memory searches", labels, registry=self.registry)
        self._retrievals = Counter(
            "graph_memory_retrievals_total", "Graph memory graph retrievals", labels, registry=self.registry
        )
        self._traversals = Counter(
            "graph_memory_traversals_total", "Graph memory traversals", labels, registry=self.registry
        )

    def as_user(self, gate: Gate) -> GraphMemory:
        """This memory (the same files and counters) with every operation authorised for `gate`'s identity."""
        view = copy.copy(self)
        view.gate = gate
        return view

    def tenants(self, action: str = "memory_read") -> list[str]:
        """The tenants on disk, `default` and those granted by name, that this user may `action` (sorted)."""
        names = {*list_tenants(self.root), "default"}
        if self.gate is not None:
            names |= {t for t in self.gate.identity.tenants if ID_PATTERN.fullmatch(t)}
        return sorted(t for t in names if self.gate is None or self.gate.allows(action, tenant=t))

    # --- operations (seed 003) ----------------------------------------------------------------

    def store_graph(
        self,
        tenant: str,
        namespace: str,
        nodes: Sequence[Entity | Mapping[str, Any]],
        edges: Sequence[Relation | Mapping[str, Any]],
        keywords: Sequence[str] | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryResult:
        """Validate and write a graph as JSON, then add it to the namespace index; returns its graph_id."""
        try:
            self._allow("memory_write", tenant)
            ns = self._ns_dir(tenant, namespace)
            graph = self._build(tenant, namespace, nodes, edges, keywords, tags, metadata)
            path = ns / "graphs" / f"{graph.graph_id}.json"
            payload = graph.model_dump(mode="json")
            self._write(path, payload)
            with self._locked(ns):
                index = self._read_index(ns, locked=True)
                index[graph.graph_id] = _index_entry(graph)
                self._write(ns / "index.json", {"format": INDEX_FORMAT, "graphs": index})
        except _Fail as exc:
            return _fail(exc)
        if self.gate is not None:
            self.gate.record("memory_write", tenant=tenant, detail=f"{namespace}/{graph.graph_id}")
        return MemoryResult(ok=True, graph_id=graph.graph_id, graphs=(_summary(index[graph.graph_id]),))

    def search_graphs(
        self,
        tenant: str,
        query: str = "",
        namespace: str | None = None,
        tags: Sequence[str] | None = None,
        limit: int = 10,
    ) -> MemoryResult:
        """Graphs whose keywords overlap the query (node names count half), having every tag; best first.

        score = (|q ∩ keywords| + 0.5 |q ∩ node-name terms \\ keywords|) / |q|. An empty query lists the
        tag matches, newest first. `namespace=None` searches all of the tenant's namespaces.
        """
        try:
            self._allow("memory_read", tenant)
            self._check("tenant", tenant)
            if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
                raise _Fail("invalid", f"limit must be an integer from 1 to 100, got {limit!r}")
            if not isinstance(query, str) or len(query) > 10_000:
                raise _Fail("invalid", "query must be a string of at most 10000 characters")
            wanted = set(_words(tags, "tag", MAX_TAGS))
            namespaces = [namespace] if namespace is not None else list_namespaces(self.root, tenant)
            q = terms(query)
            hits: list[MemoryGraphSummary] = []
            for ns_name in namespaces:
                index = self._read_index(self._ns_dir(tenant, ns_name))
                for entry in index.values():
                    if not wanted <= set(entry["tags"]):
                        continue
                    score = 0.0
                    if q:
                        kw = {t for k in entry["keywords"] for t in terms(k)}
                        names = set(entry.get("name_terms", ())) - kw
                        score = (len(q & kw) + 0.5 * len(q & names)) / len(q)
                        if score <= 0:
                            continue
                    hits.append(_summary(entry).model_copy(update={"score": round(score, 6)}))
        except _Fail as exc:
            self._count(self._searches, tenant, "*" if namespace is None else namespace, exc.kind)
            return _fail(exc)
        hits.sort(key=lambda h: (-h.score, _neg_time(h.created_at), h.graph_id))
        self._count(self._searches, tenant, "*" if namespace is None else namespace, "ok")
        return MemoryResult(ok=True, graphs=tuple(hits[:limit]))

    def get_graph(self, tenant: str, graph_id: str, namespace: str = "default") -> MemoryResult:
        """The stored graph, or a fail result (unknown id, invalid id, corrupt file naming the file)."""
        try:
            self._allow("memory_read", tenant)
            graph = self._load(tenant, namespace, graph_id)
        except _Fail as exc:
            self._count(self._retrievals, tenant, namespace, exc.kind)
            return _fail(exc)
        self._count(self._retrievals, tenant, namespace, "ok")
        return MemoryResult(ok=True, graph_id=graph_id, graph=graph)

    def traverse_graph(
        self,
        tenant: str,
        graph_id: str,
        start_node: str,
        max_depth: int = 2,
        relation_filter: Sequence[str] | None = None,
        namespace: str = "default",
        direction: Direction = "out",
    ) -> MemoryResult:
        """BFS in a stored graph from `start_node` within `max_depth`, following only `relation_filter` types."""
        try:
            self._allow("memory_read", tenant)
            graph = self._load(tenant, namespace, graph_id)
            index = build_index(_edge_arrays(graph))
            traversal = bfs(
                index,
                start_node,
                max_depth,
                relation_types=relation_filter,
                direction=direction,
                node_budget=min(max(len(graph.nodes), 1), 10_000),
                max_edges=min(max(len(graph.edges), 1), 100_000),
                details=_GraphDetails(graph),
            )
        except _Fail as exc:
            self._count(self._traversals, tenant, namespace, exc.kind)
            return _fail(exc)
        except ValidationError as exc:
            self._count(self._traversals, tenant, namespace, "invalid")
            return MemoryResult(ok=False, error=str(exc), error_kind="invalid")
        except NotFoundError:
            self._count(self._traversals, tenant, namespace, "not_found")
            return MemoryResult(
                ok=False, error=f"no node {start_node!r} in graph {graph_id!r}", error_kind="not_found"
            )
        self._count(self._traversals, tenant, namespace, "ok")
        return MemoryResult(ok=True, graph_id=graph_id, traversal=traversal)

    def list_graphs(self, tenant: str, namespace: str = "default") -> MemoryResult:
        """Summaries of every graph in one namespace, newest first (read from the index)."""
        try:
            self._allow("memory_read", tenant)
            index = self._read_index(self._ns_dir(tenant, namespace))
        except _Fail as exc:
            return _fail(exc)
        graphs = sorted((_summary(e) for e in index.values()), key=lambda h: (_neg_time(h.created_at), h.graph_id))
        return MemoryResult(ok=True, graphs=tuple(graphs))

    def delete_graph(self, tenant: str, graph_id: str, namespace: str = "default") -> MemoryResult:
        """Remove a graph from the index, then its file."""
        try:
            self._allow("memory_delete", tenant)
            ns = self._ns_dir(tenant, namespace)
            self._check("graph id", graph_id)
            with self._locked(ns):
                index = self._read_index(ns, locked=True)
                if graph_id not in index:
                    raise _Fail("not_found", f"no graph {graph_id!r} in namespace {namespace!r}")
                del index[graph_id]
                self._write(ns / "index.json", {"format": INDEX_FORMAT, "graphs": index})
                try:
                    (ns / "graphs" / f"{graph_id}.json").unlink(missing_ok=True)
                except OSError as exc:
                    raise _Fail("io", f"cannot delete graph file: {exc.strerror}") from exc
        except _Fail as exc:
            return _fail(exc)
        if self.gate is not None:
            self.gate.record("memory_delete", tenant=tenant, detail=f"{namespace}/{graph_id}")
        return MemoryResult(ok=True, graph_id=graph_id)

    def metrics(self) -> dict[str, float]:
        """Counter values keyed `name{label="value",...}` (a snapshot for a page or a test)."""
        out: dict[str, float] = {}
        for family in self.registry.collect():
            for s in family.samples:
                if s.name.endswith("_total"):
                    labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                    out[f"{s.name}{{{labels}}}"] = s.value
        return out

    def metrics_text(self) -> str:
        """The Prometheus text exposition of this store's counters."""
        return generate_latest(self.registry).decode("utf-8")

    # --- helpers --------------------------------------------------------------------------------

    def _allow(self, action: str, tenant: object) -> None:
        """The gate's check (which records a refusal in the audit log) as a `forbidden` failure."""
        if self.gate is None:
            return
        try:
            self.gate.check(action, tenant=str(tenant))
        except AccessDenied as exc:
            raise _Fail("forbidden", str(exc)) from exc

    @staticmethod
    def _check(kind: str, value: object) -> str:
        try:
            return check_id(kind, value)
        except ValidationError as exc:
            raise _Fail("invalid", str(exc)) from exc

    def _ns_dir(self, tenant: str, namespace: str) -> Path:
        path = self.root / self._check("tenant", tenant) / self._check("namespace", namespace)
        # The pattern already excludes separators; this guards against a symlink planted inside ROOT.
        if path.exists() and not path.resolve().is_relative_to(self.root):
            raise _Fail("invalid", f"namespace directory {path} resolves outside the memory root")
        return path

    @staticmethod
    def _count(counter: Counter, tenant: object, namespace: object, outcome: str) -> None:
        # Invalid ids never become label values: they are user input of unbounded variety.
        def label(v: object) -> str:
            return v if isinstance(v, str) and (v == "*" or ID_PATTERN.fullmatch(v)) else "<invalid>"

        counter.labels(label(tenant), label(namespace), outcome).inc()

    @contextmanager
    def _locked(self, ns: Path) -> Iterator[None]:
        try:
            ns.mkdir(parents=True, exist_ok=True)
            fh = open(ns / ".lock", "a+b")  # noqa: SIM115 - held for the whole block
        except OSError as exc:
            raise _Fail("io", f"cannot lock {ns}: {exc.strerror}") from exc
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            yield
        finally:
            fh.close()  # closing releases the flock

    def _write(self, path: Path, obj: Any) -> None:
        try:
            write_json_atomic(path, obj)
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)  # make the rename itself durable
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise _Fail("io", f"cannot write {path}: {exc.strerror or exc}") from exc

    def _read_index(self, ns: Path, locked: bool = False) -> dict[str, dict[str, Any]]:
        """The namespace index; a missing one is rebuilt from the graph files (one scan, under the lock)."""
        path = ns / "index.json"
        if not path.exists():
            graphs_dir = ns / "graphs"
            if not (graphs_dir.is_dir() and any(graphs_dir.glob("[!.]*.json"))):
                return {}
            if locked:  # the caller holds the lock and writes the index next
                return _scan(ns)
            with self._locked(ns):
                if path.exists():
                    return self._read_index(ns, locked=True)
                scanned = _scan(ns)
                self._write(path, {"format": INDEX_FORMAT, "graphs": scanned})
                return scanned
        data = _read_json(path)
        if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT or not isinstance(data.get("graphs"), dict):
            raise _Fail("corrupt", f"corrupt index file {path}: not a {INDEX_FORMAT} index; delete it to rebuild")
        index: dict[str, dict[str, Any]] = data["graphs"]
        for gid, entry in index.items():
            try:
                _summary(entry)
            except (PydanticValidationError, KeyError, TypeError) as exc:
                raise _Fail("corrupt", f"corrupt index file {path}: bad entry {gid!r}; delete it to rebuild") from exc
        return index

    def _load(self, tenant: str, namespace: str, graph_id: str) -> StoredGraph:
        ns = self._ns_dir(tenant, namespace)
        self._check("graph id", graph_id)
        path = ns / "graphs" / f"{graph_id}.json"
        if not path.is_file():
            raise _Fail("not_found", f"no graph {graph_id!r} in namespace {namespace!r}")
        graph = _parse_graph(path)
        if (graph.graph_id, graph.tenant, graph.namespace) != (graph_id, tenant, namespace):
            raise _Fail("corrupt", f"graph file {path} does not belong to {tenant}/{namespace}/{graph_id}")
        return graph

    def _build(
        self,
        tenant: str,
        namespace: str,
        nodes: Sequence[Entity | Mapping[str, Any]],
        edges: Sequence[Relation | Mapping[str, Any]],
        keywords: Sequence[str] | None,
        tags: Sequence[str] | None,
        metadata: Mapping[str, Any] | None,
    ) -> StoredGraph:
        if isinstance(nodes, str | bytes | Mapping) or isinstance(edges, str | bytes | Mapping):
            raise _Fail("invalid", "nodes and edges must be lists")
        if not nodes:
            raise _Fail("invalid", "a stored graph needs at least one node")
        if len(nodes) > MAX_NODES or len(edges) > MAX_EDGES:
            raise _Fail("invalid", f"at most {MAX_NODES} nodes and {MAX_EDGES} edges per graph")
        node_list = [_node(n, i) for i, n in enumerate(nodes)]
        edge_list = [_edge(e, i) for i, e in enumerate(edges)]
        ids = [n.id for n in node_list]
        if len(set(ids)) != len(ids):
            raise _Fail("invalid", "node ids must be unique")
        if len({e.id for e in edge_list}) != len(edge_list):
            raise _Fail("invalid", "edge ids must be unique")
        known = set(ids)
        for i, e in enumerate(edge_list):
            if e.source_id not in known or e.target_id not in known:
                raise _Fail("invalid", f"edge {i} ({e.id!r}) connects a node that is not in the graph")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise _Fail("invalid", "metadata must be an object")
        graph = StoredGraph(
            graph_id=uuid.uuid4().hex,
            tenant=tenant,
            namespace=namespace,
            nodes=tuple(node_list),
            edges=tuple(edge_list),
            keywords=_words(keywords, "keyword", MAX_TERMS),
            tags=_words(tags, "tag", MAX_TAGS),
            metadata=dict(metadata or {}),
            created_at=datetime.now(UTC).isoformat(timespec="microseconds"),
        )
        try:
            size = len(json.dumps(graph.model_dump(mode="json"), ensure_ascii=False).encode("utf-8"))
        except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as exc:
            raise _Fail("invalid", f"graph is not storable as UTF-8 JSON: {type(exc).__name__}: {exc}"[:300]) from exc
        if size > MAX_BYTES:
            raise _Fail("invalid", f"graph is {size} bytes; the limit is {MAX_BYTES}")
        return graph


def _read_json(path: Path) -> Any:
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read())
    except OSError as exc:
        raise _Fail("io", f"cannot read {path}: {exc.strerror}") from exc
    except (ValueError, RecursionError) as exc:  # JSONDecodeError / bad UTF-8 are ValueErrors
        raise _Fail("corrupt", f"corrupt JSON file {path}: {exc}"[:500]) from exc


def _scan(ns: Path) -> dict[str, dict[str, Any]]:
    """Index entries of every graph file in a namespace (only when its index is missing)."""
    index: dict[str, dict[str, Any]] = {}
    for path in sorted((ns / "graphs").glob("[!.]*.json")):  # never a writer's temp file
        graph = _parse_graph(path)
        index[graph.graph_id] = _index_entry(graph)
    return index


def _parse_graph(path: Path) -> StoredGraph:
    try:
        return StoredGraph.model_validate(_read_json(path))
    except PydanticValidationError as exc:
        raise _Fail("corrupt", f"corrupt graph file {path}: {_first_error(exc)}") from exc


def _index_entry(graph: StoredGraph) -> dict[str, Any]:
    names: set[str] = set()
    for n in graph.nodes:
        names |= terms(n.name)
        if len(names) >= MAX_TERMS:
            break
    title = graph.metadata.get("title")
    return {
        "graph_id": graph.graph_id,
        "tenant": graph.tenant,
        "namespace": graph.namespace,
        "title": title if isinstance(title, str) else "",
        "keywords": list(graph.keywords),
        "tags": list(graph.tags),
        "node_count": len(graph.nodes),
        "edge_count": len(graph.edges),
        "created_at": graph.created_at,
        "name_terms": sorted(names)[:MAX_TERMS],
    }


def _summary(entry: Mapping[str, Any]) -> MemoryGraphSummary:
    return MemoryGraphSummary.model_validate({k: v for k, v in entry.items() if k != "name_terms"})


def _neg_time(created_at: str) -> float:
    try:
        return -datetime.fromisoformat(created_at).timestamp()
    except ValueError:
        return 0.0


def _edge_arrays(graph: StoredGraph) -> EdgeArrays:
    pos = {n.id: i for i, n in enumerate(graph.nodes)}
    return EdgeArrays(
        node_ids=[n.id for n in graph.nodes],
        node_names=[n.name for n in graph.nodes],
        node_types=[n.type for n in graph.nodes],
        node_chunks=[tuple(n.source_chunks) for n in graph.nodes],
        src=np.array([pos[e.source_id] for e in graph.edges], dtype=np.int64),
        dst=np.array([pos[e.target_id] for e in graph.edges], dtype=np.int64),
        weight=np.array([e.weight for e in graph.edges], dtype=np.float64),
        relation_ids=[e.id for e in graph.edges],
        relation_types=[e.relation_type for e in graph.edges],
    )


def open_memory(settings: Settings) -> GraphMemory:
    """The graph memory of a data directory: DATA_DIR/memory."""
    return GraphMemory(Path(settings.data_dir) / "memory")
