"""Native bundle reader: a folder of JSONL files (docs/bundle-format.md) -> validated GraphData."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

from retrieval.errors import IngestError, excerpt
from retrieval.ingest import Format, IngestOptions
from retrieval.models import Chunk, Entity, GraphData, Relation

MAX_ID_LEN = 512  # bytes of UTF-8 (Milvus primary-key limit); normalised HippoRAG ids are ASCII
MAX_TEXT_BYTES = 65_535  # bytes of UTF-8 in one stored string (Milvus VARCHAR limit)
# A JSON bomb is refused before it costs memory or time: a line is read at most this far, and nested
# values (properties) at most this deep (orjson, used by the FalkorDB store, stops at 255 levels).
MAX_LINE_BYTES = 8 * 1024 * 1024
MAX_NESTING = 64


def relation_id(source_id: str, relation_type: str, target_id: str) -> str:
    """Default relation id: a short, stable hash of (source, type, target)."""
    key = "\x1f".join((source_id, relation_type, target_id)).encode("utf-8")
    return "r:" + hashlib.sha256(key).hexdigest()[:16]


def check_text(value: str, file: str, line: int, field: str) -> str:
    """Reject strings no back end can store (NUL, lone surrogates); others pass unchanged."""
    if "\x00" in value:
        raise IngestError(file, line, field, "contains a NUL character")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise IngestError(file, line, field, "contains a lone surrogate (not valid Unicode)") from exc
    if size > MAX_TEXT_BYTES:
        raise IngestError(file, line, field, f"{size} bytes of UTF-8; at most {MAX_TEXT_BYTES} can be stored")
    return value


def check_name(value: str, file: str, line: int, field: str, limit: int) -> str:
    """A name, type, relation type or attribute name: check_text, and at most `limit` characters
    (KG_MAX_NAME_CHARS); the error quotes the first 200."""
    if len(value) > limit:
        raise IngestError(file, line, field, f"{len(value):,} characters; a name is at most {limit:,} "
                                             f"(KG_MAX_NAME_CHARS): {excerpt(value)}")
    return check_text(value, file, line, field)


def id_too_long(value: str) -> bool:
    return len(value.encode("utf-8")) > MAX_ID_LEN


def check_entity_size(ln: Line, name: str, description: str, field: str = "description") -> None:
    """The Entities collection stores "name: description" as one string: refuse what it cannot hold."""
    if len(name.encode("utf-8")) + len(description.encode("utf-8")) + 2 > MAX_TEXT_BYTES:
        raise ln.fail(field, f"name + description exceed the {MAX_TEXT_BYTES} bytes that can be stored")


def merge_chunks(*groups: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Union of chunk-id lists, first-seen order."""
    return tuple(dict.fromkeys(c for group in groups for c in group))


