"""Format detection and loading: which registered format a folder holds, and its reader's validated GraphData;
the checks a web import passes first (a server folder only under the import root, the graph-size limit)."""

from __future__ import annotations

import os
from pathlib import Path

from retrieval.config import Settings
from retrieval.errors import IngestError, ValidationError, excerpt
from retrieval.ingest import FORMATS, IngestOptions, reader
from retrieval.models import GraphData

IMPORT_ROOT_RULE = ("only folders inside the import root (KG_IMPORT_ROOT) can be imported from the server; '..' "
                    "and links that lead outside it are refused")


def detect_format(path: Path) -> str:
    """The first registered format (`FORMATS`, in order) whose detector recognises the folder."""
    for fmt in FORMATS.names():
        if FORMATS.load(fmt).detect(path):
            return fmt
    raise IngestError(
        str(path), 0, "path",
        "no known format: expected a bundle (chunks.jsonl), HippoRAG output (openie_*.json), a GraphRAG output "
        "folder (entities.parquet), a LightRAG working dir (graph_chunk_entity_relation.graphml), nodes.csv + "
        "relationships.csv, one .graphml file, or a folder of documents (.txt, .md, .pdf, .epub)",
    )


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


def server_folder(settings: Settings, text: str) -> Path:
    """The folder on the server a web import may read: `text` (relative to KG_IMPORT_ROOT, or absolute) with
    links and '..' resolved, inside the import root, and holding no link that leads out of it.

    Without KG_IMPORT_ROOT no server folder can be imported. Errors name the rule, never the resolved path. The
    CLI reads any path its user names and does not call this.
    """
    if settings.import_root is None:
        raise ValidationError("importing a folder on the server is switched off (KG_IMPORT_ROOT is not set); "
                              "upload a .zip instead")
    try:
        root = settings.import_root.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise ValidationError("KG_IMPORT_ROOT does not name a folder on the server") from exc
    if not root.is_dir():
        raise ValidationError("KG_IMPORT_ROOT does not name a folder on the server")
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("name a folder inside the import root")
    if "\x00" in text:
        raise ValidationError("a folder name cannot hold a NUL character")
    try:
        folder = (root / text.strip()).resolve()  # an absolute path replaces the root: checked below like any
    except (OSError, RuntimeError) as exc:  # a link loop
        raise ValidationError(IMPORT_ROOT_RULE) from exc
    if not folder.is_relative_to(root):
        raise ValidationError(IMPORT_ROOT_RULE)
    if not folder.is_dir():
        raise ValidationError(f"no folder {excerpt(text.strip())} inside the import root")
    for here, dirs, files in os.walk(folder):  # links are not followed: each is checked where it is
        for name in (*dirs, *files):
            entry = Path(here) / name
            if entry.is_symlink():
                try:
                    inside = entry.resolve().is_relative_to(root)
                except (OSError, RuntimeError):
                    inside = False
                if not inside:
                    raise ValidationError(f"{IMPORT_ROOT_RULE} (the folder holds such a link: "
                                          f"{excerpt(str(entry.relative_to(folder)))})")
    return folder


def check_import_size(settings: Settings, data: GraphData) -> None:
    """A graph imported through the app holds at most KG_MAX_IMPORT_ITEMS entities + relations."""
    items = len(data.entities) + len(data.relations)
    if items > settings.max_import_items:
        raise ValidationError(f"the graph holds {len(data.entities):,} entities and {len(data.relations):,} "
                              f"relations; an import through the app takes at most {settings.max_import_items:,} "
                              f"(KG_MAX_IMPORT_ITEMS); import it with `python -m retrieval ingest`")
