"""`ingest --format documents` end to end on the real stores and MiniLM: one book per format, offline extraction,
idempotent re-ingest, hostile file names and text byte-identical through the stores, and refused input that
leaves the live graph untouched."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.errors import IngestError
from retrieval.evaluation.passage_rank import load_hipporag_queries
from retrieval.graph import catalog
from retrieval.graph.runtime import open_kg
from retrieval.ingest import IngestOptions
from retrieval.ingest.build import build_graph, ingest
from retrieval.ingest.load import detect_format, load_data
from retrieval.search.retriever import search
from tests.conftest import MUSIQUE
from tests.data.documents.make_docs import QUERY, make_zip, write_library
from tests.data.hostile.graph import check_vector_store
from tests.data.hostile.make_bundle import accepted, rejected

pytestmark = pytest.mark.integration


def _file_name_ok(value: str) -> bool:
    raw = value.encode("utf-8")
    return "/" not in value and not value.startswith(".") and 0 < len(raw) <= 200 and value.strip() == value


def test_a_library_of_every_format_builds_searches_and_reingests_unchanged(tmp_path: Path, embedder: Embedder
                                                                           ) -> None:
    """One book per format, an unsupported file, a link out of the folder, and a sub-folder of hostile file names
    and texts, which come back byte for byte from the stores."""
    folder = write_library(tmp_path / "library")
    (folder / "cover.png").write_bytes(b"\x89PNG")
    (folder / "escape.txt").symlink_to("/etc/hostname")
    hostile = folder / "hostile"
    hostile.mkdir()
    good = accepted()
    book = "".join(f"Chapter {i + 1}\n\n<<{p.value}>>\n\n" for i, p in enumerate(good))
    (hostile / "all payloads.txt").write_text(book, encoding="utf-8")
    named = [p for p in good if _file_name_ok(p.value)]
    assert len(named) >= 20
    for p in named:
        (hostile / f"{p.value}.md").write_text(f"Text of {p.id}.\n", encoding="utf-8")
    settings = Settings.from_env(env={}, data_dir=tmp_path / "kg", chunk_tokens=512)
    assert detect_format(folder) == "documents"
    stages: list[str] = []
    options = IngestOptions(settings=settings, progress=lambda stage, done, total: stages.append(stage))
    data = load_data(folder, "documents", options)
    assert {"reading", "extracting", "merging"} <= set(stages)
    payload_chunks = [c for c in data.chunks if c.original_document == "all payloads"]
    assert [c.text.encode("utf-8") for c in payload_chunks] == [f"<<{p.value}>>".encode() for p in good]
    assert {p.value for p in named} <= {c.original_document for c in data.chunks}  # file names as titles
    report = build_graph(settings, data, "library", embedder=embedder, progress=False)
    assert report.counts["books"] == 5 + len(named) and report.counts["chapters"] == 5 + len(good)
    text = "\n".join(report.warnings)
    assert "no GEMINI_API_KEY, so the offline extractor" in text
    assert "skipped 1 files that are not .txt/.md/.pdf/.epub: 'cover.png'" in text
    assert "skipped 1 links that lead outside the folder: 'escape.txt'" in text
    again = ingest(settings, folder, name="library", embedder=embedder, progress=False)
    assert again.unchanged and again.version == report.version
    kg = open_kg(settings, "library", embedder)
    try:
        assert check_vector_store(kg, data) == []  # every chunk, entity and relation field byte-identical
        result = search(kg, QUERY)
        sources = {(s.original_document, s.chapter) for f in result.facts for s in f.sources}
        assert ("The Storm at Cabo Frio", "The Storm") in sources
        silva = kg.graph.find_entities("Marta Silva")
        assert silva and len(silva[0].source_chunks) >= 3  # merged across three books of three formats
    finally:
        kg.close()
    with zipfile.ZipFile(make_zip(tmp_path / "library.zip")) as zf:
        assert sorted(zf.namelist()) == ["lighthouse.pdf", "medal.md", "orchard.txt", "storm.epub"]


def test_refused_documents_name_the_file_and_keep_the_live_graph(tmp_path: Path, embedder: Embedder) -> None:
    settings = Settings.from_env(env={}, data_dir=tmp_path / "kg")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "ok.md").write_text("## One\n\nAda Lovelace met Charles Babbage in London.\n", encoding="utf-8")
    live = ingest(settings, folder, name="docs", embedder=embedder, progress=False)
    sub = folder / "part two"
    sub.mkdir()
    for p in rejected():
        bad = sub / "bad.txt"
        bad.write_bytes(f"Chapter 1\n\nbefore {p.value} after\n".encode("utf-8", "surrogatepass"))
        with pytest.raises(IngestError) as caught:
            ingest(settings, folder, name="docs", embedder=embedder, progress=False)
        assert str(caught.value).startswith("part two/bad.txt:")  # relative to the folder given, not absolute
        assert str(tmp_path) not in str(caught.value)
    (sub / "bad.txt").unlink()
    sub.rmdir()
    (folder / "ok.md").unlink()
    (folder / "photo.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(IngestError, match=r"docs:0: path: no \.epub, \.markdown, \.md, \.pdf, \.text, \.txt files; "
                                          r"found only 'photo\.jpg'"):
        ingest(settings, folder, fmt="documents", name="docs", embedder=embedder, progress=False)
    assert catalog.resolve(settings.data_dir, "docs").version == live.version


@pytest.mark.skipif(not MUSIQUE.is_dir(), reason=f"MuSiQue benchmark not found at {MUSIQUE}")
def test_musique_passages_as_documents_map_back_to_their_gold_passages(tmp_path: Path) -> None:
    """`eval --format documents`: each passage written as a Markdown file is one chunk, found by title + text."""
    questions = json.loads((MUSIQUE / "musique_train.json").read_text())[:2]
    folder = tmp_path / "slice"
    (folder / "passages").mkdir(parents=True)
    (folder / "musique_slice.json").write_text(json.dumps(questions))
    paragraphs = {(p["title"], p["paragraph_text"]) for q in questions for p in q["paragraphs"]}
    for i, (title, text) in enumerate(sorted(paragraphs)):
        (folder / "passages" / f"{i:03d}.md").write_text(f"---\ntitle: {json.dumps(title)}\n---\n\n{text}\n")
    settings = Settings.from_env(env={}, data_dir=tmp_path / "kg", chunk_tokens=512)
    data = load_data(folder, "documents", IngestOptions(settings=settings))
    assert len(data.chunks) == len(paragraphs)
    queries = load_hipporag_queries(folder, data)
    supporting = [len({p["paragraph_text"] for p in q["paragraphs"] if p["is_supporting"]}) for q in questions]
    assert [len(q.gold) for q in queries] == supporting
    assert all(g in {c.id for c in data.chunks} for q in queries for g in q.gold)
    assert any("skipped 1 files that are not .txt/.md/.pdf/.epub: 'musique_slice.json'" in w for w in data.warnings)