@dataclass
class Line:
    """One record of an input file (a JSONL line, a Parquet or CSV row): typed field reads that fail as
    `file:line: field: reason`."""

    file: str
    line: int
    obj: dict[str, Any]

    def fail(self, field: str, reason: str) -> IngestError:
        return IngestError(self.file, self.line, field, reason)

    def _present(self, field: str, required: bool) -> bool:
        if field in self.obj and self.obj[field] is not None:
            return True
        if required:
            raise self.fail(field, "missing required field")
        return False

    def text(self, field: str, *, required: bool = False, default: str = "", nonempty: bool = False) -> str:
        if not self._present(field, required):
            return default
        value = self.obj[field]
        if not isinstance(value, str):
            raise self.fail(field, f"expected a string, got {_kind(value)}")
        if nonempty and value == "":
            raise self.fail(field, "must not be empty")
        return check_text(value, self.file, self.line, field)

    def ident(self, field: str, *, required: bool = True, default: str = "") -> str:
        value = self.text(field, required=required, default=default, nonempty=True)
        if id_too_long(value):
            raise self.fail(field, f"id longer than {MAX_ID_LEN} bytes of UTF-8")
        return value

    def text_list(self, field: str, *, ids: bool = False) -> list[str]:
        if not self._present(field, False):
            return []
        value = self.obj[field]
        if not isinstance(value, list):
            raise self.fail(field, f"expected a list of strings, got {_kind(value)}")
        out = []
        for i, item in enumerate(value):
            name = f"{field}[{i}]"
            if not isinstance(item, str):
                raise self.fail(name, f"expected a string, got {_kind(item)}")
            if ids and (item == "" or id_too_long(item)):
                raise self.fail(name, f"ids are non-empty strings of at most {MAX_ID_LEN} bytes of UTF-8")
            out.append(check_text(item, self.file, self.line, name))
        return out

    def number(self, field: str, default: float) -> float:
        if not self._present(field, False):
            return default
        value = self.obj[field]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(field, f"expected a number, got {_kind(value)}")
        if not math.isfinite(value):
            raise self.fail(field, "must be a finite number")
        return float(value)

    def position(self, field: str) -> int | None:
        if not self._present(field, False):
            return None
        value = self.obj[field]
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(field, f"expected an integer, got {_kind(value)}")
        if value < 0:
            raise self.fail(field, "must be >= 0")
        return value

    def timestamp(self, field: str) -> str | None:
        if not self._present(field, False):
            return None
        value = self.text(field)
        try:
            datetime.fromisoformat(value)
        except ValueError:
            try:
                date.fromisoformat(value)
            except ValueError as exc:
                raise self.fail(field, f"not an ISO-8601 date or time: {excerpt(value)}") from exc
        return value

    def name(self, field: str, max_name: int, **kwargs: Any) -> str:
        """A name, type or relation type: `text`, and at most `max_name` characters (KG_MAX_NAME_CHARS)."""
        return check_name(self.text(field, **kwargs), self.file, self.line, field, max_name)

    def properties(self, field: str, max_name: int) -> dict[str, Any]:
        if not self._present(field, False):
            return {}
        value = self.obj[field]
        if not isinstance(value, dict):
            raise self.fail(field, f"expected an object, got {_kind(value)}")
        _check_nested(value, self, field, max_name)
        return value

    def no_unknown(self, allowed: frozenset[str]) -> None:
        for key in self.obj:
            if key not in allowed:
                raise self.fail(key, f"unknown field (allowed: {', '.join(sorted(allowed))})")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _check_nested(value: Any, at: Line, field: str, max_name: int, depth: int = 1) -> None:
    if depth > MAX_NESTING:
        raise at.fail(field, f"nested more than {MAX_NESTING} levels deep")
    if isinstance(value, str):
        check_text(value, at.file, at.line, field)
    elif isinstance(value, dict):
        for k, v in value.items():
            check_name(k, at.file, at.line, f"{field}.{k}", max_name)  # a property key is an attribute name
            _check_nested(v, at, f"{field}.{k}", max_name, depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if not isinstance(v, int):  # ints (and booleans) need no check: skip the call for long int arrays
                _check_nested(v, at, f"{field}[{i}]", max_name, depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise at.fail(field, "must be a finite number")


def _lines(path: Path, *, required: bool) -> Iterator[Line]:
    """Yield one parsed JSON object per non-blank line (line numbers are 1-based)."""
    file = str(path)
    if not path.is_file():
        if required:
            raise IngestError(file, 0, "file", "required file is missing")
        return
    with path.open("rb") as fh:
        # readline with a limit: an over-long line is refused after MAX_LINE_BYTES, never read whole
        for number, raw in enumerate(iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_LINE_BYTES:
                raise IngestError(file, number, "line", f"longer than {MAX_LINE_BYTES} bytes")
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise IngestError(file, number, "encoding", f"not valid UTF-8 at byte {exc.start}") from exc
            if not text.strip():
                continue
            try:
                obj = json.loads(text, parse_constant=_reject_constant)
            except ValueError as exc:
                raise IngestError(file, number, "json", str(exc)) from exc
            except RecursionError as exc:
                raise IngestError(file, number, "json", f"nested too deeply (at most {MAX_NESTING} levels)") from exc
            if not isinstance(obj, dict):
                raise IngestError(file, number, "line", f"expected a JSON object, got {_kind(obj)}")
            yield Line(file, number, obj)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


DOC_FIELDS = frozenset({"title", "author", "description"})
CHUNK_FIELDS = frozenset({"id", "text", "original_document", "chapter", "author", "position", "source"})
ENTITY_FIELDS = frozenset({"id", "name", "type", "description", "aliases", "properties", "source_chunks"})
RELATION_FIELDS = frozenset(
    {"id", "source_id", "target_id", "relation_type", "description", "source_chunks", "weight", "valid_at",
     "invalid_at"}
)


def _read_documents(root: Path) -> dict[str, str] | None:
    path = root / "documents.jsonl"
    if not path.is_file():
        return None
    authors: dict[str, str] = {}
    for ln in _lines(path, required=False):
        ln.no_unknown(DOC_FIELDS)
        title = ln.text("title", required=True, nonempty=True)
        ln.text("description")
        if title in authors:
            raise ln.fail("title", f"duplicate book title {excerpt(title)}")
        authors[title] = ln.text("author")
    return authors


def _read_chunks(root: Path, authors: dict[str, str] | None) -> tuple[list[Chunk], dict[str, int]]:
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    per_book: dict[str, int] = {}
    for ln in _lines(root / "chunks.jsonl", required=True):
        ln.no_unknown(CHUNK_FIELDS)
        cid = ln.ident("id")
        if cid in seen:
            raise ln.fail("id", f"duplicate chunk id {excerpt(cid)} (first on line {seen[cid]})")
        seen[cid] = ln.line
        text = ln.text("text", required=True)
        book = ln.text("original_document", required=True, nonempty=True)
        if authors is not None and book not in authors:
            raise ln.fail("original_document", f"unknown book {excerpt(book)} (not in documents.jsonl)")
        position = ln.position("position")
        order = per_book.get(book, 0)
        per_book[book] = order + 1
        chunks.append(
            Chunk(
                id=cid,
                text=text,
                source=ln.text("source", default=cid),
                original_document=book,
                chapter=ln.text("chapter"),
                author=ln.text("author", default=(authors or {}).get(book, "")),
                # without an explicit position, a chunk's order within its book in the file
                position=order if position is None else position,
            )
        )
    return chunks, seen


def _check_refs(ln: Line, field: str, ids: list[str], known: dict[str, int], what: str) -> None:
    for i, ref in enumerate(ids):
        if ref not in known:
            raise ln.fail(f"{field}[{i}]", f"unknown {what} id {excerpt(ref)}")


def detect(path: Path) -> bool:
    """Whether `path` holds a KG Lens bundle: `chunks.jsonl`."""
    return (path / "chunks.jsonl").is_file()


def load_bundle(path: str | Path, options: IngestOptions | None = None) -> GraphData:
    """Read and validate a native bundle; any malformed line raises IngestError(file, line, field, reason)."""
    max_name = (options or IngestOptions()).max_name_chars
    root = Path(path)
    if not root.is_dir():
        raise IngestError(str(root), 0, "path", "not a directory (a bundle is a folder of JSONL files)")
    authors = _read_documents(root)
    chunks, chunk_lines = _read_chunks(root, authors)

    entities: list[tuple[Line, dict[str, Any]]] = []
    entity_lines: dict[str, int] = {}
    for ln in _lines(root / "entities.jsonl", required=True):
        ln.no_unknown(ENTITY_FIELDS)
        eid = ln.ident("id")
        if eid in entity_lines:
            raise ln.fail("id", f"duplicate entity id {excerpt(eid)} (first on line {entity_lines[eid]})")
        entity_lines[eid] = ln.line
        own_chunks = ln.text_list("source_chunks", ids=True)
        _check_refs(ln, "source_chunks", own_chunks, chunk_lines, "chunk")
        name = ln.name("name", max_name, required=True)
        description = ln.text("description")
        check_entity_size(ln, name, description)
        fields = {
            "id": eid,
            "name": name,
            "type": ln.name("type", max_name, default="entity", nonempty=True),
            "description": description,
            "aliases": tuple(check_name(a, ln.file, ln.line, "aliases", max_name) for a in ln.text_list("aliases")),
            "properties": ln.properties("properties", max_name),
            "source_chunks": tuple(own_chunks),
        }
        entities.append((ln, fields))

    relations: list[Relation] = []
    relation_lines: dict[str, int] = {}
    for ln in _lines(root / "relations.jsonl", required=True):
        ln.no_unknown(RELATION_FIELDS)
        src = ln.ident("source_id")
        dst = ln.ident("target_id")
        for field, ref in (("source_id", src), ("target_id", dst)):
            if ref not in entity_lines:
                raise ln.fail(field, f"unknown entity id {excerpt(ref)}")
        rtype = ln.name("relation_type", max_name, required=True, nonempty=True)
        rchunks = ln.text_list("source_chunks", ids=True)
        if not rchunks:
            raise ln.fail("source_chunks", "a relation needs at least one source chunk")
        _check_refs(ln, "source_chunks", rchunks, chunk_lines, "chunk")
        rid = ln.ident("id", required=False, default=relation_id(src, rtype, dst))
        if rid in relation_lines:
            raise ln.fail("id", f"duplicate relation id {excerpt(rid)} (first on line {relation_lines[rid]})")
        relation_lines[rid] = ln.line
        relations.append(
            Relation(
                id=rid,
                source_id=src,
                target_id=dst,
                relation_type=rtype,
                description=ln.text("description"),
                weight=ln.number("weight", 1.0),
                vector_db_ref_id=rid,
                source_chunks=tuple(rchunks),
                valid_at=ln.timestamp("valid_at"),
                invalid_at=ln.timestamp("invalid_at"),
            )
        )

    # An entity is mentioned wherever its relations were extracted from (node specificity uses this).
    mentioned: dict[str, list[str]] = {}
    for rel in relations:
        mentioned.setdefault(rel.source_id, []).extend(rel.source_chunks)
        mentioned.setdefault(rel.target_id, []).extend(rel.source_chunks)
    out_entities = [
        Entity(**{**fields, "source_chunks": merge_chunks(fields["source_chunks"], mentioned.get(fields["id"], []))})
        for _, fields in entities
    ]
    return GraphData(entities=tuple(out_entities), relations=tuple(relations), chunks=tuple(chunks))


FORMAT = Format(detect, load_bundle)
