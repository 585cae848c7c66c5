"""Build a graph version from GraphData: stores, vectors and BM25 in a new directory, swapped in on success."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from retrieval.config import Settings
from retrieval.embedding import Embedder, load_embedder
from retrieval.errors import IngestError, RetrievalError, StoreError
from retrieval.graph import bm25, catalog
from retrieval.graph.communities import Extras, chapter_names, compute_communities, load_extras, save_extras
from retrieval.ingest import IngestOptions, ProgressFn, reader
from retrieval.ingest.bundle import MAX_ID_LEN, check_text, id_too_long
from retrieval.models import Chunk, Entity, GraphData, GraphStats, Relation
from retrieval.stores.base import (
    CHUNKS,
    ENTITIES,
    RELATIONS,
    GraphStore,
    StoreLocation,
    VectorStore,
    graph_backend,
    open_graph_store,
    open_vector_store,
)

# Bump when the way GraphData becomes stores changes, so an unchanged input is rebuilt once.
BUILD_SCHEMA = 2  # 2: the extras.json sidecar (communities, claims, chapter names)
EMBED_BATCH = 1024  # texts per embedder call (one progress step)
INSERT_ROWS = 50_000  # rows per vector insert: bounded memory, few flushes
KEEP_PREVIOUS = 1  # versions kept besides the live one, for readers that still have them open
_BUILD_INFO = "build.json"


@dataclass(frozen=True)
class IngestReport:
    """What an ingest did: the live version, whether it was already there, counts, timings, warnings."""

    handle: catalog.GraphHandle
    unchanged: bool
    counts: dict[str, int]
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.handle.name

    @property
    def version(self) -> str:
        return self.handle.version

    def summary(self) -> str:
        c = self.counts
        what = "unchanged" if self.unchanged else "built"
        return (
            f"{what} graph {self.name!r} version {self.version}: {c.get('books', 0)} books, "
            f"{c.get('chapters', 0)} chapters, {c.get('chunks', 0)} chunks, {c.get('entities', 0)} entities, "
            f"{c.get('relations', 0)} relations in {sum(self.seconds.values()):.1f} s"
        )


# --- validation and identity --------------------------------------------------------------------


def data_counts(data: GraphData) -> dict[str, int]:
    """Books, chapters (distinct non-empty (book, chapter)), chunks, entities, relations (the build adds
    communities once it has them)."""
    return {
        "books": len({c.original_document for c in data.chunks if c.original_document}),
        "chapters": len({(c.original_document, c.chapter) for c in data.chunks if c.chapter}),
        "chunks": len(data.chunks),
        "entities": len(data.entities),
        "relations": len(data.relations),
    }


def check_graph(data: GraphData) -> None:
    """Unique ids, resolvable references and storable strings, whatever produced `data`."""
    where = "<graph data>"
    groups: tuple[tuple[str, Sequence[Chunk | Entity | Relation]], ...] = (
        ("chunks", data.chunks), ("entities", data.entities), ("relations", data.relations)
    )
    for kind, items in groups:
        seen: set[str] = set()
        for i, item in enumerate(items):
            if not item.id or id_too_long(item.id):
                raise IngestError(where, 0, f"{kind}[{i}].id", f"must be 1 to {MAX_ID_LEN} bytes of UTF-8")
            if item.id in seen:
                raise IngestError(where, 0, f"{kind}[{i}].id", f"duplicate id {item.id!r}")
            seen.add(item.id)
            for name, value in item:
                if isinstance(value, str):
                    check_text(value, where, 0, f"{kind}[{i}].{name}")
                elif isinstance(value, tuple):
                    for j, text in enumerate(value):
                        check_text(text, where, 0, f"{kind}[{i}].{name}[{j}]")
    for i, e in enumerate(data.entities):
        check_text(entity_text(e), where, 0, f"entities[{i}].name + description")  # one Entities payload string
    chunk_ids = {c.id for c in data.chunks}
    entity_ids = {e.id for e in data.entities}
    for i, rel in enumerate(data.relations):
        for name, ref in (("source_id", rel.source_id), ("target_id", rel.target_id)):
            if ref not in entity_ids:
                raise IngestError(where, 0, f"relations[{i}].{name}", f"unknown entity id {ref!r}")
    referring: tuple[tuple[str, Sequence[Entity | Relation]], ...] = (
        ("entities", data.entities), ("relations", data.relations)
    )
    for kind, linked in referring:
        for i, node in enumerate(linked):
            for j, ref in enumerate(node.source_chunks):
                if ref not in chunk_ids:
                    raise IngestError(where, 0, f"{kind}[{i}].source_chunks[{j}]", f"unknown chunk id {ref!r}")


def content_hash(data: GraphData, settings: Settings, embed_model: str) -> str:
    """sha256 of a canonical serialisation of the data plus the back ends and the embedding model."""
    h = hashlib.sha256()
    head = {
        "schema": BUILD_SCHEMA,
        "graph_backend": settings.graph_backend,
        "vector_backend": settings.vector_backend,
        "milvus_uri": settings.milvus_uri,
        "falkordb_url": settings.falkordb_url,
        "embed_model": embed_model,
    }
    h.update(json.dumps(head, sort_keys=True).encode("utf-8"))
    for kind in ("chunks", "entities", "relations", "communities", "claims"):
        h.update(f"\n#{kind}\n".encode())
        for item in getattr(data, kind):
            line = json.dumps(item.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            h.update(line.encode("utf-8") + b"\n")
    return h.hexdigest()


# --- stores -------------------------------------------------------------------------------------


def _server_side(settings: Settings) -> bool:
    """Whether some store keeps data outside the version directory (then it must be dropped by key)."""
    return settings.graph_backend != "kuzu" or "://" in settings.milvus_uri


def drop_location(settings: Settings, location: StoreLocation) -> None:
    """Remove a version's server-side resources (FalkorDB graph, Milvus collections) by its key."""
    if not _server_side(settings):
        return
    graph_backend(settings).delete_graph(settings, location)
    vectors = open_vector_store(settings, location)
    try:
        vectors.drop()
    finally:
        vectors.close()


