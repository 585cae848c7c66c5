"""Data page widgets: graph statistics, the graphs of the data directory, and imports with a live progress bar."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.runtime.uploaded_file_manager import UploadedFile

from retrieval.access import Gate, Permit
from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.errors import IngestError, RetrievalError
from retrieval.graph import catalog
from retrieval.ingest import FORMATS as FORMAT_NAMES
from retrieval.ingest import IngestOptions
from retrieval.ingest.archive import safe_extract_zip
from retrieval.ingest.build import ingest
from retrieval.ingest.graphml import MAPPING_KEYS
from retrieval.ingest.load import default_name, server_folder
from retrieval.ingest.progress import StageClock
from retrieval.ingest.versions import delete_graph
from retrieval.models import GraphStats
from ui_text import md_code, md_literal

FORMATS = ("auto", *FORMAT_NAMES)  # every registered reader, so a new format shows up here by itself
DONE_KEY = "import-done"
CANCELLED_KEY = "import-cancelled"


class StageBoard:
    """Live stage-by-stage progress (the `IngestOptions.progress` callback): one line per stage in a status box
    (count and time left), whatever the reader or build step reports, a bar for the stage in progress, and a
    Cancel button (a click reruns the page, which stops the import at its next report: the build is discarded)."""

    def __init__(self, label: str, name: str = "") -> None:
        self.box = st.status(label, expanded=True)
        self.cancel = self.box.empty()
        # The click starts the next run at once (fast reruns) while this one is stopped and discards its build:
        # the callback, which runs first in the next run, is what tells that run the import was cancelled.
        self.cancel.button("Cancel import", key="import-cancel", icon=":material/cancel:",
                           on_click=_cancelled, args=(name,))
        self.bar = self.box.progress(0.0)
        self.slots: dict[str, Any] = {}
        self.lines: dict[str, str] = {}
        self.clock = StageClock()
        self.started = time.perf_counter()

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.lines[stage] = self.clock.line(stage, done, total)
        if stage not in self.slots:
            self.slots[stage] = self.box.empty()
        self.slots[stage].markdown(md_literal(self.lines[stage]))
        self.bar.progress(min(1.0, done / total) if total else 0.0, text=md_literal(stage))

    def finish(self, ok: bool) -> list[str]:
        seconds = time.perf_counter() - self.started
        label = f"Imported in {seconds:.1f} s" if ok else f"Import failed after {seconds:.1f} s"
        self.cancel.empty()
        self.box.update(label=label, state="complete" if ok else "error", expanded=not ok)
        return list(self.lines.values())


def _cancelled(name: str) -> None:
    st.session_state[CANCELLED_KEY] = name


def relabel(text: str, where: tuple[Path, str] | None) -> str:
    """`text` with the temporary extraction folder replaced by the archive's name (members read as zip/path)."""
    if where is None:
        return text
    root, label = where
    for prefix in dict.fromkeys((str(root.resolve()), str(root))):
        text = text.replace(prefix, label)
    return text


def show_ingest_error(exc: RetrievalError, where: tuple[Path, str] | None = None) -> None:
    if isinstance(exc, IngestError):
        st.error(
            f"**Import failed** at {md_code(relabel(f'{exc.file}:{exc.line}', where))} · field {md_code(exc.field)}: "
            f"{md_literal(relabel(exc.reason, where))}. The previous graph stays live.",
            icon=":material/error:",
        )
    else:
        st.error(f"**Import failed:** {md_literal(relabel(str(exc), where))}", icon=":material/error:")


def run_ingest(
    cfg: Settings,
    path: Path,
    fmt: str,
    name: str,
    embedder: Embedder,
    *,
    mapping: dict[str, str] | None = None,
    shown_as: tuple[Path, str] | None = None,
    permit: Permit | None = None,
) -> None:
    """Parse, embed and build graph `name` with stage-by-stage progress, then rerun the page so the new graph is
    listed at once; errors are shown (archive member paths, never the temporary folder), not raised.

    `shown_as` = (temporary folder, archive name) maps extracted paths back to the archive's members. `permit`
    (importing `name`) is checked before anything is read, and the import it allowed is logged.
    """
    if not permitted(permit, name):
        return
    board = StageBoard(f"Importing {name}…", name)
    try:  # an import through the app: the name checked first, the graph held to KG_MAX_IMPORT_ITEMS
        options = IngestOptions(settings=cfg, progress=board, mapping=mapping or {})
        result = ingest(cfg, path, fmt=fmt, name=name, embedder=embedder, progress=False, options=options,
                        source=relabel(str(path), shown_as), web=True)
    except RetrievalError as exc:
        board.finish(False)
        show_ingest_error(exc, shown_as)
        return
    except BaseException as exc:  # any other click stops the import too (the build discarded on the way out)
        if not isinstance(exc, Exception):
            st.session_state.setdefault(CANCELLED_KEY, name)  # said on the page's next run
        raise
    if permit is not None:
        permit.record(f"version {result.version}{' (unchanged)' if result.unchanged else ''} from "
                      f"{relabel(str(path), shown_as)}")
    st.session_state[DONE_KEY] = {
        "name": result.name, "version": result.version, "unchanged": result.unchanged,
        "summary": relabel(result.summary(), shown_as), "warnings": [relabel(w, shown_as) for w in result.warnings],
        "stages": board.finish(True),
    }
    st.rerun()


