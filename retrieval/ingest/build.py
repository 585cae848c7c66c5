"""Build a graph version from GraphData: stores, vectors and BM25 in a new directory, swapped in on success."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from retrieval.config import Settings
from retrieval.curation.log import ReplayLine
from retrieval.curation.replay import Replayed
from retrieval.embedding import Embedder, load_embedder
from retrieval.errors import IngestError, RetrievalError, StoreError, excerpt
from retrieval.graph import catalog
from retrieval.graph.communities import Extras, chapter_names, compute_communities, save_extras
from retrieval.graph.layout import Layout, compute_layout, save_layout
from retrieval.ingest import IngestOptions, ProgressFn
from retrieval.ingest.bundle import MAX_ID_LEN, check_text, id_too_long
from retrieval.ingest.load import check_import_size, default_name, load_data
from retrieval.ingest.progress import StageBars
from retrieval.ingest.replay import in_force, record_replay, replay_log, stored_counts
from retrieval.ingest.versions import BUILD_INFO, clean_abandoned, discard, lost_data, retire, writer_lock
from retrieval.ingest.write import EmbeddingThread, embedding_jobs, entity_text, fill_version
from retrieval.models import Chunk, Community, Entity, GraphData, Relation
from retrieval.stores.base import StoreLocation
from retrieval.stores.vector_cache import CachingEmbedder, caching_embedder

# Bump when the way GraphData becomes stores changes, so an unchanged input is rebuilt once.
BUILD_SCHEMA = 2  # 2: the extras.json sidecar (communities, claims, chapter names)
OVERLAPPED = ("embed",)  # `seconds` keys spent in a thread beside the build's stages (not added to its time)


@dataclass(frozen=True)
class IngestReport:
    """What an ingest did: the live version, whether it was already there, counts, timings, warnings."""

    handle: catalog.GraphHandle
    unchanged: bool
    counts: dict[str, int]
    seconds: dict[str, float] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    replay: tuple[ReplayLine, ...] = ()  # what became of each curation of this graph name (re-import)
    reused: int = 0  # texts whose vector came from the data directory's vector cache
    embedded: int = 0  # texts embedded

    @property
    def name(self) -> str:
        return self.handle.name

    @property
    def wall_s(self) -> float:
        """The build's own time: its stages in turn (embedding ran beside them, its wait is in `vectors`)."""
        return sum(v for k, v in self.seconds.items() if k not in OVERLAPPED)

    @property
    def version(self) -> str:
        return self.handle.version

    def summary(self) -> str:
        c = self.counts
        what = "unchanged" if self.unchanged else "built"
        text = (
            f"{what} graph {excerpt(self.name)} version {self.version}: {c.get('books', 0)} books, "
            f"{c.get('chapters', 0)} chapters, {c.get('chunks', 0)} chunks, {c.get('entities', 0)} entities, "
            f"{c.get('relations', 0)} relations in {self.wall_s:.1f} s"
        )
        if self.reused:
            text += f"; {self.reused} texts took their vectors from the cache, {self.embedded} embedded"
        for ln in self.replay:
            text += f"\ncuration #{ln.changeset} {ln.status}" + (f" ({ln.reason})" if ln.reason else "") + \
                f": {ln.summary}"
        return text


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
                raise IngestError(where, 0, f"{kind}[{i}].id", f"duplicate id {excerpt(item.id)}")
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
                raise IngestError(where, 0, f"relations[{i}].{name}", f"unknown entity id {excerpt(ref)}")
    referring: tuple[tuple[str, Sequence[Entity | Relation]], ...] = (
        ("entities", data.entities), ("relations", data.relations)
    )
    for kind, linked in referring:
        for i, node in enumerate(linked):
            for j, ref in enumerate(node.source_chunks):
                if ref not in chunk_ids:
                    raise IngestError(where, 0, f"{kind}[{i}].source_chunks[{j}]", f"unknown chunk id {excerpt(ref)}")


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


