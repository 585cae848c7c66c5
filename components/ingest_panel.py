"""Data page widgets: graph statistics, the graphs of the data directory, and imports with a live progress bar."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

from components.text import md_code, md_literal
from components.upload import safe_extract_zip
from retrieval import catalog
from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.errors import IngestError, RetrievalError
from retrieval.ingest.build import IngestReport, build_graph, default_name, load_data
from retrieval.models import GraphStats

FORMATS = ("auto", "bundle", "hipporag")


class ProgressEmbedder:
    """Wraps an embedder and reports texts embedded / total: embedding dominates an ingest's time."""

    def __init__(self, inner: Embedder, total: int, report: Callable[[int, int], None]) -> None:
        self.inner, self.total, self.report, self.done = inner, max(total, 1), report, 0
        self.name = inner.name  # same name, same content hash: wrapping never forces a rebuild
        self.dim = inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs = self.inner.embed(texts)
        self.done += len(texts)
        self.report(self.done, self.total)
        return vecs


def show_ingest_error(exc: RetrievalError) -> None:
    if isinstance(exc, IngestError):
        st.error(
            f"**Import failed** at {md_code(f'{exc.file}:{exc.line}')} · field {md_code(exc.field)}: "
            f"{md_literal(exc.reason)}. The previous graph stays live.",
            icon=":material/error:",
        )
    else:
        st.error(f"**Import failed:** {md_literal(exc)}", icon=":material/error:")


def run_ingest(cfg: Settings, path: Path, fmt: str, name: str, embedder: Embedder) -> IngestReport | None:
    """Parse, embed (with a progress bar), build and swap in graph `name`; errors are shown, not raised."""
    bar = st.progress(0.0, text="Reading files…")
    try:
        data = load_data(path, fmt)
        total = len(data.entities) + len(data.relations) + len(data.chunks)

        def report(done: int, all_: int) -> None:
            bar.progress(min(0.95, 0.05 + 0.9 * done / all_), text=f"Embedding {done:,} / {all_:,} texts…")

        bar.progress(0.05, text=f"Parsed {total:,} records; building stores…")
        result = build_graph(cfg, data, name, embedder=ProgressEmbedder(embedder, total, report),
                             progress=False, source=str(path))
    except RetrievalError as exc:
        bar.empty()
        show_ingest_error(exc)
        return None
    bar.progress(1.0, text="Done")
    if result.unchanged:
        st.info(f"Graph **{md_literal(name)}** is already up to date: version {md_code(result.version)}.")
    else:
        st.success(md_literal(result.summary()), icon=":material/check_circle:")
    for w in result.warnings:
        st.warning(md_literal(w))
    return result


def render_stats(stats: GraphStats) -> None:
    cols = st.columns(5)
    for col, (label, value) in zip(
        cols,
        (("Books", stats.books), ("Chapters", stats.chapters), ("Chunks", stats.chunks),
         ("Entities", stats.entities), ("Relations", stats.relations)),
        strict=True,
    ):
        col.metric(label, f"{value:,}", border=True)
    st.caption(
        f"**{md_literal(stats.name)}** · version {md_code(stats.version)} · built {md_literal(stats.created_at)} · "
        f"{md_literal(stats.graph_backend)} + {md_literal(stats.vector_backend)} · "
        f"embeddings {md_literal(stats.embed_model)}"
    )


def graphs_frame(data_dir: Path) -> pd.DataFrame:
    """One row per graph of the data directory, from the manifests (no store is opened)."""
    active = catalog.active_name(data_dir)
    rows = []
    for name in catalog.list_graphs(data_dir):
        try:
            h = catalog.resolve(data_dir, name)
        except RetrievalError:
            continue  # swapped while listing
        c = h.manifest.get("counts", {})
        rows.append({
            "active": name == active, "graph": name, "version": h.version,
            "chunks": c.get("chunks"), "entities": c.get("entities"), "relations": c.get("relations"),
            "built": h.manifest.get("created_at", ""),
        })
    return pd.DataFrame(rows, columns=["active", "graph", "version", "chunks", "entities", "relations", "built"])


@dataclass(frozen=True)
class ImportSource:
    """What the analyst chose: an uploaded .zip or a folder on the server."""

    upload: UploadedFile | None = None
    folder: Path | None = None

    @property
    def hint(self) -> str:
        if self.upload is not None:
            return Path(self.upload.name).stem
        return self.folder.name if self.folder else ""


def import_source() -> ImportSource:
    upload_tab, path_tab = st.tabs(["Upload .zip", "Server path"])
    with upload_tab:
        upload = st.file_uploader("Bundle or HippoRAG output, zipped", type=["zip"], key="import-zip")
    with path_tab:
        server_path = st.text_input("Folder on the server", key="import-path", placeholder="/data/my-bundle")
    if upload is not None:
        return ImportSource(upload=upload)
    if server_path:
        folder = Path(server_path).expanduser()
        if folder.is_dir():
            return ImportSource(folder=folder)
        st.error(f"Not a folder on the server: {md_code(folder)}", icon=":material/error:")
    return ImportSource()


def run_import(cfg: Settings, source: ImportSource, fmt: str, name: str, embedder: Embedder) -> IngestReport | None:
    """Extract an upload safely into a temp dir (removed afterwards), or read the server folder, then ingest."""
    if source.upload is None:
        return run_ingest(cfg, source.folder, fmt, name, embedder) if source.folder else None
    with tempfile.TemporaryDirectory(prefix="kg-upload-") as tmp:
        try:
            folder = safe_extract_zip(source.upload, Path(tmp))
        except RetrievalError as exc:
            st.error(f"**Upload rejected:** {md_literal(exc)}", icon=":material/error:")
            return None
        return run_ingest(cfg, folder, fmt, name, embedder)


def name_hint(hint: str) -> str:
    return default_name(Path(hint or "graph"))


