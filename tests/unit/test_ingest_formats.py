"""Readers of other tools' graphs without stores: GraphRAG (current and create_final_* layouts), LightRAG (a working
dir written by lightrag-hku itself), GraphML (Neo4j APOC, Gephi layout, networkx), Neo4j admin-import CSV; chapter
headings; computed communities."""

from __future__ import annotations

import shutil
from pathlib import Path

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from retrieval.errors import IngestError
from retrieval.graph.communities import chapter_names, claim_text, compute_communities
from retrieval.graph.index import GraphIndex, build_index
from retrieval.graph.traverse import sample_question
from retrieval.ingest import IngestOptions
from retrieval.ingest.books import read_text
from retrieval.ingest.build import check_graph
from retrieval.ingest.csvgraph import load_csv
from retrieval.ingest.graphml import load_graphml
from retrieval.ingest.graphrag import load_graphrag
from retrieval.ingest.headings import chapters
from retrieval.ingest.lightrag import load_lightrag
from retrieval.ingest.load import detect_format
from retrieval.models import Entity, GraphData, Relation
from retrieval.stores.base import EdgeArrays
from tests.conftest import ROOT
from tests.data.graphrag_book import write_graphrag_book

DULCE = ROOT.parent / "shared" / "data" / "graphrag_operation_dulce"
DATA = ROOT / "tests" / "data"
LIGHTRAG = DATA / "lightrag" / "workdir"
APOC = DATA / "graphml" / "neo4j_apoc.graphml"
GEPHI = DATA / "graphml" / "gephi.graphml"
MOVIES = DATA / "csv" / "movies"
needs_dulce = pytest.mark.skipif(not DULCE.is_dir(), reason=f"shared GraphRAG index not found at {DULCE}")


# --- chapters ------------------------------------------------------------------------------------


def test_a_chunk_belongs_to_the_heading_in_force_where_its_text_starts() -> None:
    doc = "# Book\n\n## Chapter 1\n\nalpha beta\ngamma\n## Chapter 2\n\ndelta\n```\n# not a heading\n```\nomega"
    chunks = ["# Book\n\n## Chapter 1\n\nalpha beta", "gamma\n## Chapter 2", "delta\n```\n# not a heading\n```",
              "omega"]
    assert chapters(doc, chunks) == ["Chapter 1", "Chapter 1", "Chapter 2", "Chapter 2"]
    # without the document text the chunks, in order, stand for it
    assert chapters(None, chunks) == ["Chapter 1", "Chapter 1", "Chapter 2", "Chapter 2"]
    assert chapters(None, ["no headings here"]) == [""]


def test_chapters_of_a_plain_text_document_come_from_its_heading_lines_not_its_contents_or_licence() -> None:
    body = "She walked in. " * 30
    doc = ("Title: A Book\n\n*** START OF THE PROJECT GUTENBERG EBOOK A BOOK ***\n\nCONTENTS\n\n"
           "  STAVE I.   MARLEY'S GHOST\n  STAVE II.  THE FIRST SPIRIT\n\n\n"
           f"STAVE ONE.\n\n{body}\n\nSTAVE TWO.\n\n{body}\n\n"
           "*** END OF THE PROJECT GUTENBERG EBOOK A BOOK ***\n\nSection 1. General Terms of Use\n\nlicence text\n")
    cuts = [doc.index("CONTENTS"), doc.index("STAVE ONE"), doc.index("She", doc.index("STAVE ONE")) + 40,
            doc.index("STAVE TWO"), doc.index("*** END"), doc.index("licence text")]
    pieces = [doc[a:b] for a, b in zip([0, *cuts], [*cuts, len(doc)], strict=True)]
    assert chapters(doc, pieces) == ["", "", "STAVE ONE.", "STAVE ONE.", "STAVE TWO.", "", ""]


# --- GraphRAG -----------------------------------------------------------------------------------


