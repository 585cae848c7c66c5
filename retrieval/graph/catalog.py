"""The data directory: graphs kept side by side, one active, each swapped in atomically.

Layout::

    DATA_DIR/active                      name of the active graph
    DATA_DIR/graphs/NAME  -> ../versions/NAME-VERSION   (symlink, replaced atomically)
    DATA_DIR/versions/NAME-VERSION/      manifest.json, kuzu/, milvus.db, bm25/ ...
    DATA_DIR/versions/.build-*           an ingest in progress (removed if it fails)
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.errors import NotFoundError, ValidationError, excerpt
from retrieval.stores.base import StoreLocation

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class GraphHandle:
    """One committed graph version."""

    name: str
    version: str
    dir: Path
    manifest: dict[str, Any]

    @property
    def location(self) -> StoreLocation:
        return StoreLocation(dir=self.dir, key=self.manifest["key"])

    @property
    def counts(self) -> dict[str, int]:
        """Counts recorded by ingest in the manifest (`stats`/`counts` section or top level)."""
        section = self.manifest.get("stats") or self.manifest.get("counts") or self.manifest
        keys = ("entities", "relations", "chunks", "books", "chapters")
        return {k: int(section[k]) for k in keys if isinstance(section.get(k), int | float)}


def check_name(name: str) -> str:
    """Graph names become directory names: letters, digits, '_' and '-' only."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValidationError(
            f"invalid graph name {excerpt(name)}: use 1-64 letters, digits, '_' or '-', starting with a letter or digit"
        )
    return name


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON to a temp file in the same directory, fsync, then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".partial")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, ensure_ascii=False, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def list_graphs(data_dir: Path) -> list[str]:
    """Names of committed graphs, sorted."""
    root = Path(data_dir) / "graphs"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_symlink() and (p / MANIFEST).is_file())


def active_name(data_dir: Path) -> str | None:
    """The active graph's name, or the only/first graph if none was chosen."""
    marker = Path(data_dir) / "active"
    names = list_graphs(data_dir)
    if marker.is_file():
        name = marker.read_text(encoding="utf-8").strip()
        if name in names:
            return name
    return names[0] if names else None


def set_active(data_dir: Path, name: str) -> None:
    check_name(name)
    if name not in list_graphs(data_dir):
        raise NotFoundError(f"no graph named {excerpt(name)} in {data_dir}")
    tmp = Path(data_dir) / f".active-{uuid.uuid4().hex}"
    tmp.write_text(name, encoding="utf-8")
    os.replace(tmp, Path(data_dir) / "active")


def resolve(data_dir: Path, name: str | None = None) -> GraphHandle:
    """The committed version of graph `name` (default: the active graph)."""
    name = name or active_name(data_dir)
    if not name:
        raise NotFoundError(f"no graph in {data_dir}; build one with `python -m retrieval demo`")
    check_name(name)
    link = Path(data_dir) / "graphs" / name
    manifest_path = link / MANIFEST
    if not manifest_path.is_file():
        raise NotFoundError(f"no graph named {excerpt(name)} in {data_dir}")
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    return GraphHandle(name=name, version=manifest["version"], dir=link.resolve(), manifest=manifest)


def new_build_dir(data_dir: Path, name: str) -> Path:
    """A fresh directory to build a new version into; removed by `discard_build` on failure."""
    check_name(name)
    versions = Path(data_dir) / "versions"
    versions.mkdir(parents=True, exist_ok=True)
    path = versions / f".build-{name}-{uuid.uuid4().hex[:12]}"
    path.mkdir()
    return path


def discard_build(build_dir: Path) -> None:
    shutil.rmtree(build_dir, ignore_errors=True)


def commit_build(data_dir: Path, name: str, build_dir: Path, manifest: dict[str, Any]) -> GraphHandle:
    """Write the manifest, then atomically point graphs/NAME at the new version.

    The symlink swap is a single rename, so readers see either the old or the new version.
    Returns the new handle; the caller retires the previous version (see `retire`).
    """
    data_dir = Path(data_dir)
    write_json_atomic(build_dir / MANIFEST, manifest)
    final = build_dir.parent / f"{name}-{manifest['version']}"
    os.replace(build_dir, final)
    graphs = data_dir / "graphs"
    graphs.mkdir(parents=True, exist_ok=True)
    tmp_link = graphs / f".link-{uuid.uuid4().hex}"
    os.symlink(os.path.relpath(final, graphs), tmp_link)
    os.replace(tmp_link, graphs / name)
    if not (data_dir / "active").is_file():
        set_active(data_dir, name)
    return resolve(data_dir, name)


def stale_versions(data_dir: Path, name: str) -> list[Path]:
    """Version directories of `name` no longer pointed at (safe to delete once readers moved on)."""
    versions = Path(data_dir) / "versions"
    link = Path(data_dir) / "graphs" / name
    live = link.resolve() if link.exists() else None
    if not versions.is_dir():
        return []
    own = re.compile(re.escape(name) + r"-[0-9a-f]{12}-\d{8}T\d{6}")  # not another graph's "name-2-..." dirs
    return [
        p for p in versions.glob(f"{name}-*") if own.fullmatch(p.name) and p.is_dir() and p.resolve() != live
    ]


def clean_abandoned_builds(data_dir: Path, older_than_s: float = 3600.0) -> list[Path]:
    """Remove build directories left by a killed ingest (older than `older_than_s`)."""
    versions = Path(data_dir) / "versions"
    removed = []
    for p in versions.glob(".build-*") if versions.is_dir() else []:
        if time.time() - p.stat().st_mtime > older_than_s:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed
