"""The hostile corpus written in the other import formats (GraphRAG Parquet, LightRAG working dir, GraphML, CSV).

Each accepted payload becomes an entity (id = `Payload.ident`, name, type, description), a relation from the hub
Eve Evilname to it (its type where the format has one, its description) and, where the format has text, a chunk
(text) of a document titled by the payload. XML cannot hold C0 control characters even as character references,
so GraphML and LightRAG leave out `XML_ILLEGAL` payloads here; `write_graphml(..., [payload])` writes one to check
that the reader refuses it with its line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import pyarrow as pa
import pyarrow.parquet as pq

from tests.data.hostile.make_bundle import HUB_ID, HUB_NAME, Payload, accepted

XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
HUB_TEXT = f"{HUB_NAME} knows everyone whose name is in the archive."


def xml_safe(payloads: Iterable[Payload] | None = None) -> list[Payload]:
    return [p for p in (accepted() if payloads is None else payloads) if not XML_ILLEGAL.search(p.value)]


def _text(value: str) -> str:
    return escape(value).replace("\r", "&#13;")  # a raw CR would be normalised to LF by any XML parser


def write_graphml(folder: Path, payloads: Iterable[Payload] | None = None) -> Path:
    """One .graphml: node `ident` with name/type/description = payload; edge hub -> it with type/description."""
    items = xml_safe(payloads) if payloads is None else list(payloads)
    folder.mkdir(parents=True, exist_ok=True)
    keys = [("name", "node"), ("type", "node"), ("description", "node"), ("type", "edge"), ("description", "edge")]
    out = ['<?xml version="1.0" encoding="UTF-8"?>', '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">']
    out += [f'<key id="{f[0]}{n}" for="{f}" attr.name="{n}" attr.type="string"/>' for n, f in keys]
    out.append('<graph edgedefault="directed">')
    out.append(f'<node id="{HUB_ID}"><data key="nname">{HUB_NAME}</data><data key="ntype">person</data></node>')
    for p in items:
        v = _text(p.value)
        out.append(f'<node id={quoteattr(p.ident)}><data key="nname">{v}</data><data key="ntype">{v}</data>'
                   f'<data key="ndescription">{v}</data></node>')
        out.append(f'<edge id={quoteattr(p.ident)} source="{HUB_ID}" target={quoteattr(p.ident)}>'
                   f'<data key="etype">{v}</data><data key="edescription">{v}</data></edge>')
    out.append("</graph></graphml>")
    path = folder / "hostile.graphml"
    path.write_text("\n".join(out) + "\n", encoding="utf-8", errors="surrogatepass")
    return path


def write_graphrag(folder: Path, payloads: Iterable[Payload] | None = None) -> Path:
    """GraphRAG tables: a document titled by each payload whose one text unit is the payload."""
    items = accepted() if payloads is None else list(payloads)
    folder.mkdir(parents=True, exist_ok=True)
    docs = [{"id": "doc-hub", "title": "The Archive", "text": HUB_TEXT, "text_unit_ids": ["u-hub"]}]
    units = [{"id": "u-hub", "text": HUB_TEXT, "document_id": "doc-hub"}]
    entities = [{"id": HUB_ID, "title": HUB_NAME, "type": "person", "description": "", "text_unit_ids": ["u-hub"]}]
    rels = []
    for i, p in enumerate(items):
        docs.append({"id": f"doc-{i}", "title": p.value, "text": p.value, "text_unit_ids": [p.ident]})
        units.append({"id": p.ident, "text": p.value, "document_id": f"doc-{i}"})
        entities.append({"id": p.ident, "title": p.value, "type": p.value, "description": p.value,
                         "text_unit_ids": [p.ident]})
        rels.append({"id": p.ident, "source": HUB_NAME, "target": p.value, "description": p.value, "weight": 1.0,
                     "text_unit_ids": [p.ident, "u-hub"]})
    for name, rows in (("documents", docs), ("text_units", units), ("entities", entities),
                       ("relationships", rels)):
        pq.write_table(pa.Table.from_pylist(rows), folder / f"{name}.parquet")
    return folder


def write_lightrag(folder: Path, payloads: Iterable[Payload] | None = None) -> Path:
    """A LightRAG working dir: node = payload (LightRAG names nodes by entity name), chunk text and file = payload."""
    items = xml_safe(payloads) if payloads is None else list(payloads)
    folder.mkdir(parents=True, exist_ok=True)
    chunks = {"chunk-hub": {"content": HUB_TEXT, "chunk_order_index": 0, "full_doc_id": "doc-hub",
                            "file_path": "archive.md"}}
    keys = [("entity_id", "node"), ("entity_type", "node"), ("description", "node"), ("source_id", "node"),
            ("description", "edge"), ("source_id", "edge"), ("weight", "edge")]
    out = ['<?xml version="1.0" encoding="UTF-8"?>', '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">']
    out += [f'<key id="{f[0]}-{n}" for="{f}" attr.name="{n}" attr.type="{"double" if n == "weight" else "string"}"/>'
            for n, f in keys]
    out.append('<graph edgedefault="undirected">')
    out.append(f'<node id="{HUB_NAME}"><data key="n-entity_id">{HUB_NAME}</data>'
               '<data key="n-entity_type">person</data><data key="n-source_id">chunk-hub</data></node>')
    for i, p in enumerate(items):
        v, cid = _text(p.value), f"chunk-{i}"
        chunks[cid] = {"content": p.value, "chunk_order_index": 0, "full_doc_id": p.ident, "file_path": p.value}
        out.append(f'<node id={quoteattr(p.value)}><data key="n-entity_id">{v}</data>'
                   f'<data key="n-entity_type">{v}</data><data key="n-description">{v}</data>'
                   f'<data key="n-source_id">{cid}</data></node>')
        out.append(f'<edge source="{HUB_NAME}" target={quoteattr(p.value)}><data key="e-description">{v}</data>'
                   f'<data key="e-source_id">{cid}&lt;SEP&gt;chunk-hub</data><data key="e-weight">1.0</data></edge>')
    out.append("</graph></graphml>")
    (folder / "graph_chunk_entity_relation.graphml").write_text("\n".join(out) + "\n", encoding="utf-8")
    (folder / "kv_store_text_chunks.json").write_text(json.dumps(chunks, indent=2), encoding="utf-8")
    return folder


def write_csv(folder: Path, payloads: Iterable[Payload] | None = None) -> Path:
    """nodes.csv (id, name, kind, description) + relationships.csv (:TYPE and description = payload)."""
    import csv

    items = accepted() if payloads is None else list(payloads)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "nodes.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id:ID", "name", "kind", "description"])
        w.writerow([HUB_ID, HUB_NAME, "person", ""])
        w.writerows([p.ident, p.value, p.value, p.value] for p in items)
    with (folder / "relationships.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([":START_ID", ":END_ID", ":TYPE", "description"])
        w.writerows([HUB_ID, p.ident, p.value, p.value] for p in items)
    return folder