def _groups(n: int, texts: Sequence[str], size: int) -> Iterator[list[int]]:
    # Longest first, so that each model batch pads to similar lengths.
    order = sorted(range(n), key=lambda i: -len(texts[i]))
    for start in range(0, n, size):
        yield order[start : start + size]


def entity_text(entity: Entity) -> str:
    """What the Entities collection embeds: `name: description` (name alone without a description)."""
    return f"{entity.name}: {entity.description}" if entity.description else entity.name


def relation_text(relation: Relation, names: dict[str, str]) -> str:
    """The relation's sentence; without one, `source TYPE target` from the entity names."""
    if relation.description:
        return relation.description
    return f"{names.get(relation.source_id, relation.source_id)} {relation.relation_type} " \
        f"{names.get(relation.target_id, relation.target_id)}"


def entity_row(e: Entity, text: str) -> dict[str, Any]:
    return {"id": e.id, "name": e.name, "type": e.type, "text": text}


def relation_row(r: Relation, text: str) -> dict[str, Any]:
    return {
        "id": r.id,
        "text": text,
        "source_id": r.source_id,
        "target_id": r.target_id,
        "relation_type": r.relation_type,
    }


def chunk_row(c: Chunk) -> dict[str, Any]:
    return {
        "id": c.id,
        "text": c.text,
        "source": c.source,
        "original_document": c.original_document,
        "chapter": c.chapter,
        "author": c.author,
        "position": c.position,
    }