def data_layout(data: GraphData, communities: Sequence[Community], say: ProgressFn) -> Layout:
    """The map layout of the graph being built (`retrieval.graph.layout`), stored with its version."""
    at = {e.id: i for i, e in enumerate(data.entities)}
    src = np.fromiter((at[r.source_id] for r in data.relations), dtype=np.int64, count=len(data.relations))
    dst = np.fromiter((at[r.target_id] for r in data.relations), dtype=np.int64, count=len(data.relations))
    weight = np.fromiter((r.weight for r in data.relations), dtype=np.float64, count=len(data.relations))
    return compute_layout([e.id for e in data.entities], src, dst, weight, communities, say)


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
    no communities gets computed ones (`retrieval.graph.communities`), and every version its map layout
    (`retrieval.graph.layout`). `report(stage, done, total)` hears each stage (`progress` without it: tqdm bars).
    Texts are embedded in a thread of their own while communities, layout and stores are written.

    Cancelling (Ctrl-C, or the app's Cancel, which raises in `report`) discards the new version like a failure:
    any exception that is no `Exception` (KeyboardInterrupt, SystemExit, the app's script-control exceptions)
    passes through unchanged after the discard.
    """
    catalog.check_name(name)
    bars = StageBars() if report is None and progress else None
    say: ProgressFn = report or bars or (lambda stage, done, total: None)
    try:
        return _build(settings, data, name, embedder, source, say)
    finally:
        if bars is not None:
            bars.close()


def _build(settings: Settings, data: GraphData, name: str, embedder: Embedder, source: str,
           say: ProgressFn) -> IngestReport:
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    check_graph(data)
    digest = content_hash(data, settings, embedder.name)
    counts = data_counts(data)
    seconds["hash"] = time.perf_counter() - t
    data_dir = Path(settings.data_dir)
    warnings = tuple(data.warnings)
    with writer_lock(data_dir):
        live = catalog.resolve(data_dir, name) if name in catalog.list_graphs(data_dir) else None
        if live is not None and live.manifest.get("content_hash") == digest:
            lost = lost_data(settings, live)
            if not lost:
                return IngestReport(live, True, {**counts, **live.manifest.get("counts", {})}, seconds, warnings,
                                    replay=in_force(data_dir, name, live.version))
            warnings += (f"version {live.version} had the same input but lost data ({lost}); rebuilt it",)
        clean_abandoned(settings)
        version = f"{digest[:12]}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}"
        key = f"{name.replace('-', '_')}_{version.replace('-', '')}"
        try:
            build_dir = catalog.new_build_dir(data_dir, name)
        except OSError as exc:
            raise StoreError(f"cannot create a build directory in {data_dir}: {exc.strerror or exc}") from exc
        location = StoreLocation(dir=build_dir, key=key)
        through_cache = caching_embedder(data_dir, settings.vector_cache_mb, embedder)
        embedding = EmbeddingThread(through_cache, embedding_jobs(data))
        replayed: list[Replayed] = []
        try:
            embedding.start()
            catalog.write_json_atomic(build_dir / BUILD_INFO, {"name": name, "key": key})
            t = time.perf_counter()
            say("communities", 0, 1)
            communities = data.communities or compute_communities(data)
            counts["communities"] = len(communities)
            save_extras(build_dir, Extras(communities, data.claims, chapter_names(data.chunks)))
            say("communities", 1, 1)
            seconds["communities"] = time.perf_counter() - t
            t = time.perf_counter()
            save_layout(build_dir, data_layout(data, communities, say))
            seconds["layout"] = time.perf_counter() - t
            dim = fill_version(settings, data, location, embedding, seconds, say)
            replayed = replay_log(settings, name, location, data, through_cache, say, seconds)
            if replayed:
                counts.update(stored_counts(settings, location))
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
            (build_dir / BUILD_INFO).unlink()
            handle = catalog.commit_build(data_dir, name, build_dir, manifest)
            say("committing", 1, 1)
            seconds["commit"] = time.perf_counter() - t
        except BaseException as exc:
            embedding.cancel()
            discard(settings, location)
            if isinstance(exc, RetrievalError) or not isinstance(exc, Exception):
                raise
            raise StoreError(f"ingest of graph {excerpt(name)} failed, previous version kept: {exc}") from exc
        finally:
            embedding.cancel()
            if isinstance(through_cache, CachingEmbedder):
                through_cache.close()
        lines = record_replay(data_dir, name, handle.version, replayed)
        t = time.perf_counter()
        retire(settings, name)
        seconds["retire"] = time.perf_counter() - t
    if isinstance(through_cache, CachingEmbedder) and through_cache.problem:
        warnings += (through_cache.problem,)
    reused = through_cache.reused if isinstance(through_cache, CachingEmbedder) else 0
    embedded = through_cache.embedded if isinstance(through_cache, CachingEmbedder) else 0
    return IngestReport(handle, False, counts, seconds, warnings, replay=lines, reused=reused, embedded=embedded)


# --- entry points -------------------------------------------------------------------------------


def ingest(
    settings: Settings,
    path: str | Path,
    *,
    fmt: str = "auto",
    name: str | None = None,
    embedder: Embedder | None = None,
    progress: bool = True,
    options: IngestOptions | None = None,
    source: str = "",
    web: bool = False,
) -> IngestReport:
    """Parse `path` and build it as graph `name` (default: the folder name); parse time is in `seconds`.

    The name is checked before the input is read. Without an embedder, the settings' model is loaded after
    parsing, so malformed input fails fast. `web`: an import through the app, held to KG_MAX_IMPORT_ITEMS.
    `source`: what the manifest records as the input (default: the path).
    """
    path = Path(path)
    name = catalog.check_name(name or default_name(path))
    t = time.perf_counter()
    options = options or IngestOptions()
    if options.settings is None:  # readers that extract (documents) need the key, cache dir and chunk sizes
        options = replace(options, settings=settings)
    data = load_data(path, fmt, options)
    if web:
        check_import_size(settings, data)
    before = {"parse": time.perf_counter() - t}
    if embedder is None:
        t = time.perf_counter()
        embedder = load_embedder(settings.embed_model)
        before["model"] = time.perf_counter() - t
    report = build_graph(
        settings, data, name, embedder=embedder, progress=progress, source=source or str(path),
        report=options.progress if options is not None else None,
    )
    return replace(report, seconds={**before, **report.seconds})