@needs_dulce
def test_graphrag_index_keeps_every_relationship_community_and_claim() -> None:
    stages: list[tuple[str, int, int]] = []
    data = load_graphrag(DULCE, IngestOptions(progress=lambda *a: stages.append(a)))
    check_graph(data)
    assert (len(data.chunks), len(data.entities), len(data.relations)) == (5, 41, 107)
    assert {c.original_document for c in data.chunks} == {"dulce.txt"}
    assert [c.chapter for c in sorted(data.chunks, key=lambda c: c.position)] == [
        "Chapter 1", "Chapter 1", "Chapter 2", "Chapter 2", "Chapter 3"]  # unit 1 starts before "## Chapter 2"
    assert chapter_names(data.chunks) == {"dulce.txt": ("Chapter 1", "Chapter 2", "Chapter 3")}
    missing = {e.name: e for e in data.entities if e.type == "unknown"}
    assert set(missing) == {"ELEVATOR", "CONCRETE HALLWAY"}
    assert all(e.source_chunks for e in missing.values())  # sourced from their relationships' text units
    assert any("2 relationship endpoints" in w and "ELEVATOR" in w for w in data.warnings)
    assert {r.relation_type for r in data.relations} == {"RELATED_TO"}
    assert max(r.weight for r in data.relations) == 21.0
    levels = {c.id: c for c in data.communities}
    assert len(levels) == 10 and {c.level for c in data.communities} == {0, 1}
    assert levels["0"].children == ("7", "8", "9") and levels["7"].parent == "0"
    assert levels["2"].rank == 9.0 and levels["2"].source == "graphrag" and levels["2"].findings
    assert levels["0"].size == len(levels["0"].entity_ids) == 10
    assert len(data.claims) == 41
    alex = next(e.id for e in data.entities if e.name == "ALEX MERCER")
    mine = [c for c in data.claims if c.subject_id == alex]
    assert len(mine) == 6 and any(c.object == "TAYLOR CRUZ" and c.object_id for c in mine)
    assert sum(c.subject_id is None for c in data.claims) == 7  # subjects that are no entity stay text
    assert claim_text(mine[0]).startswith("ALEX MERCER [")
    assert ("reading entities.parquet", 39, 39) in stages


def _index(data: GraphData) -> GraphIndex:
    """The in-memory index of `data` (what an opened graph version searches)."""
    at = {e.id: i for i, e in enumerate(data.entities)}
    return build_index(EdgeArrays(
        node_ids=[e.id for e in data.entities], node_names=[e.name for e in data.entities],
        node_types=[e.type for e in data.entities], node_chunks=[e.source_chunks for e in data.entities],
        src=np.array([at[r.source_id] for r in data.relations], dtype=np.int64),
        dst=np.array([at[r.target_id] for r in data.relations], dtype=np.int64),
        weight=np.array([r.weight for r in data.relations], dtype=np.float64),
        relation_ids=[r.id for r in data.relations], relation_types=[r.relation_type for r in data.relations]))


@needs_dulce
def test_a_graphrag_book_gets_the_chapters_the_documents_format_finds_in_its_text(tmp_path: Path) -> None:
    """A novel as GraphRAG stores it: the whole Gutenberg-style text in documents.text (heading lines, a contents
    list, a licence), text units cut across the headings and prefixed `title: dulce.txt.`."""
    root = write_graphrag_book(DULCE, tmp_path / "book")
    data = load_graphrag(root)
    document = pq.read_table(root / "documents.parquet").to_pylist()[0]["text"]
    (tmp_path / "dulce.txt").write_text(document, encoding="utf-8")
    book = read_text(tmp_path / "dulce.txt", "dulce.txt")  # the documents format's reading of the same text
    assert book.chapters_from == "heading lines"
    names = ("CHAPTER I. THE BRIEFING", "CHAPTER II. THE DESCENT", "CHAPTER III. THE MAINFRAME")
    assert tuple(dict.fromkeys(s.chapter for s in book.sections if s.chapter)) == names
    assert chapter_names(data.chunks) == {"dulce.txt": names}
    ordered = sorted(data.chunks, key=lambda c: c.position)
    assert len(ordered) > 6 and ordered[0].chapter == ""  # the header and the contents: before the first chapter
    for chunk in ordered[1:]:  # each unit: the chapter of the documents format's section where its text starts
        at = document.index(chunk.text.strip()[:200])
        section = max((s for s in book.sections if s.start <= at), key=lambda s: s.start)
        assert chunk.chapter == section.chapter, chunk.position
    assert not any(c.text.startswith("title:") for c in data.chunks)  # GraphRAG's metadata line is not text
    assert ordered[0].text.startswith("The Project Gutenberg eBook")
    question = sample_question(_index(data)) or ""
    assert "ALEX MERCER" in question and "GUTENBERG" not in question and " EIN" not in question, question