def _embed_into(
    vectors: VectorStore,
    embedder: Embedder,
    collection: str,
    items: Sequence[Any],
    texts: Sequence[str],
    row: Callable[[Any, str], dict[str, Any]],
    progress: bool,
    seconds: dict[str, float],
    report: ProgressFn | None = None,
) -> None:
    bar = tqdm(total=len(texts), desc=f"embed {collection}", unit="text", disable=not progress, leave=False)
    done = 0
    stage = f"embedding {collection}"
    if report is not None:
        report(stage, 0, len(texts))
    try:
        # Few large inserts: each Milvus insert ends in a flush, and fewer segments also search faster.
        for group in _groups(len(texts), texts, INSERT_ROWS):
            # Each distinct text is embedded once (relations extracted from documents share their sentence).
            slot: dict[str, int] = {}
            for i in group:
                slot.setdefault(texts[i], len(slot))
            distinct = list(slot)
            parts = []
            for start in range(0, len(distinct), EMBED_BATCH):
                batch = distinct[start : start + EMBED_BATCH]
                t = time.perf_counter()
                parts.append(np.asarray(embedder.embed(batch), dtype=np.float32))
                seconds["embed"] = seconds.get("embed", 0.0) + time.perf_counter() - t
                bar.update(len(batch))
                done += len(batch)
                if report is not None:
                    report(stage, done, len(texts))
            bar.update(len(group) - len(distinct))
            done += len(group) - len(distinct)  # repeated texts reuse their vector
            if report is not None:
                report(stage, done, len(texts))
            matrix = np.concatenate(parts)[[slot[texts[i]] for i in group]]
            t = time.perf_counter()
            vectors.insert(collection, [row(items[i], texts[i]) for i in group], matrix)
            seconds["vectors"] = seconds.get("vectors", 0.0) + time.perf_counter() - t
    finally:
        bar.close()


