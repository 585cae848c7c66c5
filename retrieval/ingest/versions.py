"""The version lifecycle: one writer per data directory, abandoned builds cleaned, old versions retired, and a
version's server-side resources dropped by key."""

from __future__ import annotations

import fcntl
import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from retrieval.config import Settings
from retrieval.errors import NotFoundError, RetrievalError, StoreError
from retrieval.graph import catalog
from retrieval.stores.base import (
    CHUNKS,
    ENTITIES,
    RELATIONS,
    StoreLocation,
    graph_backend,
    open_graph_store,
    open_vector_store,
)
from retrieval.stores.kuzu_console import drop_copy

KEEP_PREVIOUS = 1  # versions kept besides the live one, for readers that still have them open


BUILD_INFO = "build.json"


def server_side(settings: Settings) -> bool:
    """Whether some store keeps data outside the version directory (then it must be dropped by key)."""
    return settings.graph_backend != "kuzu" or "://" in settings.milvus_uri


def drop_location(settings: Settings, location: StoreLocation) -> None:
    """Remove a version's server-side resources (FalkorDB graph, Milvus collections) by its key."""
    if not server_side(settings):
        return
    graph_backend(settings).delete_graph(settings, location)
    vectors = open_vector_store(settings, location)
    try:
        vectors.drop()
    finally:
        vectors.close()


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


def clean_abandoned(settings: Settings) -> None:
    # Under the writer lock every build directory is abandoned (its ingest was killed).
    versions = settings.data_dir / "versions"
    for build in versions.glob(".build-*") if versions.is_dir() else []:
        info = build / BUILD_INFO
        if server_side(settings) and info.is_file():
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


def retire(settings: Settings, name: str) -> list[str]:
    """Delete versions of `name` older than the live one and the KEEP_PREVIOUS before it."""
    mine = catalog.stale_versions(settings.data_dir, name)
    # Version ids end in their UTC build time; the directory's mtime breaks same-second ties.
    mine.sort(key=lambda p: (p.name.rsplit("-", 1)[-1], p.stat().st_mtime_ns), reverse=True)
    return [remove_version(settings, path) for path in mine[KEEP_PREVIOUS:]]


def remove_version(settings: Settings, path: Path) -> str:
    """Delete one version directory, its server-side data and the Query console's copy of it; returns its name."""
    manifest = path / catalog.MANIFEST
    if manifest.is_file():
        drop_location(settings, StoreLocation(dir=path, key=json.loads(manifest.read_text())["key"]))
    shutil.rmtree(path, ignore_errors=True)
    drop_copy(settings, path)  # the Query console's copy of it, if it made one
    return path.name


def discard(settings: Settings, location: StoreLocation) -> None:
    try:
        drop_location(settings, location)
    except RetrievalError:
        # Keep the build directory: its build.json names the server key, which the next ingest drops.
        return
    catalog.discard_build(location.dir)


def delete_graph(settings: Settings, name: str) -> list[str]:
    """Remove graph `name`: unlisted first (its link goes in one unlink, so readers see it or nothing), then every
    version of it and their server-side data; the active marker moves to the first graph left. Returns the
    version directories removed. Its few-shot examples stay (they belong to the name, as across re-ingests)."""
    catalog.check_name(name)
    data_dir = settings.data_dir
    with writer_lock(data_dir):
        link = data_dir / "graphs" / name
        if not link.is_symlink():
            raise NotFoundError(f"no graph named {name!r} in {data_dir}")
        link.unlink()
        marker = data_dir / "active"
        if marker.is_file() and marker.read_text(encoding="utf-8").strip() == name:
            left = catalog.list_graphs(data_dir)
            if left:
                catalog.set_active(data_dir, left[0])
            else:
                marker.unlink()
        return [remove_version(settings, path) for path in catalog.stale_versions(data_dir, name)]