def test_lightrag_custom_kg_placeholder_books_are_named_by_document_id_and_said_once(tmp_path: Path) -> None:
    root = tmp_path / "rag"
    shutil.copytree(LIGHTRAG, root)
    for name in ("kv_store_text_chunks.json", "kv_store_doc_status.json"):  # as insert_custom_kg writes it
        store = root / name
        store.write_text(store.read_text(encoding="utf-8").replace('"unknown_source"', '"custom_kg"'), "utf-8")
    data = load_lightrag(root)
    assert {c.original_document for c in data.chunks} == {"doc-notes", "engines.md", "turing.md"}
    notes = [w for w in data.warnings if "without a title" in w]
    assert len(notes) == 1 and "doc-notes" in notes[0] and "custom_kg" in notes[0]


def _legacy_copy(src: Path, dst: Path) -> Path:
    """The shared index renamed to GraphRAG's pre-1.0 `create_final_*` layout (no real legacy output is
    available here): entities `name` for `title`, documents `raw_content` for `text`, text units `document_ids`,
    relationships `rank` for `combined_degree`, communities keyed by `id` without parent/children/members (the
    members go to create_final_nodes, one row per entity and level), reports `rank_explanation`."""
    dst.mkdir()

    def rename(table: str, columns: dict[str, str], drop: tuple[str, ...] = ()) -> pa.Table:
        t = pq.read_table(src / f"{table}.parquet")
        t = t.drop_columns([c for c in drop if c in t.column_names])
        return t.rename_columns([columns.get(c, c) for c in t.column_names])

    pq.write_table(rename("documents", {"text": "raw_content"}), dst / "create_final_documents.parquet")
    units = pq.read_table(src / "text_units.parquet")
    units = units.append_column("document_ids", pa.array([[d] for d in units.column("document_id").to_pylist()]))
    pq.write_table(units.drop_columns(["document_id"]), dst / "create_final_text_units.parquet")
    pq.write_table(rename("entities", {"title": "name"}), dst / "create_final_entities.parquet")
    pq.write_table(rename("relationships", {"combined_degree": "rank"}), dst / "create_final_relationships.parquet")
    comms = pq.read_table(src / "communities.parquet").to_pylist()
    pq.write_table(pa.Table.from_pylist([{"id": str(c["community"]), "title": c["title"], "level": c["level"],
                                          "relationship_ids": c["relationship_ids"],
                                          "text_unit_ids": c["text_unit_ids"]} for c in comms]),
                   dst / "create_final_communities.parquet")
    names = {r["id"]: r["title"] for r in pq.read_table(src / "entities.parquet").to_pylist()}
    nodes = [{"id": e, "title": names.get(e, e), "community": str(c["community"]), "level": c["level"]}
             for c in comms for e in c["entity_ids"]]
    pq.write_table(pa.Table.from_pylist(nodes), dst / "create_final_nodes.parquet")
    pq.write_table(rename("community_reports", {"rating_explanation": "rank_explanation"}, ("parent", "children")),
                   dst / "create_final_community_reports.parquet")
    pq.write_table(pq.read_table(src / "covariates.parquet"), dst / "create_final_covariates.parquet")
    return dst


@needs_dulce
def test_graphrag_legacy_layout_reads_the_same_graph(tmp_path: Path) -> None:
    current = load_graphrag(DULCE)
    legacy_dir = _legacy_copy(DULCE, tmp_path / "legacy")
    assert detect_format(legacy_dir) == "graphrag"
    legacy = load_graphrag(legacy_dir)
    assert legacy.chunks == current.chunks and legacy.entities == current.entities
    assert legacy.relations == current.relations and legacy.claims == current.claims
    by_id = {c.id: c for c in current.communities}
    for c in legacy.communities:  # members and parents rebuilt from create_final_nodes
        want = by_id[c.id]
        assert (set(c.entity_ids), c.parent, set(c.children), c.rank, c.title) == (
            set(want.entity_ids), want.parent, set(want.children), want.rank, want.title)


@needs_dulce
def test_graphrag_errors_name_table_row_and_column(tmp_path: Path) -> None:
    root = tmp_path / "g"
    shutil.copytree(DULCE, root)
    rows = pq.read_table(root / "relationships.parquet").to_pylist()
    rows[2]["description"] = "NUL \x00 inside"
    pq.write_table(pa.Table.from_pylist(rows), root / "relationships.parquet")
    with pytest.raises(IngestError) as caught:
        load_graphrag(root)
    assert str(caught.value) == f"{root / 'relationships.parquet'}:3: description: contains a NUL character"
    (root / "text_units.parquet").unlink()
    with pytest.raises(IngestError, match=r"text_units.parquet:0: file: required table is missing"):
        load_graphrag(root)
    shutil.copy(DULCE / "text_units.parquet", root)
    (root / "entities.parquet").write_bytes(b"not parquet")
    with pytest.raises(IngestError, match=r"entities.parquet:0: parquet: not a readable Parquet file"):
        load_graphrag(root)


