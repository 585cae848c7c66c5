"""Data page: add documents to the opened graph, or remove one, as curation changesets with live progress."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import streamlit as st

from components.ingest_panel import StageBoard, relabel
from retrieval.config import Settings
from retrieval.curation.ops import Changeset
from retrieval.errors import RetrievalError
from retrieval.ingest.archive import safe_extract_zip
from retrieval.ingest.load import server_folder
from ui_text import md_literal

Progress = Callable[[str, int, int], None]
AddFn = Callable[[Path, Progress], tuple[Changeset, tuple[str, ...]]]
RemoveFn = Callable[[str, Progress], Changeset]


def _outcome(board: StageBoard, run: Callable[[], Changeset], shown_as: tuple[Path, str] | None = None) -> None:
    try:
        cs = run()
    except RetrievalError as exc:
        board.finish(False)
        st.error(f"**Not changed:** {md_literal(relabel(str(exc), shown_as))}", icon=":material/error:")
        return
    board.finish(True)
    st.session_state["documents-done"] = cs.summary()
    st.rerun()


def render_documents(cfg: Settings, add: AddFn, remove: RemoveFn, books: Sequence[str]) -> None:
    """Add the .txt/.md/.pdf/.epub files of an upload or (only with KG_IMPORT_ROOT set) a folder inside the import
    root (only their chunks are extracted and embedded), or remove one book with what no other chunk supports; both
    are undoable changesets. The upload and the folder are checked as a graph import's are."""
    done = st.session_state.pop("documents-done", None)
    if done:
        st.success(md_literal(done), icon=":material/check_circle:")
    server = ""
    if cfg.import_root is None:  # no server folders at all
        upload = st.file_uploader("Documents, zipped", type=["zip"], key="docs-zip", max_upload_size=cfg.max_upload_mb)
    else:
        upload_tab, path_tab = st.tabs(["Upload .zip", "Server folder"])
        with upload_tab:
            upload = st.file_uploader("Documents, zipped", type=["zip"], key="docs-zip",
                                      max_upload_size=cfg.max_upload_mb)
        with path_tab:
            server = st.text_input("Folder on the server", key="docs-path", placeholder="team/new-chapters",
                                   help="A folder inside the import root set by the administrator (KG_IMPORT_ROOT)")
    if st.button("Add documents", icon=":material/note_add:", disabled=upload is None and not server, key="docs-add"):
        warnings: list[str] = []

        def run(folder: Path, board: StageBoard) -> Changeset:
            cs, warns = add(folder, board)
            warnings.extend(warns)
            return cs

        board = StageBoard("Adding documents…")
        if upload is not None:
            with tempfile.TemporaryDirectory(prefix="kg-docs-") as tmp:
                try:
                    folder = safe_extract_zip(upload, Path(tmp), cfg)
                except RetrievalError as exc:
                    board.finish(False)
                    st.error(f"**Upload rejected:** {md_literal(exc)}", icon=":material/error:")
                    return
                _outcome(board, lambda: run(folder, board), (Path(tmp), upload.name))
        else:
            try:
                folder = server_folder(cfg, server)
            except RetrievalError as exc:
                board.finish(False)
                st.error(md_literal(exc), icon=":material/error:")
                return
            _outcome(board, lambda: run(folder, board))
    picked = st.selectbox("Document to remove", list(books), index=None, key="docs-remove-pick",
                          placeholder="Choose a book", accept_new_options=True)
    book = picked.strip() if isinstance(picked, str) else None
    if st.button("Remove document", disabled=not book, icon=":material/delete:", key="docs-remove") and book:
        board = StageBoard(f"Removing {book}…")
        _outcome(board, lambda: remove(book, board))