@contextmanager
def writer_lock(data_dir: Path) -> Iterator[None]:
    """One ingest at a time per data directory (an advisory flock, released if the process dies)."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        lock_file = (data_dir / ".ingest.lock").open("a")
    except OSError as exc:  # a read-only mount, a full disk, no permission
        raise StoreError(f"cannot write to the data directory {data_dir}: {exc.strerror or exc}") from exc
    with lock_file as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise StoreError(f"another ingest is writing to {data_dir}; try again when it has finished") from exc
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _clean_abandoned(settings: Settings) -> None:
    # Under the writer lock every build directory is abandoned (its ingest was killed).
    versions = settings.data_dir / "versions"
    for build in versions.glob(".build-*") if versions.is_dir() else []:
        info = build / _BUILD_INFO
        if _server_side(settings) and info.is_file():
            drop_location(settings, StoreLocation(dir=build, key=json.loads(info.read_text())["key"]))
    catalog.clean_abandoned_builds(settings.data_dir, older_than_s=0.0)


def lost_data(settings: Settings, live: catalog.GraphHandle) -> str:
    """Why the live version's stores no longer hold what its manifest counts ('' if they do, or cannot be read).

    A FalkorDB server restarted without persistence or a deleted Milvus Lite file leave the manifest intact and
    the data gone; re-ingesting the same input must then rebuild rather than report "unchanged". A store that
    cannot be opened at all (a server down, Milvus Lite held by a running app) proves nothing, so it counts as
    intact: the ingest stays a no-op, and the error shows where the store is used.
    """
    want = live.manifest.get("counts", {})
    try:
        graph = open_graph_store(settings, live.location)
    except StoreError:
        return ""
    try:
        have = graph.counts()
    except StoreError as exc:  # opened, but its data cannot be read (e.g. a server that lost the graph)
        return str(exc)
    finally:
        graph.close()
    try:
        vectors = open_vector_store(settings, live.location)
    except StoreError:
        return ""
    try:
        have.update({f"{c} vectors": vectors.count(c) for c in (ENTITIES, RELATIONS, CHUNKS)})
    except StoreError as exc:
        return str(exc)
    finally:
        vectors.close()
    expected = {
        **{k: int(want.get(k, 0)) for k in ("entities", "relations", "chunks")},
        f"{ENTITIES} vectors": int(want.get("entities", 0)),
        f"{RELATIONS} vectors": int(want.get("relations", 0)),
        f"{CHUNKS} vectors": int(want.get("chunks", 0)),
    }
    short = [f"{k} {have.get(k, 0)} of {n}" for k, n in expected.items() if have.get(k, 0) != n]
    return f"its stores hold {', '.join(short)}" if short else ""


def _retire(settings: Settings, name: str) -> list[str]:
    """Delete versions of `name` older than the live one and the KEEP_PREVIOUS before it."""
    mine = catalog.stale_versions(settings.data_dir, name)
    # Version ids end in their UTC build time; the directory's mtime breaks same-second ties.
    mine.sort(key=lambda p: (p.name.rsplit("-", 1)[-1], p.stat().st_mtime_ns), reverse=True)
    removed = []
    for path in mine[KEEP_PREVIOUS:]:
        manifest = path / catalog.MANIFEST
        if manifest.is_file():
            drop_location(settings, StoreLocation(dir=path, key=json.loads(manifest.read_text())["key"]))
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path.name)
    return removed


# --- build --------------------------------------------------------------------------------------


def build_graph(
    settings: Settings,
    data: GraphData,
    name: str,
    *,
    embedder: Embedder,
    progress: bool = True,
    source: str = "",
    report: ProgressFn | None = None,
) -> IngestReport:
    """Build graph `name` from `data` into a new version and swap it in atomically.

    Idempotent: if the live version has the same content hash nothing is rebuilt. On any failure the
    new version is discarded (server-side resources too) and the previous one stays live. A graph that brings
    no communities gets computed ones (`retrieval.graph.communities`). `report(stage, done, total)` hears each stage.
    """
    catalog.check_name(name)
    say: ProgressFn = report or (lambda stage, done, total: None)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    check_graph(data)
    digest = content_hash(data, settings, embedder.name)
    counts = data_counts(data)
    seconds["hash"] = time.perf_counter() - t
    data_dir = Path(settings.data_dir)
    warnings = tuple(data.warnings)
    with writer_lock(data_dir):
        if name in catalog.list_graphs(data_dir):
            live = catalog.resolve(data_dir, name)
            if live.manifest.get("content_hash") == digest:
                lost = lost_data(settings, live)
                if not lost:
                    return IngestReport(live, True, {**counts, **live.manifest.get("counts", {})}, seconds, warnings)
                warnings += (f"version {live.version} had the same input but lost data ({lost}); rebuilt it",)
        _clean_abandoned(settings)
        version = f"{digest[:12]}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}"
        key = f"{name.replace('-', '_')}_{version.replace('-', '')}"
        try:
            build_dir = catalog.new_build_dir(data_dir, name)
        except OSError as exc:
            raise StoreError(f"cannot create a build directory in {data_dir}: {exc.strerror or exc}") from exc
        location = StoreLocation(dir=build_dir, key=key)
        try:
            catalog.write_json_atomic(build_dir / _BUILD_INFO, {"name": name, "key": key})
            t = time.perf_counter()
            say("communities", 0, 1)
            communities = data.communities or compute_communities(data)
            counts["communities"] = len(communities)
            save_extras(build_dir, Extras(communities, data.claims, chapter_names(data.chunks)))
            say("communities", 1, 1)
            seconds["communities"] = time.perf_counter() - t
            dim = _fill(settings, data, location, embedder, progress, seconds, say)
            manifest = {
                "name": name,
                "version": version,
                "content_hash": digest,
                "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "key": key,
                "counts": counts,
                "graph_backend": settings.graph_backend,
                "vector_backend": settings.vector_backend,
                "embed_model": embedder.name,
                "dim": dim,
                "source": source,
                "warnings": list(data.warnings),
            }
            t = time.perf_counter()
            say("committing", 0, 1)
            (build_dir / _BUILD_INFO).unlink()
            handle = catalog.commit_build(data_dir, name, build_dir, manifest)
            say("committing", 1, 1)
            seconds["commit"] = time.perf_counter() - t
        except BaseException as exc:
            _discard(settings, location)
            if isinstance(exc, RetrievalError | KeyboardInterrupt | SystemExit):
                raise
            raise StoreError(f"ingest of graph {name!r} failed, previous version kept: {exc}") from exc
        t = time.perf_counter()
        _retire(settings, name)
        seconds["retire"] = time.perf_counter() - t
    return IngestReport(handle, False, counts, seconds, warnings)


def _fill(
    settings: Settings,
    data: GraphData,
    location: StoreLocation,
    embedder: Embedder,
    progress: bool,
    seconds: dict[str, float],
    say: ProgressFn,
) -> int:
    """Write graph, vectors and BM25 of one version; returns the vector dimension."""
    graph: GraphStore | None = None
    vectors: VectorStore | None = None
    try:
        t = time.perf_counter()
        say("graph store", 0, 1)
        graph = open_graph_store(settings, location)
        graph.upsert(data)
        say("graph store", 1, 1)
        seconds["graph"] = time.perf_counter() - t

        t = time.perf_counter()
        vectors = open_vector_store(settings, location)
        vectors.ensure(embedder.dim)
        seconds["vectors"] = time.perf_counter() - t
        names = {e.id: e.name for e in data.entities}
        _embed_into(vectors, embedder, ENTITIES, data.entities, [entity_text(e) for e in data.entities],
                    entity_row, progress, seconds, say)
        _embed_into(vectors, embedder, RELATIONS, data.relations,
                    [relation_text(r, names) for r in data.relations], relation_row, progress, seconds, say)
        chunk_texts = [bm25.chunk_text(c) for c in data.chunks]
        _embed_into(vectors, embedder, CHUNKS, data.chunks, chunk_texts, lambda c, _text: chunk_row(c), progress,
                    seconds, say)

        t = time.perf_counter()
        say("BM25 index", 0, 1)
        index = bm25.build_index([c.id for c in data.chunks], chunk_texts)
        bm25.save_index(index, location.dir / "bm25")
        say("BM25 index", 1, 1)
        seconds["bm25"] = time.perf_counter() - t

        t = time.perf_counter()
        say("vector index", 0, 1)
        vectors.wait_ready()  # a server answers from a temporary index until its real one is built
        say("vector index", 1, 1)
        seconds["index"] = time.perf_counter() - t
        return int(embedder.dim)
    finally:
        # Close before the commit renames the directory (and before a discard deletes it).
        for store in (vectors, graph):
            if store is not None:
                store.close()


def _discard(settings: Settings, location: StoreLocation) -> None:
    try:
        drop_location(settings, location)
    except RetrievalError:
        # Keep the build directory: its build.json names the server key, which the next ingest drops.
        return
    catalog.discard_build(location.dir)


# --- entry points -------------------------------------------------------------------------------


# (format, what marks it): the first match wins.
_DETECT: tuple[tuple[str, Callable[[Path], bool]], ...] = (
    ("hipporag", lambda p: any(p.glob("openie_*.json"))),
    ("bundle", lambda p: (p / "chunks.jsonl").is_file()),
    ("graphrag", lambda p: (p / "entities.parquet").is_file() or (p / "create_final_entities.parquet").is_file()),
    ("lightrag", lambda p: (p / "graph_chunk_entity_relation.graphml").is_file()),
    ("csv", lambda p: (p / "nodes.csv").is_file() and (p / "relationships.csv").is_file()),
    ("graphml", lambda p: len(list(p.glob("*.graphml"))) == 1),
    ("documents", lambda p: _has_documents(p)),  # last: the other formats' folders may hold a README.md
)


def detect_format(path: Path) -> str:
    """The format whose marker files the folder holds (see `_DETECT`)."""
    for fmt, marks in _DETECT:
        if marks(path):
            return fmt
    raise IngestError(
        str(path), 0, "path",
        "no known format: expected a bundle (chunks.jsonl), HippoRAG output (openie_*.json), a GraphRAG output "
        "folder (entities.parquet), a LightRAG working dir (graph_chunk_entity_relation.graphml), nodes.csv + "
        "relationships.csv, one .graphml file, or a folder of documents (.txt, .md, .pdf, .epub)",
    )


def _has_documents(path: Path) -> bool:
    from retrieval.ingest.books import SUFFIXES

    return any(p.suffix.lower() in SUFFIXES and p.is_file() for p in path.rglob("*"))


def load_data(path: str | Path, fmt: str = "auto", options: IngestOptions | None = None) -> GraphData:
    """Parse `path` as format `fmt` (a name in `retrieval.ingest.FORMATS`, or `auto`: detected)."""
    path = Path(path)
    if not path.is_dir():
        raise IngestError(str(path), 0, "path", "not a directory")
    fmt = detect_format(path) if fmt == "auto" else fmt
    return reader(fmt)(path, options or IngestOptions())


def default_name(path: Path) -> str:
    """A graph name from a folder name (letters, digits, '_' and '-')."""
    raw = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_-") else "_" for ch in path.resolve().name)
    return (raw.strip("_-") or "graph")[:64]


def ingest(
    settings: Settings,
    path: str | Path,
    *,
    fmt: str = "auto",
    name: str | None = None,
    embedder: Embedder | None = None,
    progress: bool = True,
    options: IngestOptions | None = None,
) -> IngestReport:
    """Parse `path` and build it as graph `name` (default: the folder name); parse time is in `seconds`.

    Without an embedder, the settings' model is loaded after parsing, so malformed input fails fast.
    """
    path = Path(path)
    t = time.perf_counter()
    options = options or IngestOptions()
    if options.settings is None:  # readers that extract (documents) need the key, cache dir and chunk sizes
        options = replace(options, settings=settings)
    data = load_data(path, fmt, options)
    before = {"parse": time.perf_counter() - t}
    if embedder is None:
        t = time.perf_counter()
        embedder = load_embedder(settings.embed_model)
        before["model"] = time.perf_counter() - t
    report = build_graph(
        settings, data, name or default_name(path), embedder=embedder, progress=progress, source=str(path),
        report=options.progress if options is not None else None,
    )
    return IngestReport(
        report.handle, report.unchanged, report.counts, {**before, **report.seconds}, report.warnings
    )


def graph_stats(handle: catalog.GraphHandle, graph: GraphStore, vectors: VectorStore | None) -> GraphStats:
    """Counts read from the open stores (not only the manifest), with the version's identity.

    Without a vector store (e.g. Milvus Lite held by another process) `vectors` is left empty.
    """
    counts = {**handle.manifest.get("counts", {}), **graph.counts()}
    vector_counts = {c: vectors.count(c) for c in (ENTITIES, RELATIONS, CHUNKS)} if vectors is not None else {}
    m = handle.manifest
    extras = load_extras(handle.dir)
    return GraphStats(
        name=handle.name,
        version=handle.version,
        books=int(counts.get("books", 0)),
        chapters=int(counts.get("chapters", 0)),
        chunks=int(counts.get("chunks", vector_counts.get(CHUNKS, 0))),
        entities=int(counts.get("entities", 0)),
        relations=int(counts.get("relations", 0)),
        graph_backend=str(m.get("graph_backend", "")),
        vector_backend=str(m.get("vector_backend", "")),
        created_at=str(m.get("created_at", "")),
        embed_model=str(m.get("embed_model", "")),
        vectors=vector_counts,
        communities=len(extras.communities),
        chapter_names=extras.chapter_names,
    )

