"""Microsoft GraphRAG output folder (Parquet tables) -> GraphData, communities and claims.

Reads the current layout (`documents`, `text_units`, `entities`, `relationships`, optional `communities`,
`community_reports`, `covariates`) and the older `create_final_*` layout (entities `name` for `title`, documents
`raw_content` for `text`, text units `document_ids`, communities keyed by `id` with members in
`create_final_nodes`, reports with `rank_explanation`). Table schemas: GraphRAG's docs/index/outputs.md and its
index migration notebooks (v1, v2).

Errors read `file:row: column: reason` (rows counted from 1). GraphRAG relationships have no type: every
relation is `RELATED_TO`. A relationship endpoint missing from the entities table becomes an entity of type
`unknown` sourced from the relationship's text units, counted in the warnings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.errors import IngestError, excerpt
from retrieval.ingest import Format, IngestOptions
from retrieval.ingest.books import untitled_note
from retrieval.ingest.bundle import MAX_ID_LEN, Line, check_entity_size, id_too_long, merge_chunks
from retrieval.ingest.headings import chapters
from retrieval.models import Chunk, Claim, Community, Entity, Finding, GraphData, Relation

RELATION_TYPE = "RELATED_TO"  # GraphRAG relationships carry a description and a weight, no type
MISSING_TYPE = "unknown"
MAX_TABLE_BYTES = 4 * 1024**3  # uncompressed, as the Parquet footer states it: a decompression bomb stops here
_NONE = {"", "NONE", "None", "none", "null"}  # GraphRAG writes "NONE" for a claim without object or date

CURRENT = {
    "documents": "documents", "text_units": "text_units", "entities": "entities", "relationships": "relationships",
    "communities": "communities", "community_reports": "community_reports", "covariates": "covariates",
}
LEGACY = {name: f"create_final_{name}" for name in CURRENT} | {"nodes": "create_final_nodes"}
REQUIRED = ("documents", "text_units", "entities", "relationships")


@dataclass
class _Table:
    file: str
    rows: list[Line] = field(default_factory=list)
    columns: tuple[str, ...] = ()

    def pick(self, *names: str) -> str:
        """The first of `names` the table has (aliases across GraphRAG versions); the first if none."""
        return next((n for n in names if n in self.columns), names[0])


def layout(root: Path) -> dict[str, str]:
    """Table name -> file stem of the layout present in `root` (current or create_final_*)."""
    if (root / "entities.parquet").is_file():
        return CURRENT
    if (root / "create_final_entities.parquet").is_file():
        return LEGACY
    raise IngestError(str(root), 0, "path", "no entities.parquet or create_final_entities.parquet: not a GraphRAG "
                      "output folder")


def _read(root: Path, stem: str, required: bool, options: IngestOptions) -> _Table | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = root / f"{stem}.parquet"
    file = str(path)
    if not path.is_file():
        if required:
            raise IngestError(file, 0, "file", "required table is missing")
        return None
    try:
        meta = pq.ParquetFile(path).metadata
        size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        if size > MAX_TABLE_BYTES:
            raise IngestError(file, 0, "parquet", f"{size:,} bytes uncompressed; at most {MAX_TABLE_BYTES:,}")
        table = pq.read_table(path)
        rows = table.to_pylist()
    except IngestError:
        raise
    except UnicodeDecodeError as exc:
        raise IngestError(file, 0, "encoding", f"a string is not valid UTF-8: {exc.reason}") from exc
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise IngestError(file, 0, "parquet", f"not a readable Parquet file: {exc}") from exc
    options.report(f"reading {path.name}", len(rows), len(rows))
    return _Table(file, [Line(file, i, row) for i, row in enumerate(rows, start=1)], tuple(table.column_names))


def _key(ln: Line, column: str) -> str:
    """A community number (int, or a string of one in older layouts) as text."""
    value = ln.obj.get(column)
    if isinstance(value, bool) or value is None:
        raise ln.fail(column, "missing community number")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return str(int(value))
    raise ln.fail(column, f"expected a community number, got {value!r:.40}")


def _optional_key(ln: Line, column: str) -> str | None:
    if ln.obj.get(column) is None:
        return None
    key = _key(ln, column)
    return None if key == "-1" else key  # GraphRAG: -1 = no parent


def _keys(ln: Line, column: str) -> list[str]:
    value = ln.obj.get(column)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ln.fail(column, "expected a list of community numbers")
    return [_key(Line(ln.file, ln.line, {column: v}), column) for v in value]


def _optional(ln: Line, column: str) -> str | None:
    text = ln.text(column)
    return None if text.strip() in _NONE else text


@dataclass
class _Build:
    """What the tables resolve to, shared by the steps below."""

    chunk_ids: set[str] = field(default_factory=set)
    entities: dict[str, Entity] = field(default_factory=dict)
    by_title: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    unknown_refs: int = 0
    max_name: int = 65_535  # KG_MAX_NAME_CHARS

    def known_chunks(self, refs: Sequence[str]) -> tuple[str, ...]:
        kept = tuple(r for r in refs if r in self.chunk_ids)
        self.unknown_refs += len(refs) - len(kept)
        return kept


def metadata_lines(document: dict[str, Any]) -> tuple[str, ...]:
    """The lines GraphRAG's `prepend_metadata` may put before a chunk of this document: `field: value.` for each of
    its scalar fields (graphrag_chunking's add_metadata, line delimiter `.\n`)."""
    return tuple(f"{k}: {v}.\n" for k, v in document.items() if isinstance(v, str | int | float) and str(v).strip()
                 and "\n" not in str(v))


def strip_metadata(text: str, lines: Sequence[str]) -> str:
    """`text` without the leading metadata lines (`title: book.txt.`) GraphRAG prepended: they are not the book's."""
    while True:
        head = next((line for line in lines if text.startswith(line)), None)
        if head is None:
            return text
        text = text[len(head):]


def _chunks(docs: _Table, units: _Table, b: _Build) -> list[Chunk]:
    """Text units as chunks: book = document title, position = order in the document, chapter = heading; the text
    without the metadata lines GraphRAG may prepend to it."""
    text_col = docs.pick("text", "raw_content")
    documents: dict[str, tuple[str, str, list[str], tuple[str, ...]]] = {}
    untitled = []
    for ln in docs.rows:
        did = ln.ident("id")
        if did in documents:
            raise ln.fail("id", f"duplicate document id {excerpt(did)}")
        title = ln.text("title") or did
        if not ln.text("title"):
            untitled.append(did)
        text = ln.obj.get(text_col)
        if text is not None and not isinstance(text, str):
            raise ln.fail(text_col, "expected a string")
        documents[did] = (title, text or "", ln.text_list("text_unit_ids", ids=True),
                          metadata_lines({k: v for k, v in ln.obj.items() if k != text_col}))
    if untitled:
        b.warnings.append(untitled_note(untitled, "the documents table gives them no title"))
    doc_col = units.pick("document_id", "document_ids")
    unit_rows: dict[str, tuple[Line, str]] = {}
    for ln in units.rows:
        uid = ln.ident("id")
        if uid in unit_rows:
            raise ln.fail("id", f"duplicate text unit id {excerpt(uid)}")
        refs = ln.text_list(doc_col, ids=True) if isinstance(ln.obj.get(doc_col), list) else [ln.ident(doc_col)]
        if not refs or refs[0] not in documents:
            raise ln.fail(doc_col, f"unknown document id {(refs or [''])[0]!r}")
        ln.text("text", required=True)
        unit_rows[uid] = (ln, refs[0])
    by_doc: dict[str, list[str]] = {}
    for uid, (_, did) in unit_rows.items():
        by_doc.setdefault(did, []).append(uid)
    out: list[Chunk] = []
    for did, (title, text, listed, prefix) in documents.items():
        # the document's own order first; units that name the document without being listed follow
        mine = list(dict.fromkeys([u for u in listed if u in unit_rows and unit_rows[u][1] == did]
                                  + by_doc.get(did, [])))
        texts = [strip_metadata(unit_rows[u][0].text("text"), prefix) for u in mine]
        for position, (uid, unit_text, chapter) in enumerate(zip(mine, texts, chapters(text, texts), strict=True)):
            ln = unit_rows[uid][0]
            hrid = ln.obj.get("human_readable_id")
            source = f"text unit {hrid}" if isinstance(hrid, int) and not isinstance(hrid, bool) else uid
            out.append(Chunk(id=uid, text=unit_text, source=source, original_document=title, chapter=chapter,
                             position=position))
    return out


def _entities(table: _Table, b: _Build) -> None:
    title_col = table.pick("title", "name")
    for ln in table.rows:
        eid = ln.ident("id")
        if eid in b.entities:
            raise ln.fail("id", f"duplicate entity id {excerpt(eid)}")
        title = ln.name(title_col, b.max_name, required=True, nonempty=True)
        if title in b.by_title:
            raise ln.fail(title_col, f"duplicate entity title {excerpt(title)} (relationships name entities by title)")
        description = ln.text("description")
        check_entity_size(ln, title, description)
        b.by_title[title] = eid
        b.entities[eid] = Entity(
            id=eid, name=title, type=ln.name("type", b.max_name) or "entity", description=description,
            source_chunks=b.known_chunks(ln.text_list("text_unit_ids", ids=True)),
        )


def _missing_id(title: str, taken: dict[str, Entity]) -> str:
    eid = f"{MISSING_TYPE}:{title}"
    if id_too_long(eid) or eid in taken:
        eid = f"{MISSING_TYPE}:" + hashlib.sha256(title.encode("utf-8")).hexdigest()[:16]
    return eid


def _relations(table: _Table, b: _Build) -> list[Relation]:
    out: list[Relation] = []
    seen: set[str] = set()
    missing: dict[str, list[str]] = {}
    for ln in table.rows:
        rid = ln.ident("id")
        if rid in seen:
            raise ln.fail("id", f"duplicate relationship id {excerpt(rid)}")
        seen.add(rid)
        ends = []
        chunks = b.known_chunks(ln.text_list("text_unit_ids", ids=True))
        for column in ("source", "target"):
            title = ln.name(column, b.max_name, required=True, nonempty=True)
            if title not in b.by_title:
                missing.setdefault(title, [])
                if id_too_long(title):
                    raise ln.fail(column, f"entity title longer than {MAX_ID_LEN} bytes of UTF-8")
                b.by_title[title] = _missing_id(title, b.entities)
                b.entities[b.by_title[title]] = Entity(id=b.by_title[title], name=title, type=MISSING_TYPE)
            if title in missing:
                missing[title].extend(chunks)
            ends.append(b.by_title[title])
        out.append(Relation(
            id=rid, source_id=ends[0], target_id=ends[1], relation_type=RELATION_TYPE,
            description=ln.text("description"), weight=ln.number("weight", 1.0), vector_db_ref_id=rid,
            source_chunks=chunks,
        ))
    for title, refs in missing.items():
        eid = b.by_title[title]
        b.entities[eid] = b.entities[eid].model_copy(update={"source_chunks": merge_chunks(refs)})
    if missing:
        names = ", ".join(sorted(missing)[:10]) + (" …" if len(missing) > 10 else "")
        b.warnings.append(
            f"{table.file}: {len(missing)} relationship endpoints are not in the entities table; kept as entities "
            f"of type {MISSING_TYPE!r} sourced from their relationships' text units: {names}"
        )
    return out


def _findings(ln: Line, column: str) -> tuple[Finding, ...]:
    value = ln.obj.get(column)
    if isinstance(value, str):  # some versions kept the LLM's JSON as text
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ln.fail(column, f"not JSON: {exc}") from exc
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ln.fail(column, "expected a list of {summary, explanation}")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ln.fail(f"{column}[{i}]", "expected an object with summary and explanation")
        at = Line(ln.file, ln.line, item)
        out.append(Finding(summary=at.text("summary"), explanation=at.text("explanation")))
    return tuple(out)


def _communities(tables: dict[str, _Table | None], b: _Build, relation_ids: set[str]) -> tuple[Community, ...]:
    comms, reports, nodes = tables.get("communities"), tables.get("community_reports"), tables.get("nodes")
    found: dict[str, dict[str, Any]] = {}
    if comms is not None:
        key_col = comms.pick("community", "id")
        for ln in comms.rows:
            cid = _key(ln, key_col)
            found[cid] = {
                "at": ln, "level": _level(ln), "parent": _optional_key(ln, "parent"),
                "children": _keys(ln, "children"), "title": ln.text("title"),
                "entity_ids": ln.text_list("entity_ids", ids=True),
                "relation_ids": ln.text_list("relationship_ids", ids=True),
                "chunk_ids": ln.text_list("text_unit_ids", ids=True),
            }
    if reports is not None:
        explain = reports.pick("rating_explanation", "rank_explanation")
        for ln in reports.rows:
            cid = _key(ln, "community")
            row = found.setdefault(cid, {"at": ln, "level": _level(ln), "parent": _optional_key(ln, "parent"),
                                         "children": _keys(ln, "children"), "entity_ids": [], "relation_ids": [],
                                         "chunk_ids": []})
            row.update(title=ln.text("title") or row.get("title", ""), summary=ln.text("summary"),
                       rank=ln.number("rank", float("nan")), rank_explanation=ln.text(explain),
                       findings=_findings(ln, "findings"))
    if nodes is not None:  # pre-1.0 layout: members per (community, level) in create_final_nodes
        _members_from_nodes(nodes, found, b)
    _check_parents(found)
    dropped = 0
    out = []
    for cid, row in found.items():
        entity_ids = [e for e in row["entity_ids"] if e in b.entities]
        rel_ids = [r for r in row["relation_ids"] if r in relation_ids]
        dropped += len(row["entity_ids"]) - len(entity_ids) + len(row["relation_ids"]) - len(rel_ids)
        rank = row.get("rank")
        out.append(Community(
            id=cid, level=row["level"], parent=row["parent"], children=tuple(row["children"]),
            title=row.get("title") or f"Community {cid}", summary=row.get("summary", ""),
            rank=None if rank is None or rank != rank else rank, rank_explanation=row.get("rank_explanation", ""),
            findings=row.get("findings", ()), entity_ids=tuple(dict.fromkeys(entity_ids)),
            relation_ids=tuple(dict.fromkeys(rel_ids)), chunk_ids=b.known_chunks(row["chunk_ids"]),
            size=len(set(entity_ids)), source="graphrag",
        ))
    if dropped:
        b.warnings.append(f"communities: {dropped} member entity/relationship ids name nothing in the graph; "
                          "left out of their communities")
    return tuple(out)


def _level(ln: Line) -> int:
    """A community's level: a whole number from 0 (the root level)."""
    level = ln.number("level", 0)
    if level < 0 or level != int(level):
        raise ln.fail("level", f"a community level is a whole number from 0, got {level:g}")
    return int(level)


def _check_parents(found: dict[str, dict[str, Any]]) -> None:
    """Refuse parents that form a cycle (a community that is its own ancestor), naming the row that closes it."""
    done: set[str] = set()
    for start in found:
        path: list[str] = []
        cid: str | None = start
        while cid is not None and cid in found and cid not in done:
            if cid in path:
                cycle = path[path.index(cid):] + [cid]
                at = found[path[-1]].get("at")
                shown = " -> ".join(cycle[:12]) + (" -> …" if len(cycle) > 12 else "")
                raise IngestError(at.file if at else "communities", at.line if at else 0, "parent",
                                  f"community parents form a cycle: {shown}")
            path.append(cid)
            cid = found[cid]["parent"]
        done.update(path)


def _members_from_nodes(nodes: _Table, found: dict[str, dict[str, Any]], b: _Build) -> None:
    """Fill entity members (and parents) from the legacy per-level node table (node id or title -> entity)."""
    per_level: dict[tuple[str, int], str] = {}  # (entity id, level) -> community
    for ln in nodes.rows:
        if ln.obj.get("community") is None:
            continue
        cid = _key(ln, "community")
        if cid == "-1":
            continue
        level = _level(ln)
        nid = ln.text("id")
        eid = nid if nid in b.entities else b.by_title.get(ln.text("title"), "")
        if not eid:
            continue
        per_level[(eid, level)] = cid
        row = found.setdefault(cid, {"at": ln, "level": level, "parent": None, "children": [], "entity_ids": [],
                                     "relation_ids": [], "chunk_ids": []})
        row["entity_ids"].append(eid)  # repeats are dropped when the Community is made (dict.fromkeys)
    for cid, row in found.items():
        if row["parent"] is None and row["level"] > 0 and row["entity_ids"]:
            parent = per_level.get((row["entity_ids"][0], row["level"] - 1))
            if parent is not None:
                row["parent"] = parent
                if cid not in found[parent]["children"]:
                    found[parent]["children"].append(cid)


def _claims(table: _Table, b: _Build) -> tuple[Claim, ...]:
    out = []
    unattached = 0
    for ln in table.rows:
        subject = ln.text("subject_id")
        obj = _optional(ln, "object_id") or ""
        unit = _optional(ln, "text_unit_id")
        sid = b.by_title.get(subject)
        unattached += sid is None
        out.append(Claim(
            id=ln.ident("id", required=False, default=f"claim-{ln.line}"), subject_id=sid, subject=subject,
            object_id=b.by_title.get(obj), object=obj, type=ln.text("type"), status=ln.text("status"),
            description=ln.text("description"), start_date=_optional(ln, "start_date"),
            end_date=_optional(ln, "end_date"), source_text=ln.text("source_text"),
            source_chunks=b.known_chunks([unit] if unit else []),
        ))
    if unattached:
        b.warnings.append(f"{table.file}: {unattached} claims name a subject that is not an entity; kept as text "
                          "(listed as claims without an entity by `communities` and on the Communities page)")
    return tuple(out)


def detect(path: Path) -> bool:
    """Whether `path` holds a GraphRAG output folder: `entities.parquet` (legacy: `create_final_entities.parquet`)."""
    return (path / "entities.parquet").is_file() or (path / "create_final_entities.parquet").is_file()


def load_graphrag(path: str | Path, options: IngestOptions | None = None) -> GraphData:
    """A GraphRAG output folder as GraphData with its communities (and their reports) and claims."""
    options = options or IngestOptions()
    root = Path(path)
    if not root.is_dir():
        raise IngestError(str(root), 0, "path", "not a directory (a GraphRAG output folder)")
    names = layout(root)
    tables = {t: _read(root, stem, t in REQUIRED, options) for t, stem in names.items()}
    b = _Build(max_name=options.max_name_chars)
    docs, units, ents, rels = (tables[t] for t in REQUIRED)
    assert docs and units and ents and rels  # required tables raise when missing
    chunks = _chunks(docs, units, b)
    b.chunk_ids = {c.id for c in chunks}
    _entities(ents, b)
    relations = _relations(rels, b)
    communities = _communities(tables, b, {r.id for r in relations})
    covariates = tables.get("covariates")
    claims = _claims(covariates, b) if covariates is not None else ()
    if b.unknown_refs:
        b.warnings.append(f"{b.unknown_refs} text unit ids named by entities, relationships, communities or claims "
                          "are not in the text units table; left out")
    return GraphData(entities=tuple(b.entities.values()), relations=tuple(relations), chunks=tuple(chunks),
                     communities=communities, claims=claims, warnings=tuple(b.warnings))


FORMAT = Format(detect, load_graphrag)
