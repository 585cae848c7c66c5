"""The hostile corpus (tests/data/hostile) through a real ingest on the embedded stack (Kuzu + Milvus Lite +
MiniLM): every payload reads back byte-identically from each store, and search and name matching on it work."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kuzu
import pytest

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.graph.index import STOP_WORDS, normalise_name
from retrieval.graph.runtime import KG, open_kg
from retrieval.models import Chunk, GraphData
from retrieval.search.decompose import entity_mentions
from retrieval.search.retriever import search
from retrieval.search.verbalize import to_markdown
from tests.data.hostile.graph import (
    GRAPH,
    check_chunks,
    check_graph_store,
    check_payload_fields,
    check_vector_store,
    hostile_data_dir,
)
from tests.data.hostile.make_bundle import HUB_ID, QUERY, Payload, accepted, load_payloads

pytestmark = pytest.mark.integration

CHUNK_COLUMNS = ("id", "text", "source", "original_document", "chapter", "author", "position")
KUZU_CHUNKS = "MATCH (c:Chunk) RETURN c.id, c.text, c.source, c.original_document, c.chapter, c.author, c.position"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Iterator[tuple[KG, GraphData]]:
    data_dir, data = hostile_data_dir(tmp_path_factory.mktemp("hostile"), embedder)
    kg = open_kg(Settings.from_env(env={}, data_dir=data_dir), GRAPH, embedder)
    yield kg, data
    kg.close()


def test_the_corpus_has_at_least_30_payloads_and_the_bundle_carries_each_unchanged(
    corpus: tuple[KG, GraphData],
) -> None:
    payloads = load_payloads()
    assert len(payloads) >= 30 and len({p.id for p in payloads}) == len(payloads)
    assert {"xss-html", "xss-attr", "xss-js", "xss-url", "cypher", "path", "unicode", "egress"} <= {
        p.category for p in payloads
    }
    _, data = corpus
    good = accepted(payloads)
    assert len(data.entities) == len(good) + 1 and len(data.relations) == len(data.chunks) - 1 == len(good)
    assert check_payload_fields(data, good) == []
    long = next(p for p in good if p.id == "long-10k")
    assert len(long.value) == 10_000 and len(long.value.encode("utf-8")) == 20_000
    nfd = next(p for p in good if p.id == "nfd-vs-nfc")
    assert nfd.value.encode("utf-8") == b"e\xcc\x81 vs \xc3\xa9"  # no Unicode normalisation anywhere


def test_kuzu_reads_back_every_payload_byte_identically(corpus: tuple[KG, GraphData]) -> None:
    kg, data = corpus
    assert kg.handle.manifest["graph_backend"] == "kuzu"
    assert check_graph_store(kg, data, accepted()) == []
    # the Chunk nodes, read through a second read-only handle on the same database
    db = kuzu.Database(str(kg.handle.dir / "kuzu"), read_only=True)
    try:
        rows = kuzu.Connection(db).execute(KUZU_CHUNKS).get_all()  # type: ignore[union-attr]
    finally:
        db.close()
    stored = [Chunk(**dict(zip(CHUNK_COLUMNS, row, strict=True))) for row in rows]
    assert check_chunks(stored, data) == []


def test_milvus_lite_reads_back_every_payload_byte_identically(corpus: tuple[KG, GraphData]) -> None:
    kg, data = corpus
    assert check_vector_store(kg, data) == []
    # a vector search returns the same payload as a lookup by id
    hits = kg.vectors.search("DocumentChunks", kg.embedder.embed([QUERY]), 100)[0]
    given = {c.id: c.model_dump() for c in data.chunks}
    assert len(hits) == len(data.chunks)
    assert all({"id": h.id, **h.payload} == given[h.id] for h in hits)


def _matchable(p: Payload) -> bool:
    key = normalise_name(p.value)
    return len(key) >= 2 and key not in STOP_WORDS


def test_every_payload_name_is_matched_in_a_question_that_quotes_it(corpus: tuple[KG, GraphData]) -> None:
    kg, _ = corpus
    matchable = [p for p in accepted() if _matchable(p)]
    assert len(matchable) >= 45
    missed = [p.id for p in matchable
              if p.ident not in {m.id for m in entity_mentions(kg.index, f"What is known about {p.value}?")}]
    assert missed == []


def test_search_over_the_hostile_graph_answers_with_the_payloads_verbatim(corpus: tuple[KG, GraphData]) -> None:
    kg, data = corpus
    result = search(kg, QUERY)
    assert HUB_ID in result.seed_ids and result.facts
    by_id = {e.id: e for e in data.entities}
    reached = {n.id for n in result.subgraph.nodes} - {HUB_ID}
    assert len(reached) >= 5
    md = to_markdown(result)
    for fact in result.facts[:5]:
        assert fact.text in md
    for node in result.subgraph.nodes:
        assert node == by_id[node.id]  # the subgraph carries the stored records unchanged
    assert any(by_id[i].name in md for i in reached)


@pytest.mark.slow
def test_a_payload_as_the_query_never_breaks_search(corpus: tuple[KG, GraphData]) -> None:
    kg, _ = corpus
    for p in accepted():
        if not p.value.strip() or len(p.value) > 2000:
            continue
        result = search(kg, p.value)
        assert result.query == p.value.strip()
        if _matchable(p):
            assert p.ident in result.seed_ids or any(p.ident in f.entity_ids for f in result.facts), p.id


def test_the_bundle_tool_writes_a_loadable_bundle(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "data" / "hostile" / "make_bundle.py"
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "b")], capture_output=True, text=True,
                          check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"({len(accepted())} payloads)" in proc.stdout
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == [
        "chunks.jsonl", "documents.jsonl", "entities.jsonl", "relations.jsonl"
    ]
