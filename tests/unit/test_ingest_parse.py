"""Parsers (native bundle, HippoRAG OpenIE), BM25 index and the ingest content hash, without stores."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from retrieval.config import Settings
from retrieval.errors import IngestError
from retrieval.graph import bm25
from retrieval.ingest.build import check_graph, content_hash, data_counts
from retrieval.ingest.bundle import load_bundle, relation_id
from retrieval.ingest.hipporag import load_hipporag, normalise_phrase, relation_type_of
from retrieval.ingest.load import detect_format
from retrieval.models import Entity, GraphData, Relation

SMALL = Path(__file__).resolve().parents[1] / "data" / "bundles" / "small"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    dst = tmp_path / "bundle"
    shutil.copytree(SMALL, dst)
    return dst


def set_line(path: Path, number: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[number - 1] = text
    path.write_text("\n".join(lines), encoding="utf-8")


def edit_line(path: Path, number: int, **changes: object) -> None:
    obj = json.loads(path.read_text(encoding="utf-8").split("\n")[number - 1])
    obj.update(changes)
    set_line(path, number, json.dumps(obj))


# --- native bundle ------------------------------------------------------------------------------


def test_small_bundle_loads_with_defaults_and_merged_chunks() -> None:
    data = load_bundle(SMALL)
    assert data_counts(data) == {"books": 2, "chapters": 3, "chunks": 5, "entities": 11, "relations": 12}
    chunks = {c.id: c for c in data.chunks}
    # author defaults to the book's author; an explicit one wins; source defaults to the id
    assert chunks["c4"].author == "B. Author" and chunks["c5"].author == "C. Guest"
    assert chunks["c4"].source == "c4"
    # position defaults to the order within the book (c4, c5 are Brand Notes' first two)
    assert (chunks["c4"].position, chunks["c5"].position, chunks["c3"].position) == (0, 1, 2)
    entities = {e.id: e for e in data.entities}
    # own chunks first, then the chunks of its relations, deduplicated
    assert entities["price_elasticity"].source_chunks == ("c1", "c2")
    assert entities["demand"].source_chunks == ("c1", "c4", "c3")
    assert entities["penetration_pricing"].aliases == ("penetration strategy",)
    assert entities["brand_equity"].properties == {"level": 2, "tags": ["brand"]}
    rels = {r.id: r for r in data.relations}
    default_id = relation_id("price_elasticity", "MEASURED_BY", "demand")
    assert default_id in rels and default_id == relation_id("price_elasticity", "MEASURED_BY", "demand")
    assert "rel-equity-premium" in rels
    assert rels[relation_id("price_elasticity", "INFLUENCES", "penetration_pricing")].weight == 2.0
    assert rels[relation_id("positioning", "BUILDS", "brand_equity")].valid_at == "2020-01-01"


@pytest.mark.parametrize(
    ("file", "line", "change", "field", "reason"),
    [
        ("relations.jsonl", 3, '{"source_id": "skimming", ', "json", "Expecting"),
        ("entities.jsonl", 2, {"name": None}, "name", "missing required field"),
        ("entities.jsonl", 2, {"name": 7}, "name", "expected a string, got int"),
        ("chunks.jsonl", 1, {"position": "x"}, "position", "expected an integer"),
        ("chunks.jsonl", 1, {"position": -1}, "position", "must be >= 0"),
        ("chunks.jsonl", 2, {"id": ""}, "id", "must not be empty"),
        ("chunks.jsonl", 2, {"id": "é" * 257}, "id", "longer than 512 bytes"),
        ("chunks.jsonl", 2, {"text": "x" * 65_536}, "text", "65536 bytes of UTF-8; at most 65535"),
        ("entities.jsonl", 2, {"name": "n" * 40_000, "description": "d" * 30_000}, "description", "name + description"),
        ("chunks.jsonl", 2, {"id": "c1"}, "id", "duplicate chunk id 'c1' (first on line 1)"),
        ("chunks.jsonl", 3, {"original_document": "Nowhere"}, "original_document", "unknown book"),
        ("chunks.jsonl", 1, {"colour": "red"}, "colour", "unknown field"),
        ("entities.jsonl", 3, {"id": "demand"}, "id", "duplicate entity id"),
        ("entities.jsonl", 1, {"source_chunks": ["c1", "c99"]}, "source_chunks[1]", "unknown chunk id 'c99'"),
        ("entities.jsonl", 1, {"aliases": "pe"}, "aliases", "expected a list of strings"),
        ("entities.jsonl", 7, {"properties": [1]}, "properties", "expected an object"),
        ("relations.jsonl", 2, {"target_id": "ghost"}, "target_id", "unknown entity id 'ghost'"),
        ("relations.jsonl", 2, {"source_chunks": []}, "source_chunks", "at least one source chunk"),
        ("relations.jsonl", 2, {"relation_type": ""}, "relation_type", "must not be empty"),
        ("relations.jsonl", 2, {"weight": True}, "weight", "expected a number"),
        ("relations.jsonl", 2, {"valid_at": "yesterday"}, "valid_at", "not an ISO-8601"),
        ("relations.jsonl", 2, {"source_id": "price_elasticity", "target_id": "demand",
                                "relation_type": "MEASURED_BY"}, "id", "duplicate relation id"),
        ("entities.jsonl", 4, {"name": "bad\x00name"}, "name", "NUL character"),
        ("entities.jsonl", 4, {"description": "half \ud800 pair"}, "description", "lone surrogate"),
        ("entities.jsonl", 7, {"properties": {"k": "\x00"}}, "properties.k", "NUL character"),
        ("relations.jsonl", 5, "[1, 2]", "line", "expected a JSON object, got a list"),
        ("relations.jsonl", 5, '{"weight": NaN}', "json", "NaN is not valid JSON"),
    ],
)
def test_malformed_line_names_file_line_and_field(
    bundle: Path, file: str, line: int, change: dict[str, object] | str, field: str, reason: str
) -> None:
    if isinstance(change, str):
        set_line(bundle / file, line, change)
    else:
        edit_line(bundle / file, line, **change)
    with pytest.raises(IngestError) as info:
        load_bundle(bundle)
    err = info.value
    assert (Path(err.file).name, err.line, err.field) == (file, line, field)
    assert reason in err.reason
    assert str(err).startswith(f"{bundle / file}:{line}: {field}: ")


def test_blank_lines_keep_physical_line_numbers(bundle: Path) -> None:
    # chunks.jsonl has a blank line 4, so c4 is on line 5
    edit_line(bundle / "chunks.jsonl", 5, text=None)
    with pytest.raises(IngestError, match=r"chunks\.jsonl:5: text: missing required field"):
        load_bundle(bundle)


def test_missing_file_and_bad_encoding(bundle: Path) -> None:
    (bundle / "relations.jsonl").write_bytes(b'{"id": "\xff"}\n')
    with pytest.raises(IngestError, match=r"relations\.jsonl:1: encoding: not valid UTF-8"):
        load_bundle(bundle)
    (bundle / "entities.jsonl").unlink()
    with pytest.raises(IngestError, match=r"entities\.jsonl:0: file: required file is missing"):
        load_bundle(bundle)


def test_strings_are_kept_byte_identical(bundle: Path) -> None:
    hostile = '  "}) MATCH (n) DETACH DELETE n // <script>alert(1)</script> e\u0301 \u00e9 \u202e\t'
    edit_line(bundle / "entities.jsonl", 1, name=hostile, description=hostile[::-1])
    data = load_bundle(bundle)
    entity = next(e for e in data.entities if e.id == "price_elasticity")
    assert entity.name == hostile and entity.description == hostile[::-1]


def test_documents_file_is_optional(bundle: Path) -> None:
    (bundle / "documents.jsonl").unlink()
    data = load_bundle(bundle)
    assert {c.author for c in data.chunks} == {"", "C. Guest"}


# --- HippoRAG ------------------------------------------------------------------------------------


def write_hipporag(root: Path, docs: list[dict[str, object]]) -> Path:
    root.mkdir()
    corpus = [{"title": d["title"], "text": d["text"]} for d in docs]
    (root / "tiny_corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    body = json.dumps({"docs": docs, "ents_by_doc": []})[:-1] + ', "avg_ent_chars": NaN}'
    (root / "openie_tiny_results.json").write_text(body, encoding="utf-8")
    return root


def test_normalisation_matches_hipporag() -> None:
    assert normalise_phrase("  Apple, Inc. ") == "apple inc"
    assert normalise_phrase("Jan-Philip  Solovej") == "jan philip solovej"
    assert normalise_phrase("Dröm") == "dr m"
    assert normalise_phrase("!!!") == ""
    assert relation_type_of("first published in") == "FIRST_PUBLISHED_IN"
    assert relation_type_of("is a part-of") == "IS_A_PART_OF"


def test_hipporag_passages_entities_triples_and_warnings(tmp_path: Path) -> None:
    docs: list[dict[str, object]] = [
        {
            "title": "Apple Inc.",
            "text": "Apple Inc. was founded by Steve Jobs.",
            "extracted_entities": ["Apple Inc.", "Steve Jobs", "!!"],
            "extracted_triples": [
                ["Apple Inc.", "founded by", "Steve Jobs"],
                ["Apple Inc.", "is based in"],  # 2 elements
                ["Apple", "sells", "iPhone", "since", "2007"],  # 5 elements
                ["apple inc", "???", "Steve Jobs"],  # predicate normalises to nothing
            ],
        },
        {
            "title": "Apple Inc.",
            "text": "Steve Jobs co-founded Apple Inc. in Cupertino.",
            "extracted_entities": ["Cupertino"],
            "extracted_triples": [
                ["APPLE INC", "Founded By", "steve jobs."],  # same triple after normalisation
                ["Apple Inc.", "located in", "Cupertino"],
                [1, "x", "y"],  # not strings
            ],
        },
        {"title": "Empty", "text": "Nothing here.", "extracted_entities": [], "extracted_triples": []},
    ]
    data = load_hipporag(write_hipporag(tmp_path / "h", docs))
    assert [(c.id, c.original_document, c.source, c.position) for c in data.chunks] == [
        ("p0", "Apple Inc.", "Apple Inc.", 0),
        ("p1", "Apple Inc.", "Apple Inc.", 1),
        ("p2", "Empty", "Empty", 2),
    ]
    assert data.chunks[1].text == "Steve Jobs co-founded Apple Inc. in Cupertino."
    entities = {e.id: e for e in data.entities}
    assert set(entities) == {"e:apple inc", "e:steve jobs", "e:cupertino"}
    assert entities["e:apple inc"].name == "Apple Inc."  # most frequent surface form
    assert entities["e:apple inc"].source_chunks == ("p0", "p1")
    assert entities["e:cupertino"].source_chunks == ("p1",)
    rels = {(r.source_id, r.relation_type, r.target_id): r for r in data.relations}
    assert set(rels) == {("e:apple inc", "FOUNDED_BY", "e:steve jobs"), ("e:apple inc", "LOCATED_IN", "e:cupertino")}
    founded = rels[("e:apple inc", "FOUNDED_BY", "e:steve jobs")]
    assert founded.description == "Apple Inc. founded by Steve Jobs."
    assert founded.source_chunks == ("p0", "p1") and founded.weight == 2.0
    assert founded.id == relation_id("e:apple inc", "FOUNDED_BY", "e:steve jobs")
    assert rels[("e:apple inc", "LOCATED_IN", "e:cupertino")].source_chunks == ("p1",)
    text = "\n".join(data.warnings)
    assert "skipped 3 malformed triples" in text
    assert "1 with 2 elements" in text and "1 with 3 elements" in text and "1 with 5 elements" in text
    assert "first at docs[0].extracted_triples[1]" in text
    assert "skipped 1 triples with a part that normalises to nothing" in text
    assert "skipped 1 entity phrases" in text
    check_graph(data)


def test_hipporag_mismatched_files_are_rejected(tmp_path: Path) -> None:
    docs: list[dict[str, object]] = [{"title": "A", "text": "a", "extracted_entities": [], "extracted_triples": []}]
    root = write_hipporag(tmp_path / "h", docs)
    (root / "tiny_corpus.json").write_text(json.dumps([{"title": "A", "text": "different"}]), encoding="utf-8")
    with pytest.raises(IngestError, match=r"openie_tiny_results\.json:0: docs\[0\]: title/text differ"):
        load_hipporag(root)
    (root / "tiny_corpus.json").write_text("[{", encoding="utf-8")
    with pytest.raises(IngestError, match=r"tiny_corpus\.json:1: json:"):
        load_hipporag(root)
    (root / "tiny_corpus.json").unlink()
    with pytest.raises(IngestError, match=r"expected exactly one \*_corpus\.json file, found none"):
        load_hipporag(root)


def test_detect_format(tmp_path: Path) -> None:
    assert detect_format(SMALL) == "bundle"
    root = write_hipporag(tmp_path / "h", [])
    assert detect_format(root) == "hipporag"
    with pytest.raises(IngestError, match="no known format"):
        detect_format(tmp_path)


# --- identity and checks -------------------------------------------------------------------------


def test_content_hash_is_canonical_and_sensitive() -> None:
    data = load_bundle(SMALL)
    settings = Settings.from_env(env={})
    digest = content_hash(data, settings, "mini")
    assert digest == content_hash(load_bundle(SMALL), settings, "mini")
    assert digest == content_hash(data.model_copy(update={"warnings": ("x",)}), settings, "mini")
    assert digest != content_hash(data, settings, "other-model")
    assert digest != content_hash(data, settings.with_(graph_backend="falkordb"), "mini")
    changed = data.entities[0].model_copy(update={"name": data.entities[0].name + " "})
    assert digest != content_hash(data.model_copy(update={"entities": (changed, *data.entities[1:])}), settings, "mini")


def test_check_graph_rejects_what_no_store_can_hold() -> None:
    ok = GraphData(entities=(Entity(id="a", name="A"), Entity(id="b", name="B")))
    check_graph(ok)
    dangling = ok.model_copy(update={"relations": (Relation(id="r", source_id="a", target_id="z", relation_type="T"),)})
    with pytest.raises(IngestError, match=r"relations\[0\]\.target_id: unknown entity id 'z'"):
        check_graph(dangling)
    nul = GraphData(entities=(Entity(id="a", name="A", aliases=("ok", "b\x00d")),))
    with pytest.raises(IngestError, match=r"entities\[0\]\.aliases\[1\]: contains a NUL"):
        check_graph(nul)


# --- BM25 ------------------------------------------------------------------------------------------


def test_bm25_ranks_saves_and_loads(tmp_path: Path) -> None:
    ids = ["a", "b", "c", "d"]
    texts = [
        "price elasticity of demand",
        "penetration pricing wins market share",
        "brand equity and price premium",
        "loyalty lowers churn",
    ]
    index = bm25.build_index(ids, texts)
    hits = bm25.search(index, "Price ELASTICITY?", 10)
    assert hits[0][0] == "a" and [h[0] for h in hits] == ["a", "c"]  # only documents sharing a term
    assert hits[0][1] > hits[1][1] > 0
    assert bm25.search(index, "zebra", 5) == []
    assert bm25.search(index, "", 5) == []
    bm25.save_index(index, tmp_path / "bm25")
    loaded = bm25.load_index(tmp_path / "bm25")
    assert loaded.chunk_ids == tuple(ids)
    assert bm25.search(loaded, "price elasticity", 10) == hits
    assert [h[0] for h in bm25.search(loaded, "price", 1)] == ["a"]  # shorter document wins the tie


def test_bm25_empty_corpus(tmp_path: Path) -> None:
    index = bm25.build_index([], [])
    bm25.save_index(index, tmp_path / "e")
    assert bm25.search(bm25.load_index(tmp_path / "e"), "anything", 3) == []
