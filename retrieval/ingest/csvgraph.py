"""`nodes.csv` + `relationships.csv` with Neo4j admin-import headers -> GraphData, without chunks.

Headers as `neo4j-admin database import` reads them: `name:ID(Space)` / `:ID`, `:LABEL` (labels split on `;`),
`:START_ID(Space)`, `:END_ID(Space)`, `:TYPE`, `:IGNORE`, and typed properties `name:int|long|float|double|
boolean|string|...`, with `[]` for arrays split on `;`. UTF-8 (a BOM is allowed), comma-separated, RFC 4180
quoting. Errors read `file:line: column: reason` (the line a record starts on).

Mapping (overridable like GraphML's, `IngestOptions.mapping`): name = the first of NAME_COLUMNS present (else the
id), type = the first `:LABEL` label (all labels kept in `properties["labels"]`; else a `type` column; else
`entity`), description = `description`; a relationship's type is `:TYPE`, else a mapped column, else
`RELATED_TO`. Other columns become properties, typed by their header.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval.errors import IngestError, excerpt
from retrieval.ingest import Format, IngestOptions
from retrieval.ingest.bundle import (
    MAX_ID_LEN,
    Line,
    check_entity_size,
    check_name,
    check_text,
    id_too_long,
    relation_id,
)
from retrieval.ingest.graphml import MAPPING_KEYS, MISSING_TYPE, RELATION_TYPE, dropped_note, weight_of
from retrieval.models import Entity, GraphData, Relation

NODES = "nodes.csv"
RELATIONSHIPS = "relationships.csv"
NAME_COLUMNS = ("name", "title", "label", "Name", "Title")
TYPE_COLUMNS = ("type", "entity_type", "category")
DESCRIPTION_COLUMNS = ("description", "desc")
WEIGHT_COLUMNS = ("weight", "Weight")
ARRAY_SEP = ";"
_INTS = {"int", "long", "short", "byte"}
_FLOATS = {"float", "double"}
_TEXT = {"string", "char", "point", "date", "localtime", "time", "localdatetime", "datetime", "duration"}


@dataclass(frozen=True)
class Column:
    """One header field: property name, role (ID, LABEL, START_ID, END_ID, TYPE, IGNORE or '' for a property),
    id space, value type and whether it is an array."""

    header: str
    name: str
    role: str = ""
    space: str = ""
    kind: str = "string"
    array: bool = False


def parse_header(file: str, fields: list[str], max_name: int) -> list[Column]:
    """Neo4j admin-import header fields as columns; an unknown type or an over-long name is refused with the
    column named."""
    out = []
    for raw in fields:
        check_name(raw, file, 1, "header", max_name)
        name, _, spec = raw.partition(":")
        spec = spec.strip()
        role, space, kind, array = "", "", "string", False
        head = spec.split("(", 1)[0].upper()
        if head in ("ID", "START_ID", "END_ID"):
            role = head
            if "(" in spec:
                space = spec.split("(", 1)[1].rstrip(")")
        elif head in ("LABEL", "TYPE", "IGNORE"):
            role = head
        elif spec:
            kind = spec.split("{", 1)[0].lower()
            if kind.endswith("[]"):
                kind, array = kind[:-2], True
            if kind not in _INTS | _FLOATS | _TEXT | {"boolean"}:
                raise IngestError(file, 1, raw, f"unknown type {excerpt(spec)}")
        out.append(Column(raw, name.strip(), role, space, kind, array))
    return out


def _records(path: Path, max_name: int) -> Iterator[tuple[int, list[Column], list[str]]]:
    """(start line, header columns, fields) of each record after the header; IngestError with the line.

    RFC 4180 strictly: a quote that is never closed is refused with the line its record starts on (the lenient
    reader took the rest of the file as one field), as is text after a closing quote."""
    file = str(path)
    if not path.is_file():
        raise IngestError(file, 0, "file", "required file is missing")
    start = 1
    try:
        with path.open("r", encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh, strict=True)
            try:
                header = next(reader)
            except StopIteration:
                raise IngestError(file, 1, "header", "empty file: expected a header line") from None
            columns = parse_header(file, header, max_name)
            start = reader.line_num + 1
            for fields in reader:
                if fields and any(fields):
                    if len(fields) != len(columns):
                        raise IngestError(file, start, "record",
                                          f"{len(fields)} fields but the header has {len(columns)}")
                    yield start, columns, fields
                start = reader.line_num + 1
    except UnicodeDecodeError as exc:
        raise IngestError(file, 0, "encoding", f"not valid UTF-8 at byte {exc.start}") from exc
    except csv.Error as exc:  # a field past csv's size limit, a quote never closed, text after a closing quote
        why = str(exc)
        if "unexpected end of data" in why:
            why = "a quoted field opened in this record is never closed (unterminated quote)"
        elif "expected after" in why:
            why = (f"a quote in this record is followed by text ({why}): an unterminated quote that ran on to a "
                   "later one, or a quote inside a field that is not doubled")
        raise IngestError(file, start, "csv", why) from exc


def _value(ln: Line, col: Column, raw: str) -> Any:
    """A property value typed by its header; None for an empty field (no property: rows of several labels
    share one header, so an empty field means the row has no such property)."""
    if raw == "":
        return None
    parts = raw.split(ARRAY_SEP) if col.array else [raw]
    out: list[Any] = []
    for part in parts:
        try:
            if col.kind in _INTS:
                out.append(int(part.strip()))
            elif col.kind in _FLOATS:
                value = float(part.strip())
                if not math.isfinite(value):
                    raise ln.fail(col.header, "must be a finite number")
                out.append(value)
            elif col.kind == "boolean":
                out.append({"true": True, "false": False}[part.strip().lower()])
            else:
                out.append(check_text(part, ln.file, ln.line, col.header))
        except (ValueError, KeyError) as exc:
            raise ln.fail(col.header, f"expected {col.kind}, got {part[:40]!r}") from exc
    return out if col.array else out[0]


def _pick(columns: list[Column], mapping: Mapping[str, str], role: str, names: tuple[str, ...]) -> str | None:
    """The column playing `role` in this row: the mapped one, else the first default the row has a value in."""
    props = [c.name for c in columns if not c.role and c.name]
    if role in mapping:
        return mapping[role]
    return next((n for n in names if n in props), None)


@dataclass
class _Row:
    ln: Line
    props: dict[str, Any]
    special: dict[str, tuple[Column, str]]


def _rows(path: Path, max_name: int) -> Iterator[_Row]:
    file = str(path)
    for line, columns, fields in _records(path, max_name):
        ln = Line(file, line, {})
        props: dict[str, Any] = {}
        special: dict[str, tuple[Column, str]] = {}
        for col, raw in zip(columns, fields, strict=True):
            if col.role == "IGNORE":
                continue
            if col.role:
                named = col.role in ("LABEL", "TYPE")  # a type: at most max_name characters
                special[col.role] = (col, check_name(raw, file, line, col.header, max_name) if named
                                     else check_text(raw, file, line, col.header))
                if col.role == "ID" and col.name:
                    props[col.name] = raw  # Neo4j keeps `name:ID` as a property too
                continue
            value = _value(ln, col, raw)
            if value is not None:
                props[col.name] = value
        ln.obj.update(props)
        yield _Row(ln, props, special)


def _text(row: _Row, column: str | None, max_name: int | None = None) -> str:
    """The column's value as text (arrays joined); `max_name`: a name or type, at most that many characters."""
    if column is None or row.props.get(column) is None:
        return ""
    value = row.props[column]
    if isinstance(value, list):
        value = ARRAY_SEP.join(map(str, value))
    if max_name is not None:
        return check_name(str(value), row.ln.file, row.ln.line, column, max_name)
    return check_text(str(value), row.ln.file, row.ln.line, column)