def render_done() -> None:
    """The last import's outcome (kept across the rerun that lists the new graph) and a link to search it."""
    cancelled = st.session_state.pop(CANCELLED_KEY, None)
    if cancelled is not None:
        st.info(f"The import of **{md_literal(cancelled)}** was cancelled: nothing of it was kept, and the graphs "
                "are as they were.", icon=":material/cancel:")
    done = st.session_state.pop(DONE_KEY, None)  # shown once, on the run that follows the import
    if not done:
        return
    if done["unchanged"]:
        st.info(f"Graph **{md_literal(done['name'])}** is already up to date: version {md_code(done['version'])}.")
    else:
        st.success(md_literal(done["summary"]), icon=":material/check_circle:")
    for w in done["warnings"]:
        st.warning(md_literal(w))
    with st.expander("Import stages", icon=":material/checklist:"):
        st.markdown("  \n".join(md_literal(line) for line in done["stages"]))
    st.page_link("pages/search.py", label=f"Open {md_literal(done['name'])} in Search", icon=":material/search:",
                 query_params={"graph": done["name"]})


def mapping_inputs() -> dict[str, str]:
    """Attribute names for GraphML/CSV imports whose names differ from the defaults (empty = default)."""
    with st.expander("Attribute names (GraphML / CSV)", icon=":material/tune:"):
        st.caption("Leave empty to use the defaults (name/label/title, type/labels, description, type/label, "
                   "weight); see the README's mapping tables.")
        cols = st.columns(len(MAPPING_KEYS))
        values = {k: col.text_input(k.replace("_", " ").capitalize(), key=f"map-{k}")
                  for col, k in zip(cols, MAPPING_KEYS, strict=True)}
    return {k: v.strip() for k, v in values.items() if v.strip()}


def render_stats(stats: GraphStats) -> None:
    cols = st.columns(6)
    for col, (label, value) in zip(
        cols,
        (("Books", stats.books), ("Chapters", stats.chapters), ("Chunks", stats.chunks),
         ("Entities", stats.entities), ("Relations", stats.relations), ("Communities", stats.communities)),
        strict=True,
    ):
        col.metric(label, f"{value:,}", border=True)
    st.caption(
        f"**{md_literal(stats.name)}** · version {md_code(stats.version)} · built {md_literal(stats.created_at)} · "
        f"{md_literal(stats.graph_backend)} + {md_literal(stats.vector_backend)} · "
        f"embeddings {md_literal(stats.embed_model)}"
    )


def graphs_frame(data_dir: Path, names: list[str]) -> pd.DataFrame:
    """One row per graph `names` lists (those this user may open), from the manifests (no store is opened)."""
    active = catalog.active_name(data_dir)
    rows = []
    for name in names:
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
    """What the analyst chose: an uploaded .zip, or a folder on the server as typed (checked by the engine's
    `server_folder` against the import root when shown and again when imported)."""

    upload: UploadedFile | None = None
    folder: str = ""

    @property
    def hint(self) -> str:
        if self.upload is not None:
            return Path(self.upload.name).stem
        return Path(self.folder.strip()).name


def import_source(cfg: Settings) -> ImportSource:
    """The uploader, and (only with KG_IMPORT_ROOT set) a folder on the server inside the import root."""
    if cfg.import_root is None:  # no server folders at all: the box is not shown (and run_import refuses one)
        upload = st.file_uploader("A graph folder, zipped", type=["zip"], key="import-zip",
                                  max_upload_size=cfg.max_upload_mb)
        return ImportSource(upload=upload)
    # keyed and tracked, so the rerun after an import keeps the tab the analyst imported from
    upload_tab, path_tab = st.tabs(["Upload .zip", "Server folder"], key="import-tab", on_change="rerun")
    with upload_tab:
        upload = st.file_uploader("A graph folder, zipped", type=["zip"], key="import-zip",
                                  max_upload_size=cfg.max_upload_mb)
    with path_tab:
        server_path = st.text_input("Folder on the server", key="import-path", placeholder="team/my-bundle",
                                    help="A folder inside the import root set by the administrator (KG_IMPORT_ROOT); "
                                         "a path relative to it, or an absolute path inside it")
    if upload is not None:
        return ImportSource(upload=upload)
    if server_path:
        try:
            server_folder(cfg, server_path)
        except RetrievalError as exc:
            st.error(md_literal(exc), icon=":material/block:")
            return ImportSource()
        return ImportSource(folder=server_path)
    return ImportSource()