# --- LightRAG -----------------------------------------------------------------------------------


def test_lightrag_fixture_written_by_lightrag_round_trips() -> None:
    """The working dir lightrag-hku 1.5.7 wrote (make_fixture.py): counts equal its graphml's, read by networkx."""
    graph = nx.read_graphml(LIGHTRAG / "graph_chunk_entity_relation.graphml")
    data = load_lightrag(LIGHTRAG)
    check_graph(data)
    assert detect_format(LIGHTRAG) == "lightrag"
    assert len(data.entities) == graph.number_of_nodes() == 11
    assert len(data.relations) == graph.number_of_edges() == 9
    assert {e.id for e in data.entities} == set(graph.nodes)
    assert {frozenset((r.source_id, r.target_id)) for r in data.relations} == {frozenset(e) for e in graph.edges}
    turing = next(e for e in data.entities if e.id == "Alan Turing")  # merged by LightRAG: <SEP>-joined values
    assert turing.description.split("\n") == graph.nodes["Alan Turing"]["description"].split("<SEP>")
    assert len(turing.source_chunks) == 2
    bombe = next(r for r in data.relations if {r.source_id, r.target_id} == {"Alan Turing", "Bombe"})
    assert bombe.relation_type == "RELATED_TO" and bombe.description.endswith("Keywords: codebreaking, design")
    chunks = sorted(data.chunks, key=lambda c: (c.original_document, c.position))
    assert [(c.original_document, c.chapter) for c in chunks] == [
        ("doc-notes", ""),  # file_path is LightRAG's placeholder: the document id names the book
        ("engines.md", "Chapter 1: The Difference Engine"), ("engines.md", "Chapter 1: The Difference Engine"),
        ("engines.md", "Chapter 2: The Notes"),
        ("turing.md", "Part I: Computable Numbers"), ("turing.md", "Part II: Bletchley Park")]
    assert any("created_at" in w for w in data.warnings)  # edge attributes a relation cannot hold are named


def test_lightrag_errors_name_the_store_and_line(tmp_path: Path) -> None:
    root = tmp_path / "rag"
    shutil.copytree(LIGHTRAG, root)
    store = root / "kv_store_text_chunks.json"
    text = store.read_text(encoding="utf-8")
    store.write_text(text.replace('"chunk_order_index": 1,', '"chunk_order_index": "one",', 1), encoding="utf-8")
    line = next(i for i, row in enumerate(store.read_text().splitlines(), 1) if '"one"' in row)
    with pytest.raises(IngestError) as caught:
        load_lightrag(root)
    assert caught.value.file == str(store) and caught.value.field == "chunk_order_index"
    assert 0 < caught.value.line < line  # the line of its record's key
    store.write_text("{", encoding="utf-8")
    with pytest.raises(IngestError, match="kv_store_text_chunks.json:1: json"):
        load_lightrag(root)


# --- GraphML ------------------------------------------------------------------------------------


def test_neo4j_apoc_export_maps_labels_types_and_arrays() -> None:
    data = load_graphml(APOC)
    nodes = {e.id: e for e in data.entities}
    assert (nodes["n0"].name, nodes["n0"].type) == ("foo", "Foo")
    assert nodes["n0"].properties["labels"] == ["Foo", "Foo0", "Foo2"]
    assert nodes["n0"].properties["born"] == "2018-10-10"
    assert nodes["n2"].name == "n2" and nodes["n2"].properties["values"] == [1, 2, 3]  # no name: the id
    assert [(r.source_id, r.relation_type, r.target_id) for r in data.relations] == [("n0", "KNOWS", "n1")]


