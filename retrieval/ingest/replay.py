"""A re-import keeps the graph's corrections: the build replays the curation log of its name into the new version
before committing it (`retrieval.curation.replay`), and reports what became of each edit."""

from __future__ import annotations

import time
from pathlib import Path

from retrieval.config import Settings
from retrieval.curation.log import CurationLog, ReplayLine, has_log
from retrieval.curation.replay import Replayed, pending_log, replay
from retrieval.curation.views import StoreView
from retrieval.curation.write import Version
from retrieval.embedding import Embedder
from retrieval.graph.communities import load_extras
from retrieval.ingest import ProgressFn
from retrieval.models import GraphData
from retrieval.stores.base import StoreLocation, open_graph_store, open_vector_store


def replay_log(settings: Settings, name: str, location: StoreLocation, data: GraphData, embedder: Embedder,
               say: ProgressFn, seconds: dict[str, float]) -> list[Replayed]:
    """Replay graph `name`'s edits in force into the version being built at `location` ([] if it has none)."""
    log = pending_log(settings.data_dir, name)
    if log is None:
        return []
    t = time.perf_counter()
    say("replaying curations", 0, 1)
    graph = open_graph_store(settings, location)
    vectors = open_vector_store(settings, location)
    try:
        extras = load_extras(location.dir)
        chunk_ids = [c.id for c in data.chunks]
        view = StoreView(graph, vectors, extras, chunk_ids)
        version = Version(graph=graph, vectors=vectors, dir=location.dir, embed=embedder.embed, view=view,
                          chunk_ids=chunk_ids, extras=extras)
        out = replay(log, version, view)
        vectors.wait_ready()
    finally:
        for store in (vectors, graph):
            store.close()
        log.close()
    say("replaying curations", 1, 1)
    seconds["replay"] = time.perf_counter() - t
    return out


def stored_counts(settings: Settings, location: StoreLocation) -> dict[str, int]:
    graph = open_graph_store(settings, location)
    try:
        counts = graph.counts()
    finally:
        graph.close()
    return {k: v for k, v in counts.items() if k in ("entities", "relations", "chunks")}


def record_replay(data_dir: Path, name: str, version: str, replayed: list[Replayed]) -> tuple[ReplayLine, ...]:
    """Write the replay into the log (after the commit: the new version is live) and return its lines."""
    if not replayed:
        return ()
    log = CurationLog(data_dir, name)
    try:
        log.record_replay(version, [r.line for r in replayed], {r.line.changeset: r.changes for r in replayed
                                                                if r.line.status == "applied"})
    finally:
        log.close()
    return tuple(r.line for r in replayed)


def in_force(data_dir: Path, name: str, version: str) -> tuple[ReplayLine, ...]:
    """An unchanged input re-imported onto a curated graph: its live version has every edit in force already."""
    if not has_log(data_dir, name):
        return ()
    log = CurationLog(data_dir, name)
    try:
        lines = [ReplayLine(changeset=cs.id, status="applied", reason=f"in force on the live version {version}",
                            summary=cs.summary()) for cs in log.effective()]
        if lines:
            log.record_replay(version, lines)
        return tuple(lines)
    finally:
        log.close()