def detect(path: Path) -> bool:
    """Whether `path` holds `nodes.csv` + `relationships.csv`."""
    return (path / "nodes.csv").is_file() and (path / "relationships.csv").is_file()


def load_csv(path: str | Path, options: IngestOptions | None = None) -> GraphData:
    """A folder with nodes.csv and relationships.csv as GraphData (no chunks: sources show as 'no source text')."""
    options = options or IngestOptions()
    root = Path(path)
    if not root.is_dir():
        raise IngestError(str(root), 0, "path", "not a directory (expected nodes.csv + relationships.csv)")
    mapping = options.mapping
    unknown = sorted(set(mapping) - set(MAPPING_KEYS))
    if unknown:
        raise IngestError(str(root), 0, "mapping", f"unknown mapping {', '.join(unknown)}; valid: "
                          f"{', '.join(MAPPING_KEYS)}")
    max_name = options.max_name_chars
    node_rows = list(_rows(root / NODES, max_name))
    options.report(f"reading {NODES}", len(node_rows), len(node_rows))
    keys: dict[tuple[str, str], int] = {}
    spaces: dict[str, set[str]] = {}
    for row in node_rows:
        if "ID" not in row.special:
            raise row.ln.fail(":ID", "nodes.csv needs an :ID column")
        col, value = row.special["ID"]
        if not value:
            raise row.ln.fail(col.header, "empty id")
        if (col.space, value) in keys:
            raise row.ln.fail(col.header, f"duplicate id {excerpt(value)} (first on line {keys[(col.space, value)]})")
        keys[(col.space, value)] = row.ln.line
        spaces.setdefault(value, set()).add(col.space)

    def entity_id(space: str, value: str) -> str:
        # ids of different id spaces may repeat: only then is the space part of the id
        return f"{space}:{value}" if len(spaces.get(value, ())) > 1 else value

    entities: dict[str, Entity] = {}
    for row in node_rows:
        col, value = row.special["ID"]
        eid = entity_id(col.space, value)
        if id_too_long(eid):
            raise row.ln.fail(col.header, f"id longer than {MAX_ID_LEN} bytes of UTF-8")
        columns = [c for c, _ in row.special.values()] + [Column(k, k) for k in row.props]
        name_col = _pick(columns, mapping, "name", NAME_COLUMNS)
        desc_col = _pick(columns, mapping, "description", DESCRIPTION_COLUMNS)
        labels = [s for s in row.special.get("LABEL", (None, ""))[1].split(ARRAY_SEP) if s]
        type_col = mapping.get("type") or (None if labels else _pick(columns, mapping, "type", TYPE_COLUMNS))
        etype = _text(row, type_col, max_name) if type_col else (labels[0] if labels else "")
        name = _text(row, name_col, max_name) or value
        description = _text(row, desc_col)
        check_entity_size(row.ln, name, description, desc_col or "description")
        properties = {k: v for k, v in row.props.items() if k not in {name_col, desc_col, type_col}}
        if labels:
            properties["labels"] = labels
        entities[eid] = Entity(id=eid, name=name, type=etype or "entity", description=description,
                               properties=properties)

    relations: list[Relation] = []
    seen: set[str] = set()
    missing: set[str] = set()
    dropped: Counter[str] = Counter()
    count = 0
    for row in _rows(root / RELATIONSHIPS, max_name):
        count += 1
        ends = []
        for role in ("START_ID", "END_ID"):
            if role not in row.special:
                raise row.ln.fail(f":{role}", "relationships.csv needs :START_ID and :END_ID columns")
            col, value = row.special[role]
            eid = entity_id(col.space, value)
            if not value or id_too_long(eid):
                raise row.ln.fail(col.header, f"ids are 1 to {MAX_ID_LEN} bytes of UTF-8")
            if eid not in entities:
                missing.add(eid)
                entities[eid] = Entity(id=eid, name=value, type=MISSING_TYPE)
            ends.append(eid)
        columns = [c for c, _ in row.special.values()] + [Column(k, k) for k in row.props]
        type_col = mapping.get("relation_type")
        rtype = _text(row, type_col, max_name) if type_col else row.special.get("TYPE", (None, ""))[1]
        rtype = rtype or RELATION_TYPE
        weight_col = _pick(columns, mapping, "weight", WEIGHT_COLUMNS)
        desc_col = _pick(columns, mapping, "description", DESCRIPTION_COLUMNS)
        dropped.update(k for k in row.props if k not in {type_col, weight_col, desc_col})
        rid = relation_id(ends[0], rtype, ends[1])
        if rid in seen:
            rid = f"{rid}#{row.ln.line}"  # parallel relationships of one type
        seen.add(rid)
        relations.append(Relation(
            id=rid, source_id=ends[0], target_id=ends[1], relation_type=rtype,
            description=_text(row, desc_col), weight=weight_of(row.ln, weight_col), vector_db_ref_id=rid,
        ))
    options.report(f"reading {RELATIONSHIPS}", count, count)
    warnings = dropped_note(str(root / RELATIONSHIPS), dropped)
    if missing:
        names = ", ".join(sorted(missing)[:10]) + (" …" if len(missing) > 10 else "")
        warnings.append(f"{root / RELATIONSHIPS}: {len(missing)} relationship ends are not in {NODES}; kept as "
                        f"entities of type {MISSING_TYPE!r}: {names}")
    return GraphData(entities=tuple(entities.values()), relations=tuple(relations), warnings=tuple(warnings))


FORMAT = Format(detect, load_csv)
