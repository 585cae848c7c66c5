"""MilvusVectorStore against a real Milvus 2.3 standalone server (started by scripts/milvus_server):
reads its own writes (Strong), keeps graph versions apart by prefix, and round-trips hostile text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pymilvus import MilvusClient

from retrieval.config import Settings
from retrieval.stores.base import CHUNKS, ENTITIES, RELATIONS, StoreLocation
from retrieval.stores.milvus import MilvusVectorStore

from .test_falkordb_store import HOSTILE

pytestmark = pytest.mark.server

DIM = 16


def unit_vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def stores(milvus_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[MilvusVectorStore, ...]]:
    """Two graph versions (keys v_a, v_b) on the one server; creating collections is the slow part (~5 s each)."""
    settings = Settings.from_env(env={}, milvus_uri=milvus_uri)
    root = tmp_path_factory.mktemp("mv")
    pair = tuple(MilvusVectorStore.open(settings, StoreLocation(dir=root / k, key=k)) for k in ("v_a", "v_b"))
    for store in pair:
        store.ensure(DIM)
    yield pair
    for store in pair:  # the server and its data directory are thrown away after the session
        store.close()


def test_insert_search_get_count_read_own_writes(stores: tuple[MilvusVectorStore, ...]) -> None:
    store = stores[0]
    vectors = unit_vectors(50, seed=1)
    rows = [{"id": f"e{i}", "name": f"Entity {i}", "type": "concept", "text": f"entity number {i}"} for i in range(50)]
    store.insert(ENTITIES, rows, vectors)
    assert store.count(ENTITIES) == 50  # visible at once: the store reads with consistency Strong
    hits = store.search(ENTITIES, vectors[[7, 30]], limit=3)
    assert [h[0].id for h in hits] == ["e7", "e30"]
    assert hits[0][0].score == pytest.approx(1.0, abs=1e-4) and hits[0][0].score >= hits[0][1].score
    assert hits[0][0].payload == {"name": "Entity 7", "type": "concept", "text": "entity number 7"}
    assert [r["id"] for r in store.get(ENTITIES, ["e9", "missing", "e2"])] == ["e9", "e2"]
    store.insert(ENTITIES, rows[:10], vectors[:10])  # re-insert replaces (upsert), no duplicates
    assert store.count(ENTITIES) == 50


def test_two_graph_versions_do_not_see_each_other(stores: tuple[MilvusVectorStore, ...], milvus_uri: str) -> None:
    a, b = stores
    va, vb = unit_vectors(5, seed=2), unit_vectors(5, seed=3)
    a.insert(RELATIONS, [{"id": f"a{i}", "text": "from a"} for i in range(5)], va)
    b.insert(RELATIONS, [{"id": f"b{i}", "text": "from b"} for i in range(5)], vb)
    assert {h.id for h in a.search(RELATIONS, vb[:1], limit=10)[0]} == {f"a{i}" for i in range(5)}
    assert {h.id for h in b.search(RELATIONS, va[:1], limit=10)[0]} == {f"b{i}" for i in range(5)}
    assert a.get(RELATIONS, ["b0"]) == [] and b.get(RELATIONS, ["a0"]) == []
    names = set(MilvusClient(uri=milvus_uri).list_collections())
    assert {"v_a_RelationDescriptions", "v_b_RelationDescriptions", "v_a_Entities", "v_b_DocumentChunks"} <= names


def test_hostile_text_and_ids_round_trip(stores: tuple[MilvusVectorStore, ...]) -> None:
    store = stores[1]
    texts = [s for s in HOSTILE]
    rows = [
        {"id": f'c"{i}\\\n{s[:200]}', "text": s, "source": s, "original_document": s, "chapter": s, "author": s,
         "position": i}
        for i, s in enumerate(texts)
    ]
    vectors = unit_vectors(len(rows), seed=4)
    store.insert(CHUNKS, rows, vectors)
    got = store.get(CHUNKS, [r["id"] for r in rows])
    assert got == rows  # byte-identical, ids with quotes, backslashes and newlines included
    hits = store.search(CHUNKS, vectors, limit=1)
    assert [h[0].id for h in hits] == [r["id"] for r in rows]
    assert hits[3][0].payload["text"] == texts[3]


def test_reopened_store_finds_existing_collections(stores: tuple[MilvusVectorStore, ...], milvus_uri: str,
                                                   tmp_path: Path) -> None:
    vectors = unit_vectors(3, seed=5)
    stores[0].insert(CHUNKS, [{"id": f"k{i}", "text": "t"} for i in range(3)], vectors)
    settings = Settings.from_env(env={}, milvus_uri=milvus_uri)
    again = MilvusVectorStore.open(settings, StoreLocation(dir=tmp_path, key="v_a"))
    try:
        assert again.count(CHUNKS) == stores[0].count(CHUNKS) >= 3
        assert again.search(CHUNKS, vectors[:1], limit=1)[0][0].id == "k0"
    finally:
        again.close()


def test_drop_removes_only_its_own_collections(stores: tuple[MilvusVectorStore, ...], milvus_uri: str) -> None:
    """Runs last in this module: it drops version v_b."""
    a, b = stores
    b.drop()
    names = set(MilvusClient(uri=milvus_uri).list_collections())
    assert not {n for n in names if n.startswith("v_b_")}
    assert {"v_a_Entities", "v_a_RelationDescriptions", "v_a_DocumentChunks"} <= names
    assert b.count(ENTITIES) == 0 and a.count(ENTITIES) == 50


def test_token_setting_reaches_the_server_and_stays_out_of_reprs(milvus_uri: str, tmp_path: Path) -> None:
    """KG_MILVUS_TOKEN ("user:password" or an API key) is passed to the client; this server runs without auth,
    which accepts any token, so the check here is that a configured token connects and is never printed."""
    settings = Settings.from_env(env={"KG_MILVUS_URI": milvus_uri, "KG_MILVUS_TOKEN": "root:Milvus"})
    assert settings.milvus_token == "root:Milvus" and "root:Milvus" not in repr(settings)
    assert Settings.from_env(env={}).milvus_token == ""
    store = MilvusVectorStore.open(settings, StoreLocation(dir=tmp_path / "tok", key="v_tok"))
    try:
        store.ensure(DIM)
        assert store.count(ENTITIES) == 0
    finally:
        store.drop()
        store.close()
