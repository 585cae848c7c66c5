"""The hostile corpus (tests/data/hostile) ingested on the server back ends (FalkorDB + Milvus standalone, both
started by the project's scripts in their own run dirs): every payload reads back byte-identically."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from falkordb import Graph

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.graph.runtime import KG, open_kg
from retrieval.ingest.build import ingest
from retrieval.ingest.bundle import load_bundle
from retrieval.ingest.versions import drop_location
from retrieval.models import Chunk, GraphData
from retrieval.stores.falkordb import connection_pool
from tests.data.hostile.graph import GRAPH, check_chunks, check_graph_store, check_lookups, check_vector_store
from tests.data.hostile.make_bundle import Payload, accepted, write_bundle

pytestmark = pytest.mark.server

FALKOR_CHUNKS = "MATCH (c:Chunk) RETURN c.id, c.text, c.source, c.original_document, c.chapter, c.author, c.position"
CHUNK_COLUMNS = ("id", "text", "source", "original_document", "chapter", "author", "position")


@pytest.fixture(scope="module")
def server_corpus(
    tmp_path_factory: pytest.TempPathFactory, falkordb_url: str, milvus_uri: str, embedder: Embedder
) -> Iterator[tuple[KG, GraphData]]:
    root = tmp_path_factory.mktemp("hostile-server")
    settings = Settings.from_env(env={}, data_dir=root / "kg", graph_backend="falkordb", falkordb_url=falkordb_url,
                                 milvus_uri=milvus_uri)
    bundle = write_bundle(root / "bundle")
    report = ingest(settings, bundle, fmt="bundle", name=GRAPH, embedder=embedder, progress=False)
    kg = open_kg(settings, GRAPH, embedder)
    kg.vectors.wait_ready()
    yield kg, load_bundle(bundle)
    kg.close()
    drop_location(settings, report.handle.location)


def _holds_u0001(p: Payload) -> bool:
    return "\x01" in p.value


def test_falkordb_reads_back_every_payload_byte_identically(server_corpus: tuple[KG, GraphData]) -> None:
    kg, data = server_corpus
    assert kg.handle.manifest["graph_backend"] == "falkordb"
    # Stored and exported unchanged, every one; looked up by id and name (U+0001 has its own test below).
    assert check_graph_store(kg, data, [p for p in accepted() if not _holds_u0001(p)]) == []
    client = redis.Redis(connection_pool=connection_pool(kg.settings.falkordb_url))
    try:
        rows = Graph(client, kg.handle.location.key).ro_query(FALKOR_CHUNKS).result_set
    finally:
        client.close()
    stored = [Chunk(**dict(zip(CHUNK_COLUMNS, row, strict=True))) for row in rows]
    assert check_chunks(stored, data) == []


def test_milvus_server_reads_back_every_payload_byte_identically(
    server_corpus: tuple[KG, GraphData], milvus_uri: str
) -> None:
    kg, data = server_corpus
    assert kg.settings.milvus_uri == milvus_uri and milvus_uri.startswith("http://127.0.0.1:")
    assert check_vector_store(kg, data) == []
    hits = kg.vectors.search("DocumentChunks", kg.embedder.embed(["Eve Evilname"]), 100)[0]
    given = {c.id: c.model_dump() for c in data.chunks}
    assert len(hits) == len(data.chunks) and all({"id": h.id, **h.payload} == given[h.id] for h in hits)



def test_falkordb_finds_ids_and_names_holding_u0001(server_corpus: tuple[KG, GraphData]) -> None:
    kg, data = server_corpus
    tricky = [p for p in accepted() if _holds_u0001(p)]
    assert [p.id for p in tricky] == ["control-chars"]
    assert check_lookups(kg, data, tricky) == []
