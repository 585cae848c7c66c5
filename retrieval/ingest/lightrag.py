"""LightRAG working directory -> GraphData: `graph_chunk_entity_relation.graphml` + `kv_store_text_chunks.json`
(+ `kv_store_full_docs.json` / `kv_store_doc_status.json` when present). Layout as lightrag-hku 1.5 writes it.

LightRAG joins merged values with `<SEP>`: an entity's or edge's descriptions become one description (one per
line), its `source_id` the chunk ids it cites, its `file_path` the documents. An edge has no type but
comma-separated `keywords`: every relation is `RELATED_TO` and its keywords close its description
(`Keywords: a, b`). A chunk's book is its document's file path, or the document id where LightRAG recorded only
a placeholder (`unknown_source`, `custom_kg` from `insert_custom_kg`), said once in the import's warnings; its
chapter is the heading in force where it starts in its document (`headings.chapters`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from retrieval.errors import IngestError, excerpt
from retrieval.ingest import Format, IngestOptions
from retrieval.ingest.books import untitled_note
from retrieval.ingest.bundle import (
    MAX_NESTING,
    Line,
    check_entity_size,
    check_name,
    check_text,
    id_too_long,
    relation_id,
)
from retrieval.ingest.graphml import ParsedGraphML, dropped_note, parse_graphml
from retrieval.ingest.headings import chapters
from retrieval.models import Chunk, Entity, GraphData, Relation

GRAPH = "graph_chunk_entity_relation.graphml"
CHUNKS = "kv_store_text_chunks.json"
FULL_DOCS = "kv_store_full_docs.json"
DOC_STATUS = "kv_store_doc_status.json"
SEP = "<SEP>"
RELATION_TYPE = "RELATED_TO"
PLACEHOLDERS = {"", "unknown_source", "no-file-path", "custom_kg"}  # LightRAG's own placeholders for "no file"
_ENTITY_ATTRS = {"entity_id", "entity_type", "description", "source_id", "file_path"}
_EDGE_ATTRS = {"weight", "description", "keywords", "source_id"}


def _split(value: str) -> list[str]:
    return [part for part in value.split(SEP) if part]


def _keywords(value: str) -> list[str]:
    return list(dict.fromkeys(k.strip() for part in _split(value) for k in part.split(",") if k.strip()))


def _json(path: Path, required: bool) -> tuple[dict[str, Any], dict[str, int]]:
    """The store's records by key, and the line each key is on, whatever the file's layout (indented as LightRAG
    writes it, compact on one line, or anything between)."""
    file = str(path)
    if not path.is_file():
        if required:
            raise IngestError(file, 0, "file", "required file is missing")
        return {}, {}
    try:
        return _records_by_key(path.read_text(encoding="utf-8"), file)
    except UnicodeDecodeError as exc:
        raise IngestError(file, 0, "encoding", f"not valid UTF-8 at byte {exc.start}") from exc
    except json.JSONDecodeError as exc:
        raise IngestError(file, exc.lineno, "json", exc.msg) from exc
    except RecursionError as exc:
        raise IngestError(file, 0, "json", f"nested too deeply (at most {MAX_NESTING} levels)") from exc


_WS = re.compile(r"[ \t\n\r]*")


def _records_by_key(text: str, file: str) -> tuple[dict[str, Any], dict[str, int]]:
    """Parse a top-level JSON object one member at a time (json's own string and value decoders), noting the
    line of each key: a scan for indented keys found none in a compact file, and reported line 0."""
    decoder = json.JSONDecoder()
    pos = _WS.match(text).end()  # type: ignore[union-attr]  # the pattern matches the empty string
    if not text.startswith("{", pos):
        if text.strip():
            json.loads(text)  # the decoder's own message for what is not JSON
        raise IngestError(file, 1, "(root)", "expected an object of id -> record")
    doc: dict[str, Any] = {}
    lines: dict[str, int] = {}
    line, counted = 1, 0
    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    closing = text.startswith("}", pos)
    while not closing:
        if not text.startswith('"', pos):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, pos)
        line, counted = line + text.count("\n", counted, pos), pos  # counted once: linear in the file
        key, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if not text.startswith(":", pos):
            raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
        doc[key], pos = decoder.raw_decode(text, _WS.match(text, pos + 1).end())  # type: ignore[union-attr]
        lines[key] = line  # the last of a repeated key wins, as in json.loads
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if text.startswith(",", pos):
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        elif text.startswith("}", pos):
            closing = True
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
    if text[pos + 1:].strip(" \t\n\r"):
        raise json.JSONDecodeError("Extra data", text, pos + 1)
    return doc, lines


def _record(file: str, key: str, value: Any, lines: dict[str, int]) -> Line:
    ln = Line(file, lines.get(key, 0), value if isinstance(value, dict) else {})
    if not isinstance(value, dict):
        raise ln.fail(key, "expected an object")
    return ln


def _documents(root: Path) -> dict[str, tuple[str, str | None]]:
    """doc id -> (file path or '', full text or None) from the full-docs and doc-status stores."""
    out: dict[str, tuple[str, str | None]] = {}
    for name in (DOC_STATUS, FULL_DOCS):
        file = str(root / name)
        records, lines = _json(root / name, required=False)
        for did, value in records.items():
            ln = _record(file, did, value, lines)
            path, text = out.get(did, ("", None))
            path = ln.text("file_path") or path
            if name == FULL_DOCS:
                content = ln.obj.get("content")
                text = content if isinstance(content, str) else None
            out[did] = (path, text)
    return out


def _chunks(root: Path, options: IngestOptions, warnings: list[str]) -> list[Chunk]:
    file = str(root / CHUNKS)
    raw, lines = _json(root / CHUNKS, required=True)
    docs = _documents(root)
    options.report(f"reading {CHUNKS}", len(raw), len(raw))
    per_doc: dict[str, list[tuple[int, str, str, str]]] = defaultdict(list)
    for cid, value in raw.items():
        ln = _record(file, cid, value, lines)
        check_text(cid, file, ln.line, "(key)")
        text = ln.text("content", required=True)
        order = ln.obj.get("chunk_order_index", 0)
        if isinstance(order, bool) or not isinstance(order, int):
            raise ln.fail("chunk_order_index", "expected an integer")
        doc = ln.text("full_doc_id") or cid
        per_doc[doc].append((order, cid, text, ln.text("file_path")))
    out: list[Chunk] = []
    untitled: list[str] = []
    for did, rows in per_doc.items():
        rows.sort(key=lambda r: (r[0], r[1]))
        doc_path, doc_text = docs.get(did, ("", None))
        names = chapters(doc_text, [r[2] for r in rows])
        for position, ((_, cid, text, own_path), chapter) in enumerate(zip(rows, names, strict=True)):
            path = own_path if own_path not in PLACEHOLDERS else doc_path
            book = path if path not in PLACEHOLDERS else did
            if book == did and did not in untitled:
                untitled.append(did)
            out.append(Chunk(id=cid, text=text, source=cid, original_document=book, chapter=chapter,
                             position=position))
    if untitled:
        warnings.append(untitled_note(untitled, f"LightRAG recorded no file path, only a placeholder such as "
                                                f"{', '.join(sorted(PLACEHOLDERS - {''}))}"))
    return out


def _description(ln: Line, extra: str = "") -> str:
    parts = _split(ln.text("description"))
    return "\n".join(parts + ([extra] if extra else []))


def _sources(ln: Line, known: set[str], unknown: list[int]) -> tuple[str, ...]:
    refs = list(dict.fromkeys(_split(ln.text("source_id"))))
    kept = tuple(r for r in refs if r in known)
    unknown[0] += len(refs) - len(kept)
    return kept


def _entity_id(node_id: str) -> str:
    """LightRAG names a node by its entity name; a name past the id limit gets a stable hashed id."""
    return node_id if not id_too_long(node_id) else "lightrag:" + hashlib.sha256(node_id.encode()).hexdigest()[:24]


def _graph(parsed: ParsedGraphML, file: str, known: set[str],
           max_name: int) -> tuple[list[Entity], list[Relation], list[str]]:
    unknown = [0]
    entities: dict[str, Entity] = {}
    for node in parsed.nodes:
        ln = Line(file, node.line, node.attrs)
        check_name(node.id, file, node.line, "node.id", max_name)  # LightRAG names a node by its entity name
        name = ln.name("entity_id", max_name) or node.id
        description = _description(ln)
        check_entity_size(ln, name, description)
        files = [f for f in _split(ln.text("file_path")) if f not in PLACEHOLDERS]
        properties = {k: v for k, v in node.attrs.items() if k not in _ENTITY_ATTRS}
        if files:
            properties["file_path"] = files
        entities[node.id] = Entity(id=_entity_id(node.id), name=name,
                                   type=ln.name("entity_type", max_name) or "UNKNOWN", description=description,
                                   properties=properties, source_chunks=_sources(ln, known, unknown))
    relations: list[Relation] = []
    dropped: Counter[str] = Counter()
    for edge in parsed.edges:
        ln = Line(file, edge.line, edge.attrs)
        dropped.update(k for k in edge.attrs if k not in _EDGE_ATTRS)
        for end, ref in (("source", edge.source), ("target", edge.target)):
            if ref not in entities:
                raise ln.fail(f"edge.{end}", f"unknown node {excerpt(ref)}")
        keywords = _keywords(ln.text("keywords"))
        description = _description(ln, f"Keywords: {', '.join(keywords)}" if keywords else "")
        check_text(description, file, edge.line, "description")
        src, dst = entities[edge.source].id, entities[edge.target].id
        rid = edge.id or relation_id(src, RELATION_TYPE, dst)
        relations.append(Relation(
            id=rid, source_id=src, target_id=dst, relation_type=RELATION_TYPE,
            description=description, weight=ln.number("weight", 1.0), vector_db_ref_id=rid,
            source_chunks=_sources(ln, known, unknown),
        ))
    warnings = dropped_note(file, dropped)
    if unknown[0]:
        warnings.append(f"{file}: {unknown[0]} source chunk ids are not in {CHUNKS}; left out")
    return list(entities.values()), relations, warnings


def detect(path: Path) -> bool:
    """Whether `path` holds a LightRAG working dir: `graph_chunk_entity_relation.graphml`."""
    return (path / "graph_chunk_entity_relation.graphml").is_file()


def load_lightrag(path: str | Path, options: IngestOptions | None = None) -> GraphData:
    """A LightRAG working directory as GraphData (chunks with books and chapters, entities, relations)."""
    options = options or IngestOptions()
    root = Path(path)
    if not root.is_dir():
        raise IngestError(str(root), 0, "path", "not a directory (a LightRAG working directory)")
    graph_file = root / GRAPH
    if not graph_file.is_file():
        raise IngestError(str(graph_file), 0, "file", "required file is missing")
    notes: list[str] = []
    chunks = _chunks(root, options, notes)
    options.report(f"reading {GRAPH}", 0, 1)
    parsed = parse_graphml(graph_file, options.max_name_chars)
    options.report(f"reading {GRAPH}", 1, 1)
    entities, relations, warnings = _graph(parsed, str(graph_file), {c.id for c in chunks},
                                            options.max_name_chars)
    warnings = [*notes, *warnings]
    return GraphData(entities=tuple(entities), relations=tuple(relations), chunks=tuple(chunks),
                     warnings=tuple(warnings))


FORMAT = Format(detect, load_lightrag)
