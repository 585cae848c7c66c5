"""GraphML (networkx, Gephi, Neo4j APOC, igraph, yEd exports) -> GraphData, without chunks.

The file is parsed in a stream by defusedxml's expat parser with DTDs forbidden, so entity expansion
("billion laughs") and external entities (XXE) are refused before any is resolved; errors carry the line.
networkx's own reader uses the standard library parser, which its docs call unsafe for untrusted files.

Mapping (overridable with `IngestOptions.mapping`, the CLI's `--name-attr` ... flags): a node's name is the
first of NAME_ATTRS it has (else its id), its type the first of TYPE_ATTRS (Neo4j's `labels` `:A:B` give `A`, all
labels kept in `properties["labels"]`; else `entity`), its description the first of DESCRIPTION_ATTRS. An edge's
relation type is the first of RELATION_TYPE_ATTRS it has, else `RELATED_TO`; weight the first of WEIGHT_ATTRS.
Every other attribute is kept in the entity's properties. An edge endpoint that is not a declared node becomes an
entity of type `unknown`, counted in the warnings.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrieval.config import Settings
from retrieval.errors import IngestError, excerpt
from retrieval.ingest import Format, IngestOptions
from retrieval.ingest.bundle import (
    MAX_ID_LEN,
    MAX_TEXT_BYTES,
    Line,
    check_entity_size,
    check_name,
    check_text,
    id_too_long,
    relation_id,
)
from retrieval.models import Entity, GraphData, Relation

RELATION_TYPE = "RELATED_TO"
MISSING_TYPE = "unknown"
NAME_ATTRS = ("name", "title", "label", "Label", "Node Label", "entity_name", "entity_id")
TYPE_ATTRS = ("type", "entity_type", "labels", "labelV", "category", "Type")
DESCRIPTION_ATTRS = ("description", "desc", "Description")
RELATION_TYPE_ATTRS = ("type", "relation_type", "relationship", "label", "labelE", "Edge Label", "rel_type", "TYPE")
WEIGHT_ATTRS = ("weight", "Weight", "Edge Weight")
MAPPING_KEYS = ("name", "type", "description", "relation_type", "weight")
_ELEMENT_ATTRS = {"id", "source", "target", "directed", "sourceport", "targetport"}
_MAX_VALUE_CHARS = 4 * MAX_TEXT_BYTES  # a data value is refused past this while it is still being read
_READ = 1 << 20
# expat holds a whole tag (with its attributes), comment or processing instruction in memory before it reports
# it: a 200 MB attr.name took 46 s and 1.7 GB. Markup that runs on this far past the last event is refused
# while the file is read (text between tags is reported as it streams, and capped by _MAX_VALUE_CHARS).
MAX_MARKUP_BYTES = 1 << 20


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


@dataclass
class GraphMLItem:
    """A node or edge as parsed: its XML attributes, its typed data values by attribute name, and its line."""

    line: int
    id: str
    attrs: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    target: str = ""


@dataclass
class ParsedGraphML:
    nodes: list[GraphMLItem] = field(default_factory=list)
    edges: list[GraphMLItem] = field(default_factory=list)
    directed: bool = True


_CASTS: dict[str, Callable[[str], Any]] = {
    "boolean": lambda s: {"true": True, "false": False, "1": True, "0": False}[s.strip().lower()],
    "int": lambda s: int(s.strip()),
    "long": lambda s: int(s.strip()),
    "float": lambda s: float(s.strip()),
    "double": lambda s: float(s.strip()),
    "string": lambda s: s,
}


@dataclass
class _Key:
    name: str
    kind: str = "string"
    default: Any = None
    is_list: bool = False
    graphics: bool = False  # yEd's node/edge graphics: only its label text is read


class _Handler:
    """expat target: builds nodes and edges as elements close, recording the line each one starts on."""

    def __init__(self, file: str, max_name: int) -> None:
        self.file = file
        self.max_name = max_name
        self.mark = 0  # byte offset of the last event: how far the parser has got
        self.expat: Any = None
        self.out = ParsedGraphML()
        self.keys: dict[tuple[str, str], _Key] = {}  # (for, id) -> key; for = node | edge | all
        self.stack: list[str] = []
        self.item: GraphMLItem | None = None
        self.kind = ""
        self.key: _Key | None = None
        self.key_id = ""
        self.key_line = 0
        self.text: list[str] = []
        self.size = 0
        self.label: list[str] | None = None  # yEd NodeLabel / EdgeLabel text inside a data element
        self.graphs = 0

    def line(self) -> int:
        return int(self.expat.CurrentLineNumber) if self.expat is not None else 0

    def fail(self, field: str, reason: str, line: int | None = None) -> IngestError:
        return IngestError(self.file, self.line() if line is None else line, field, reason)

    def moved(self) -> None:
        self.mark = int(self.expat.CurrentByteIndex) if self.expat is not None else 0

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.moved()
        name = _local(tag)
        self.stack.append(name)
        for attr in attrib:  # XML attribute names, and attribute names declared by <key attr.name=...>
            check_name(_local(attr), self.file, self.line(), f"{name} attribute", self.max_name)
        if name == "key":
            kid = attrib.get("id", "")
            self.key_id = kid
            self.key_line = self.line()
            check_name(attrib.get("attr.name", ""), self.file, self.key_line, "key.attr.name", self.max_name)
            check_name(kid, self.file, self.key_line, "key.id", self.max_name)
            self.key = _Key(attrib.get("attr.name") or kid, attrib.get("attr.type", "string"),
                            is_list="attr.list" in attrib, graphics="yfiles.type" in attrib)
            if self.key.kind not in _CASTS:
                raise self.fail("key", f"unknown attr.type {excerpt(self.key.kind)}")
            self.keys[(attrib.get("for", "all"), kid)] = self.key
            self.text = []
        elif name == "graph":
            self.graphs += 1
            if self.graphs > 1:
                raise self.fail("graph", "nested or several graphs are not supported")
            self.out.directed = attrib.get("edgedefault", "directed") == "directed"
        elif name in ("node", "edge") and self.item is None:
            self.kind = name
            extra = {k: v for k, v in attrib.items() if k not in _ELEMENT_ATTRS}
            self.item = GraphMLItem(self.line(), attrib.get("id", ""), extra, attrib.get("source", ""),
                                    attrib.get("target", ""))
            if name == "node" and not self.item.id:
                raise self.fail("node.id", "missing node id")
            if name == "edge" and not (self.item.source and self.item.target):
                raise self.fail("edge", "an edge needs source and target")
        elif name == "hyperedge":
            raise self.fail("hyperedge", "hyperedges are not supported")
        elif name == "data":
            self.key_id = attrib.get("key", "")
            self.text, self.size = [], 0
        elif name in ("NodeLabel", "EdgeLabel") and "data" in self.stack:
            self.label = []
        elif name == "default":
            self.text, self.size = [], 0

    def data(self, text: str) -> None:
        self.moved()
        target = self.label if self.label is not None else self.text
        if self.stack and self.stack[-1] in ("data", "default", "NodeLabel", "EdgeLabel"):
            self.size += len(text)
            if self.size > _MAX_VALUE_CHARS:
                raise self.fail(self.stack[-1], f"value longer than {_MAX_VALUE_CHARS:,} characters")
            target.append(text)

    def end(self, tag: str) -> None:
        self.moved()
        name = _local(tag)
        self.stack.pop()
        if name == "default" and self.key is not None:
            self.key.default = self._cast(self.key, "".join(self.text), self.key_line)
        elif name == "key":
            self.key = None
        elif name in ("NodeLabel", "EdgeLabel") and self.label is not None:
            if self.item is not None:
                self.item.attrs.setdefault("label", "".join(self.label))
            self.label = None
        elif name == "data" and self.item is not None:
            key = self.keys.get((self.kind, self.key_id)) or self.keys.get(("all", self.key_id))
            if key is None:
                raise self.fail("data", f"undeclared key {excerpt(self.key_id)}")
            if key.graphics:
                return
            if (self.text and "".join(self.text).strip()) or key.kind == "string":
                self.item.attrs[key.name] = self._cast(key, "".join(self.text), self.line())
        elif name in ("node", "edge") and self.item is not None and name == self.kind:
            for (scope, _), key in self.keys.items():
                if scope in (name, "all") and key.default is not None:
                    self.item.attrs.setdefault(key.name, key.default)
            (self.out.nodes if name == "node" else self.out.edges).append(self.item)
            self.item = None

    def _cast(self, key: _Key, raw: str, line: int) -> Any:
        if key.is_list:  # Neo4j APOC writes arrays as JSON-like text with attr.list
            try:
                value = json.loads(raw)
                if isinstance(value, list):
                    return value
            except ValueError:
                pass
            return raw
        try:
            value = _CASTS[key.kind](raw)
        except (ValueError, KeyError) as exc:
            raise self.fail(f"data[{key.name}]", f"expected a {key.kind}, got {raw[:40]!r}", line) from exc
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(f"data[{key.name}]", "must be a finite number", line)
        return value

    def close(self) -> None:
        return None


def parse_graphml(path: Path, max_name: int | None = None) -> ParsedGraphML:
    """Stream-parse a GraphML file safely (defusedxml, DTDs forbidden; markup and values bounded while read, names
    at most `max_name` characters); IngestError with the line on failure."""
    from xml.etree.ElementTree import ParseError

    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import DefusedXMLParser

    file = str(path)
    handler = _Handler(file, max_name or Settings().max_name_chars)
    parser = DefusedXMLParser(target=handler, forbid_dtd=True)
    handler.expat = parser.parser
    try:
        with path.open("rb") as fh:
            read = 0
            for block in iter(lambda: fh.read(_READ), b""):
                parser.feed(block)
                read += len(block)
                if read - handler.mark > MAX_MARKUP_BYTES:
                    raise IngestError(file, handler.line(), "xml", f"a tag, comment or other markup runs past "
                                                                   f"{MAX_MARKUP_BYTES:,} bytes")
        parser.close()
    except ParseError as exc:
        line = exc.position[0] if getattr(exc, "position", None) else handler.line()
        raise IngestError(file, line, "xml", str(exc).split(": line", 1)[0]) from exc
    except DefusedXmlException as exc:
        raise IngestError(file, handler.line(), "xml", f"refused: {exc}") from exc
    except OSError as exc:
        raise IngestError(file, 0, "file", f"cannot read: {exc.strerror or exc}") from exc
    if handler.graphs == 0:
        raise IngestError(file, 0, "graph", "no <graph> element: not a GraphML file")
    return handler.out


# --- mapping to GraphData ------------------------------------------------------------------------


def _first(attrs: Mapping[str, Any], mapping: Mapping[str, str], role: str, names: tuple[str, ...]) -> str | None:
    """The attribute name that plays `role`: the mapped one, else the first default with a value."""
    if role in mapping:
        return mapping[role]
    return next((n for n in names if attrs.get(n) not in (None, "")), None)


def _as_text(ln: Line, attr: str | None, default: str = "") -> str:
    if attr is None or ln.obj.get(attr) is None:
        return default
    value = ln.obj[attr]
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ln.fail(f"data[{attr}]", f"expected text, got {type(value).__name__}")
    return check_text(str(value), ln.file, ln.line, f"data[{attr}]")


def _check_property(ln: Line, key: str, value: Any) -> None:
    check_text(key, ln.file, ln.line, f"data[{key}]")
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str):
            check_text(item, ln.file, ln.line, f"data[{key}]")
        elif isinstance(item, float) and not math.isfinite(item):
            raise ln.fail(f"data[{key}]", "must be a finite number")


def weight_of(ln: Line, attr: str | None) -> float:
    """The edge weight in attribute `attr` (a number, or text holding one); 1.0 without one."""
    if attr is None or ln.obj.get(attr) is None:
        return 1.0
    value = ln.obj[attr]
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError as exc:
            raise ln.fail(attr, f"expected a number, got {value[:40]!r}") from exc
    return Line(ln.file, ln.line, {attr: value}).number(attr, 1.0)


def dropped_note(file: str, dropped: Counter[str]) -> list[str]:
    """The warning naming edge attributes a relation has no field for (relations keep type, text, weight)."""
    if not dropped:
        return []
    names = ", ".join(f"{k} ({n})" for k, n in dropped.most_common(10))
    return [f"{file}: edge attributes not kept (a relation holds type, description and weight): {names}"]


def node_type(attr: str | None, raw: str) -> tuple[str, list[str]]:
    """(type, labels): a Neo4j `labels` attribute `:A:B` gives A and [A, B]; any other value is the type as given."""
    if attr == "labels" and raw.startswith(":") and len(raw) > 1:
        labels = [part for part in raw.split(":") if part]
        return (labels[0] if labels else raw), labels
    return raw, []


def graph_data(parsed: ParsedGraphML, file: str, mapping: Mapping[str, str], max_name: int) -> GraphData:
    """Entities and relations from parsed GraphML under the attribute mapping (see the module docstring)."""
    unknown = sorted(set(mapping) - set(MAPPING_KEYS))
    if unknown:
        raise IngestError(file, 0, "mapping", f"unknown mapping {', '.join(unknown)}; valid: {', '.join(MAPPING_KEYS)}")
    entities: dict[str, Entity] = {}
    for node in parsed.nodes:
        ln = Line(file, node.line, node.attrs)
        if id_too_long(node.id):
            raise ln.fail("node.id", f"id longer than {MAX_ID_LEN} bytes of UTF-8")
        check_text(node.id, file, node.line, "node.id")
        if node.id in entities:
            raise ln.fail("node.id", f"duplicate node id {excerpt(node.id)}")
        name_attr = _first(node.attrs, mapping, "name", NAME_ATTRS)
        type_attr = _first(node.attrs, mapping, "type", TYPE_ATTRS)
        desc_attr = _first(node.attrs, mapping, "description", DESCRIPTION_ATTRS)
        name = check_name(_as_text(ln, name_attr), file, node.line, f"data[{name_attr}]", max_name) or node.id
        etype, labels = node_type(type_attr, check_name(_as_text(ln, type_attr), file, node.line,
                                                        f"data[{type_attr}]", max_name))
        description = _as_text(ln, desc_attr)
        check_entity_size(ln, name, description, f"data[{desc_attr}]")
        properties = {k: v for k, v in node.attrs.items() if k not in {name_attr, desc_attr}
                      and not (k == type_attr and not labels)}
        for k, v in properties.items():
            _check_property(ln, k, v)
        if labels:
            properties[type_attr or "labels"] = labels
        entities[node.id] = Entity(id=node.id, name=name, type=etype or "entity", description=description,
                                   properties=properties)
    relations: list[Relation] = []
    seen: set[str] = set()
    missing: set[str] = set()
    dropped: Counter[str] = Counter()
    for edge in parsed.edges:
        ln = Line(file, edge.line, edge.attrs)
        for end, ref in (("source", edge.source), ("target", edge.target)):
            if id_too_long(ref):
                raise ln.fail(f"edge.{end}", f"id longer than {MAX_ID_LEN} bytes of UTF-8")
            check_text(ref, file, edge.line, f"edge.{end}")
            if ref not in entities:
                missing.add(ref)
                entities[ref] = Entity(id=ref, name=ref, type=MISSING_TYPE)
        type_attr = _first(edge.attrs, mapping, "relation_type", RELATION_TYPE_ATTRS)
        rtype = check_name(_as_text(ln, type_attr), file, edge.line, f"data[{type_attr}]", max_name) or RELATION_TYPE
        weight_attr = _first(edge.attrs, mapping, "weight", WEIGHT_ATTRS)
        weight = weight_of(ln, weight_attr)
        desc_attr = _first(edge.attrs, mapping, "description", DESCRIPTION_ATTRS)
        dropped.update(k for k in edge.attrs if k not in {type_attr, weight_attr, desc_attr})
        rid = edge.id or relation_id(edge.source, rtype, edge.target)
        check_text(rid, file, edge.line, "edge.id")
        if rid in seen:
            # networkx writes a multigraph's edge keys as ids, unique only per node pair; without ids, a parallel
            # edge of the same type repeats the derived id
            rid = f"{relation_id(edge.source, rtype, edge.target)}#{edge.id or edge.line}"
            if rid in seen:
                rid = f"{rid}@{edge.line}"
        if id_too_long(rid):
            raise ln.fail("edge.id", f"id longer than {MAX_ID_LEN} bytes of UTF-8")
        seen.add(rid)
        relations.append(Relation(
            id=rid, source_id=edge.source, target_id=edge.target, relation_type=rtype,
            description=_as_text(ln, desc_attr), weight=weight, vector_db_ref_id=rid,
        ))
    warnings = dropped_note(file, dropped)
    if missing:
        names = ", ".join(sorted(missing)[:10]) + (" …" if len(missing) > 10 else "")
        warnings.append(f"{file}: {len(missing)} edge endpoints are not declared nodes; kept as entities of type "
                        f"{MISSING_TYPE!r}: {names}")
    return GraphData(entities=tuple(entities.values()), relations=tuple(relations), warnings=tuple(warnings))


def detect(path: Path) -> bool:
    """Whether `path` holds exactly one `*.graphml` file."""
    return len(list(path.glob("*.graphml"))) == 1


def load_graphml(path: str | Path, options: IngestOptions | None = None) -> GraphData:
    """A folder holding one .graphml file (or the file itself) as GraphData with no chunks."""
    options = options or IngestOptions()
    root = Path(path)
    if root.is_dir():
        files = sorted(root.glob("*.graphml"))
        if len(files) != 1:
            found = ", ".join(p.name for p in files) or "none"
            raise IngestError(str(root), 0, "path", f"expected exactly one .graphml file, found {found}")
        root = files[0]
    options.report(f"reading {root.name}", 0, 1)
    parsed = parse_graphml(root, options.max_name_chars)
    options.report(f"reading {root.name}", 1, 1)
    return graph_data(parsed, str(root), options.mapping, options.max_name_chars)


FORMAT = Format(detect, load_graphml)
