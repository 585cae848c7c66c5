"""The hostile corpus built as a graph, and the byte-identical read-back checks every store tier runs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.ingest.build import ingest
from retrieval.ingest.write import entity_text
from retrieval.ingest.bundle import load_bundle
from retrieval.models import Chunk, GraphData
from retrieval.graph.runtime import KG
from retrieval.stores.base import CHUNKS, ENTITIES, RELATIONS
from tests.data.hostile.make_bundle import HUB_ID, Payload, write_bundle

GRAPH = "hostile-corpus"


_BUILT: dict[str, tuple[Path, GraphData]] = {}


def hostile_data_dir(tmp_root: Path, embedder: Embedder) -> tuple[Path, GraphData]:
    """A data dir holding graph `GRAPH` (Kuzu + Milvus Lite), built once per process; treat it as read-only
    (`copy_graph` puts the graph into another data dir). Returns the dir and the GraphData that was ingested."""
    if "embedded" not in _BUILT:
        bundle = write_bundle(tmp_root / "hostile-bundle")
        settings = Settings.from_env(env={}, data_dir=tmp_root / "hostile-kg")
        ingest(settings, bundle, fmt="bundle", name=GRAPH, embedder=embedder, progress=False)
        _BUILT["embedded"] = (settings.data_dir, load_bundle(bundle))
    return _BUILT["embedded"]


def copy_graph(src_data_dir: Path, dst_data_dir: Path, name: str = GRAPH) -> None:
    """Copy one embedded graph version and its catalog link into another data dir (the link is relative)."""
    link = src_data_dir / "graphs" / name
    version_dir = link.resolve()
    (dst_data_dir / "versions").mkdir(parents=True, exist_ok=True)
    (dst_data_dir / "graphs").mkdir(parents=True, exist_ok=True)
    shutil.copytree(version_dir, dst_data_dir / "versions" / version_dir.name)
    (dst_data_dir / "graphs" / name).symlink_to(os.readlink(link))


def _same(label: str, got: Any, want: Any) -> list[str]:
    return [] if got == want else [f"{label}: stored {got!r:.120} != given {want!r:.120}"]


def _utf8(value: str) -> bytes:
    return value.encode("utf-8")


def check_payload_fields(data: GraphData, payloads: Sequence[Payload]) -> list[str]:
    """Every payload sits, unchanged, in every text field the bundle put it in (as parsed)."""
    entities = {e.id: e for e in data.entities}
    relations = {r.id: r for r in data.relations}
    chunks = {c.id: c for c in data.chunks}
    bad: list[str] = []
    for p in payloads:
        v = _utf8(p.value)
        e, r, c = entities[p.ident], relations[p.ident], chunks[p.ident]
        fields = {
            "entity.name": e.name, "entity.type": e.type, "entity.description": e.description,
            "entity.alias": e.aliases[0], "relation.relation_type": r.relation_type,
            "relation.description": r.description, "chunk.text": c.text, "chunk.chapter": c.chapter,
            "chunk.original_document": c.original_document, "chunk.author": c.author, "chunk.source": c.source,
        }
        bad += [f"{p.id}: {k} changed" for k, s in fields.items() if _utf8(s) != v]
        if e.properties != {"payload": p.value, p.value: [p.value, {"nested": p.value}]}:
            bad.append(f"{p.id}: entity.properties changed")
    return bad


def check_graph_store(kg: KG, data: GraphData, payloads: Sequence[Payload]) -> list[str]:
    """The whole graph exports unchanged, and `check_lookups` holds for every payload."""
    arrays = kg.graph.export_edges()
    bad = _same("exported names", sorted(map(_utf8, arrays.node_names)), sorted(_utf8(e.name) for e in data.entities))
    bad += _same("exported types", sorted(map(_utf8, arrays.relation_types)),
                 sorted(_utf8(r.relation_type) for r in data.relations))
    return bad + check_lookups(kg, data, payloads)


def check_lookups(kg: KG, data: GraphData, payloads: Sequence[Payload]) -> list[str]:
    """The payloads' entities and relations read back by id equal what was given; names and types find them."""
    ids = {p.ident for p in payloads}
    entities = [e for e in data.entities if e.id in ids]
    relations = [r for r in data.relations if r.id in ids]
    bad = _same("entities", kg.graph.get_entities([e.id for e in entities]), entities)
    bad += _same("relations", kg.graph.get_relations([r.id for r in relations]), relations)
    for p in payloads:
        if p.value.strip():  # exact lookups trim the name, as typed names are trimmed
            found = [e.id for e in kg.graph.find_entities(p.value, limit=100)]
            bad += [] if p.ident in found else [f"{p.id}: find_entities(name) misses {p.ident!r:.60}"]
        typed = kg.graph.neighbourhood([HUB_ID], relation_types=[p.value])
        bad += _same(f"{p.id}: edges of its relation type", [r.id for r in typed.edges], [p.ident])
    return bad


def check_vector_store(kg: KG, data: GraphData) -> list[str]:
    """Every payload field next to the vectors (Entities, RelationDescriptions, DocumentChunks) equals the input."""
    bad: list[str] = []
    got = {r["id"]: r for r in kg.vectors.get(ENTITIES, [e.id for e in data.entities])}
    for e in data.entities:
        want = {"id": e.id, "name": e.name, "type": e.type, "text": entity_text(e)}
        bad += _same(f"Entities {e.id!r:.40}", got.get(e.id), want)
    got = {r["id"]: r for r in kg.vectors.get(RELATIONS, [r.id for r in data.relations])}
    for r in data.relations:
        want = {"id": r.id, "text": r.description, "source_id": r.source_id, "target_id": r.target_id,
                "relation_type": r.relation_type}
        bad += _same(f"RelationDescriptions {r.id!r:.40}", got.get(r.id), want)
    got = {r["id"]: r for r in kg.vectors.get(CHUNKS, [c.id for c in data.chunks])}
    for c in data.chunks:
        bad += _same(f"DocumentChunks {c.id!r:.40}", got.get(c.id), c.model_dump())
    return bad


def check_chunks(stored: Sequence[Chunk], data: GraphData) -> list[str]:
    """Chunk records read from a graph store's own Chunk nodes equal the input."""
    return _same("chunks", sorted(stored, key=lambda c: c.id), sorted(data.chunks, key=lambda c: c.id))
