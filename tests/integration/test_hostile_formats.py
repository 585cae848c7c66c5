"""The hostile corpus through every new import format: accepted payloads read back byte for byte (and, for GraphML,
through Kuzu and Milvus Lite); what a format cannot hold, or what no back end can store, is refused with
`file:line: field: reason` and leaves the live graph as it was."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.errors import IngestError
from retrieval.graph import catalog
from retrieval.graph.runtime import open_kg
from retrieval.ingest import IngestOptions
from retrieval.ingest.build import ingest
from retrieval.ingest.csvgraph import load_csv
from retrieval.ingest.graphml import load_graphml
from retrieval.ingest.graphrag import load_graphrag
from retrieval.ingest.lightrag import load_lightrag
from retrieval.models import GraphData
from tests.data.hostile.formats import write_csv, write_graphml, write_graphrag, write_lightrag, xml_safe
from tests.data.hostile.graph import check_lookups, check_vector_store
from tests.data.hostile.make_bundle import Payload, accepted, load_payloads

pytestmark = pytest.mark.integration

Reader = Callable[[Path], GraphData]
# format -> (writer, reader, payloads it carries, fields it sets to the payload)
FORMATS: dict[str, tuple[Callable[[Path], Path], Reader, Callable[[], list[Payload]], tuple[str, ...]]] = {
    "graphrag": (write_graphrag, load_graphrag, accepted,
                 ("entity.name", "entity.type", "entity.description", "relation.description", "chunk.text",
                  "chunk.book")),
    "lightrag": (write_lightrag, load_lightrag, xml_safe,
                 ("entity.name", "entity.type", "entity.description", "relation.description", "chunk.text",
                  "chunk.book")),
    "graphml": (write_graphml, load_graphml, xml_safe,
                ("entity.name", "entity.type", "entity.description", "relation.relation_type",
                 "relation.description")),
    "csv": (write_csv, lambda p: load_csv(p, IngestOptions(mapping={"type": "kind"})), accepted,
            ("entity.name", "entity.type", "entity.description", "relation.relation_type", "relation.description")),
}


def changed(data: GraphData, payloads: list[Payload], fields: tuple[str, ...]) -> list[str]:
    """Fields whose stored bytes differ from the payload's."""
    by_name = {e.name: e for e in data.entities}
    rel_by_target = {r.target_id: r for r in data.relations}
    chunk_by_text = {c.text: c for c in data.chunks}
    bad = []
    for p in payloads:
        e = by_name.get(p.value)
        if e is None:
            bad.append(f"{p.id}: no entity named by it")
            continue
        r = rel_by_target.get(e.id)
        c = chunk_by_text.get(p.value)
        got = {"entity.name": e.name, "entity.type": e.type, "entity.description": e.description,
               "relation.relation_type": r.relation_type if r else None,
               "relation.description": r.description if r else None,
               "chunk.text": c.text if c else None, "chunk.book": c.original_document if c else None}
        bad += [f"{p.id}: {f}" for f in fields if got[f] is None or got[f].encode() != p.value.encode()]
    return bad


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_reads_the_corpus_byte_identically(tmp_path: Path, fmt: str) -> None:
    write, read, payloads, fields = FORMATS[fmt]
    data = read(write(tmp_path / fmt))
    carried = payloads()
    assert len(carried) >= 55
    assert changed(data, carried, fields) == []


def test_xml_formats_refuse_control_characters_with_their_line(tmp_path: Path) -> None:
    bad = [p for p in accepted() if p not in xml_safe()]
    assert [p.id for p in bad] == ["control-chars"]  # C0 controls: not even a character reference can hold them
    path = write_graphml(tmp_path / "g", bad)
    with pytest.raises(IngestError) as caught:
        load_graphml(path)
    line = next(i for i, row in enumerate(path.read_text().splitlines(), 1) if "\x01" in row)
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(path), line, "xml")
    assert "not well-formed" in caught.value.reason


def test_nul_and_lone_surrogates_are_refused_by_table_row_and_column(tmp_path: Path) -> None:
    nul = next(p for p in load_payloads() if p.id == "nul")
    root = write_graphrag(tmp_path / "g", accepted()[:3])
    rows = pq.read_table(root / "entities.parquet").to_pylist()
    rows[2]["description"] = nul.value
    pq.write_table(pa.Table.from_pylist(rows), root / "entities.parquet")
    with pytest.raises(IngestError, match=r"entities.parquet:3: description: contains a NUL character"):
        load_graphrag(root)
    rag = write_lightrag(tmp_path / "r", accepted()[:3])
    store = rag / "kv_store_text_chunks.json"
    chunks = json.loads(store.read_text())
    chunks["chunk-1"]["content"] = "abc\ud800def"
    store.write_text(json.dumps(chunks, indent=2), encoding="utf-8")  # \ud800 as JSON allows it, escaped
    line = next(i for i, row in enumerate(store.read_text().splitlines(), 1) if row.startswith('  "chunk-1"'))
    with pytest.raises(IngestError) as caught:
        load_lightrag(rag)
    assert str(caught.value) == f"{store}:{line}: content: contains a lone surrogate (not valid Unicode)"
    csv_dir = write_csv(tmp_path / "c", accepted()[:3])
    rows_text = (csv_dir / "nodes.csv").read_text(encoding="utf-8").splitlines()
    rows_text[2] = rows_text[2].replace(",", ",before\x00after", 1)
    (csv_dir / "nodes.csv").write_text("\n".join(rows_text) + "\n", encoding="utf-8")
    with pytest.raises(IngestError, match=r"nodes.csv:3: name: contains a NUL character"):
        load_csv(csv_dir)


# The payloads that stress storage most (quoting, escapes, line breaks, Unicode forms, length): the stores take the
# same GraphData from every reader, and test_hostile_stores.py runs the whole corpus through them.
STORE_SAMPLE = ("html-script", "attr-double-quote", "js-line-separators", "js-backslash", "cypher-dq-breakout",
                "cypher-escapes", "milvus-expr", "sql-drop", "path-dotdot", "rtl-override", "zero-width",
                "combining-zalgo", "nfd-vs-nfc", "astral", "line-breaks", "nbsp-only", "long-10k")


def test_hostile_graphml_round_trips_through_the_stores_and_a_bad_one_changes_nothing(
    tmp_path: Path, embedder: Embedder
) -> None:
    settings = Settings.from_env(env={}, data_dir=tmp_path / "kg")
    sample = [p for p in xml_safe() if p.id in STORE_SAMPLE]
    assert len(sample) == len(STORE_SAMPLE)
    source = write_graphml(tmp_path / "src", sample)
    report = ingest(settings, source.parent, fmt="graphml", name="hostile-xml", embedder=embedder, progress=False)
    data = load_graphml(source)
    kg = open_kg(settings, "hostile-xml", embedder)
    try:
        assert check_lookups(kg, data, sample) == []
        assert check_vector_store(kg, data) == []
        assert kg.communities.communities  # computed (Leiden) at ingest
    finally:
        kg.close()
    bad = write_graphml(tmp_path / "bad", [p for p in accepted() if p not in xml_safe()])
    with pytest.raises(IngestError, match="xml"):
        ingest(settings, bad.parent, fmt="graphml", name="hostile-xml", embedder=embedder, progress=False)
    assert catalog.resolve(settings.data_dir, "hostile-xml").version == report.version