def test_gephi_layout_and_mapping_flags() -> None:
    data = load_graphml(GEPHI)
    names = {e.id: e.name for e in data.entities}
    assert names == {"11": "Valjean", "27": "Javert", "23": "Fantine", "25": "Thenardier"}
    rels = {r.id: r for r in data.relations}
    assert (rels["0"].relation_type, rels["0"].weight) == ("pursues", 17.0)
    assert rels["1"].relation_type == "RELATED_TO"  # no Edge Label: the documented rule, no invented type
    mapped = load_graphml(GEPHI, IngestOptions(mapping={"type": "Modularity Class", "relation_type": "weight"}))
    assert {e.type for e in mapped.entities} == {"1", "2", "3"}
    assert {r.relation_type for r in mapped.relations} == {"17.0", "9.0", "5.0"}
    with pytest.raises(IngestError, match="unknown mapping colour"):
        load_graphml(GEPHI, IngestOptions(mapping={"colour": "r"}))


def test_networkx_output_reads_back(tmp_path: Path) -> None:
    g = nx.MultiDiGraph()
    g.add_node("ada", name="Ada Lovelace", type="person", description="Wrote Note G.", born=1815, alive=False)
    g.add_node("engine", label="Analytical Engine", type="machine")
    g.add_edge("ada", "engine", type="PROGRAMMED", description="Ada programmed the engine.", weight=2.5)
    g.add_edge("ada", "engine", type="PROGRAMMED", weight=1.0)  # a parallel edge of the same type
    g.add_edge("engine", "babbage")  # an endpoint networkx adds as a bare node
    nx.write_graphml(g, tmp_path / "g.graphml")
    assert detect_format(tmp_path) == "graphml"
    data = load_graphml(tmp_path)
    nodes = {e.id: e for e in data.entities}
    assert (nodes["ada"].name, nodes["ada"].type, nodes["ada"].description) == ("Ada Lovelace", "person",
                                                                                "Wrote Note G.")
    assert nodes["ada"].properties == {"born": 1815, "alive": False}
    assert nodes["engine"].name == "Analytical Engine" and nodes["babbage"].name == "babbage"
    assert sorted((r.relation_type, r.weight) for r in data.relations) == [
        ("PROGRAMMED", 1.0), ("PROGRAMMED", 2.5), ("RELATED_TO", 1.0)]
    assert len({r.id for r in data.relations}) == 3


BOMB = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns"><graph><node id="&lol2;"/></graph></graphml>"""
XXE = """<?xml version="1.0"?>
<!DOCTYPE g [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns"><graph><node id="&xxe;"/></graph></graphml>"""