def run_import(
    cfg: Settings, source: ImportSource, fmt: str, name: str, embedder: Embedder, mapping: dict[str, str],
    permit: Permit | None = None,
) -> None:
    """Extract an upload safely into a temp dir (removed afterwards), or read the server folder (checked here
    again, on the server, whatever the page showed), then ingest; `permit` (importing `name`) is checked first."""
    if not permitted(permit, name):
        return
    if source.upload is None:
        if source.folder:
            try:
                folder = server_folder(cfg, source.folder)
            except RetrievalError as exc:
                st.error(f"**Import refused:** {md_literal(exc)}", icon=":material/block:")
                return
            run_ingest(cfg, folder, fmt, name, embedder, mapping=mapping, permit=permit)
        return
    with tempfile.TemporaryDirectory(prefix="kg-upload-") as tmp:
        try:
            folder = safe_extract_zip(source.upload, Path(tmp), cfg)
        except RetrievalError as exc:
            st.error(f"**Upload rejected:** {md_literal(exc)}", icon=":material/error:")
            return
        run_ingest(cfg, folder, fmt, name, embedder, mapping=mapping,
                   shown_as=(Path(tmp), source.upload.name), permit=permit)


def name_hint(hint: str) -> str:
    return default_name(Path(hint or "graph"))




def permitted(permit: Permit | None, name: str) -> bool:
    """Check an action on the server before it runs (a refusal is shown and logged); True when it may go on."""
    if permit is None:
        return True
    try:
        permit.check(name)
    except RetrievalError as exc:
        st.error(md_literal(exc), icon=":material/lock:")
        return False
    return True


def render_graph_actions(cfg: Settings, gate: Gate, names: list[str], pick_graph: Callable[[str], None],
                         team: bool) -> None:
    """Pick a graph, then: open it for yourself (team mode; the sidebar's picker does the same), make it active for
    everyone (the graph new sessions open with; this session switches to it too), delete it. Each button is drawn
    for every role (its tooltip says which role it needs); a click is checked on the server, and a refusal names
    the role and is logged."""
    pick = st.selectbox("Graph", names, index=None, placeholder="Choose a graph to activate", key="graph-pick")
    activate, delete = gate.permit("activate", graph=pick), gate.permit("delete", graph=pick)
    row = st.container(horizontal=True)
    if team and row.button("Open for me", disabled=pick is None, key="graph-open") and pick:
        pick_graph(pick)
        st.rerun()
    label = "Make active" if not team else "Make active for everyone"
    if row.button(label, disabled=pick is None, help=activate.refusal or "The graph new sessions open with (this "
                  "session switches to it too)", key="graph-activate") and pick and permitted(activate, pick):
        catalog.set_active(cfg.data_dir, pick)
        activate.record()
        pick_graph(pick)
        st.rerun()
    asked = st.session_state.get("graph-delete-ask")
    if row.button("Delete…", disabled=pick is None, help=delete.refusal or None,
                  icon=":material/delete:", key="graph-delete") and pick and permitted(delete, pick):
        st.session_state["graph-delete-ask"] = asked = pick
    if asked and asked == pick:
        render_delete_confirm(cfg, delete, pick)


def render_delete_confirm(cfg: Settings, delete: Permit, name: str) -> None:
    """The second step of deleting a graph: every version goes, for everyone."""
    st.warning(f"Delete graph **{md_literal(name)}** and every version of it, for everyone?", icon=":material/warning:")
    yes, no = st.columns(2)
    if yes.button("Delete graph", type="primary", icon=":material/delete_forever:", key="graph-delete-yes") \
            and permitted(delete, name):
        st.session_state.pop("graph-delete-ask", None)
        try:
            removed = delete_graph(cfg, name)
        except RetrievalError as exc:
            st.error(f"Cannot delete graph **{md_literal(name)}**: {md_literal(exc)}", icon=":material/error:")
            return
        delete.record(f"{len(removed)} version(s) removed")
        st.query_params.pop("graph", None)
        st.toast(f"Deleted graph {name}", icon=":material/delete:")
        st.rerun()
    if no.button("Cancel", key="graph-delete-no"):
        st.session_state.pop("graph-delete-ask", None)
        st.rerun()
