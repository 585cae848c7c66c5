"""Format detection and loading: which registered format a folder holds, and its reader's validated GraphData."""

from __future__ import annotations

from pathlib import Path

from retrieval.errors import IngestError
from retrieval.ingest import FORMATS, IngestOptions, reader
from retrieval.models import GraphData


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