@pytest.mark.parametrize(("text", "error"), [
    (BOMB, r"x.graphml:2: xml: refused: DTDForbidden"),
    (XXE, r"x.graphml:2: xml: refused: DTDForbidden"),
    ('<graphml><graph>\n<node id="a"/>\n<node id="b"></graph></graphml>', r"x.graphml:3: xml: mismatched tag"),
    ('<graphml><graph>\n<node id="a&#0;"/></graph></graphml>', r"x.graphml:2: xml: reference to invalid character"),
    ('<graphml><graph>\n<node id="a"><data key="nope">1</data></node></graph></graphml>',
     r"x.graphml:2: data: undeclared key 'nope'"),
    ('<graphml><key id="w" for="edge" attr.name="weight" attr.type="double"/><graph><node id="a"/>\n'
     '<edge source="a" target="a"><data key="w">heavy</data></edge></graph></graphml>',
     r"x.graphml:2: data\[weight\]: expected a double, got 'heavy'"),
    ('<graphml><graph><hyperedge/></graph></graphml>', r"hyperedge: hyperedges are not supported"),
    ("<nothing/>", r"x.graphml:0: graph: no <graph> element"),
])
def test_graphml_refuses_unsafe_or_malformed_xml_with_its_line(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "x.graphml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(IngestError, match=error):
        load_graphml(path)


def test_yed_labels_become_names(tmp_path: Path) -> None:
    path = tmp_path / "y.graphml"
    path.write_text(
        '<graphml xmlns="http://graphml.graphdrawing.org/xmlns" xmlns:y="http://www.yworks.com/xml/graphml">'
        '<key id="d0" for="node" yfiles.type="nodegraphics"/><graph edgedefault="directed">'
        '<node id="n0"><data key="d0"><y:ShapeNode><y:Fill color="#FFCC00"/><y:NodeLabel>Start</y:NodeLabel>'
        "</y:ShapeNode></data></node></graph></graphml>", encoding="utf-8")
    assert [(e.name, e.properties) for e in load_graphml(path).entities] == [("Start", {})]


# --- CSV ----------------------------------------------------------------------------------------


def test_neo4j_admin_import_csv() -> None:
    data = load_csv(MOVIES)
    assert detect_format(MOVIES) == "csv"
    nodes = {e.id: e for e in data.entities}
    assert (nodes["keanu"].name, nodes["keanu"].type, nodes["keanu"].properties["born"]) == (
        "Keanu Reeves", "Person", 1964)
    assert nodes["keanu"].properties["labels"] == ["Person", "Actor"]
    assert nodes["matrix"].name == "The Matrix"  # no `name` value: the next name column with one
    assert sorted(r.relation_type for r in data.relations) == ["ACTED_IN"] * 3 + ["DIRECTED"] * 2
    assert any("roles (3)" in w for w in data.warnings)  # relationship properties a relation cannot hold


@pytest.mark.parametrize(("nodes", "error"), [
    ('id:ID,name,born:int\na,A,1\nb,"B\nsecond line",x\n', r"nodes.csv:3: born:int: expected int, got 'x'"),
    ("id:ID,name\na,A\na,again\n", r"nodes.csv:3: id:ID: duplicate id 'a' \(first on line 2\)"),
    ("id:ID,name\na,A,extra\n", r"nodes.csv:2: record: 3 fields but the header has 2"),
    ("id:ID,size:huge\na,1\n", r"nodes.csv:1: size:huge: unknown type 'huge'"),
    ("id:ID,name\na,A\x00B\n", r"nodes.csv:2: name: contains a NUL character"),
    ("name\nA\n", r"nodes.csv:2: :ID: nodes.csv needs an :ID column"),
])
def test_csv_errors_name_file_line_and_column(tmp_path: Path, nodes: str, error: str) -> None:
    (tmp_path / "nodes.csv").write_text(nodes, encoding="utf-8")
    (tmp_path / "relationships.csv").write_text(":START_ID,:END_ID,:TYPE\n", encoding="utf-8")
    with pytest.raises(IngestError, match=error):
        load_csv(tmp_path)


def test_csv_encoding_and_id_spaces(tmp_path: Path) -> None:
    (tmp_path / "nodes.csv").write_bytes(b"id:ID(Person),name\n1,Ana\n")
    (tmp_path / "relationships.csv").write_text(":START_ID(Person),:END_ID(Movie),:TYPE\n1,7,SAW\n",
                                                encoding="utf-8")
    data = load_csv(tmp_path)  # 7 is no node: an entity of type unknown, counted in the warnings
    assert {e.id: e.type for e in data.entities} == {"1": "entity", "7": "unknown"}
    assert any("not in nodes.csv" in w for w in data.warnings)
    (tmp_path / "nodes.csv").write_bytes("id:ID,name\n1,Ana\n2,Zo\xe9\n".encode("latin-1"))
    with pytest.raises(IngestError, match="nodes.csv:0: encoding: not valid UTF-8"):
        load_csv(tmp_path)


# --- computed communities -----------------------------------------------------------------------


def _two_cliques() -> GraphData:
    ents = [Entity(id=f"{g}{i}", name=f"{g.upper()}{i}", type="person" if g == "a" else "place")
            for g in "ab" for i in range(5)]
    rels = [Relation(id=f"{g}{i}-{j}", source_id=f"{g}{i}", target_id=f"{g}{j}", relation_type=f"IN_{g.upper()}")
            for g in "ab" for i in range(5) for j in range(i + 1, 5)]
    rels.append(Relation(id="bridge", source_id="a0", target_id="b0", relation_type="BRIDGE"))
    return GraphData(entities=tuple(ents), relations=tuple(rels))


def test_leiden_communities_are_deterministic_and_described_from_counts() -> None:
    first, second = compute_communities(_two_cliques()), compute_communities(_two_cliques())
    assert first == second
    assert sorted(sorted(c.entity_ids) for c in first) == [[f"a{i}" for i in range(5)], [f"b{i}" for i in range(5)]]
    a = next(c for c in first if "a0" in c.entity_ids)
    assert a.source == "computed" and a.rank is None and a.level == 0 and a.size == 5
    assert a.title.startswith("A0") and "(+2)" in a.title  # the most connected entity first (the bridge end)
    assert len(a.relation_ids) == 10 and "bridge" not in a.relation_ids
    assert "5 entities, 10 relations between them" in a.summary and "IN_A 10" in a.summary
    assert compute_communities(GraphData(entities=(Entity(id="x", name="x"),))) == ()
