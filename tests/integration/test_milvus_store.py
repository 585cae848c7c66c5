"""MilvusVectorStore on a real Milvus Lite database in tmp_path, with real MiniLM vectors."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.errors import StoreError, ValidationError
from retrieval.stores.base import CHUNKS, ENTITIES, RELATIONS, StoreLocation, open_vector_store
from retrieval.stores.milvus import MilvusVectorStore, collection_names, string_literal

pytestmark = pytest.mark.integration

HOSTILE = (
    'x"}) MATCH (n) DETACH DELETE n //',
    "x\"] or id != \"",
    "it's \"quoted\" \\ and \\\" escaped",
    "<script>alert(1)</script>",
    "\u202eevil\u202c zero\u200bwidth\ufeff",
    "tab\tnew\nline\r\x00nul",
    "漢字 العربية 🙂",
    "w" * 10_000,
)
ANIMALS = ["The cat sleeps on the sofa.", "Stock markets fell sharply today.", "A recipe for tomato soup."]


def _location(tmp_path: Path) -> StoreLocation:
    return StoreLocation(dir=tmp_path / "v1", key="v1")


@pytest.fixture
def store(tmp_path: Path, settings: Settings) -> Iterator[MilvusVectorStore]:
    s = MilvusVectorStore.open(settings, _location(tmp_path))
    yield s
    s.close()


def _chunk_rows(texts: list[str]) -> list[dict[str, object]]:
    return [
        {"id": f"c{i}", "text": t, "source": f"s{i}.md", "original_document": "Book", "chapter": str(i),
         "author": "Ann", "position": i}
        for i, t in enumerate(texts)
    ]


def test_search_finds_the_nearest_neighbour(store: MilvusVectorStore, embedder: Embedder) -> None:
    store.ensure(embedder.dim)
    vectors = embedder.embed(ANIMALS)
    store.insert(CHUNKS, _chunk_rows(ANIMALS), vectors)
    queries = embedder.embed(["a kitten napping on a couch", "equities dropped", "how to cook soup"])
    hits = store.search(CHUNKS, queries, limit=3)
    assert [h[0].id for h in hits] == ["c0", "c1", "c2"]
    assert [len(h) for h in hits] == [3, 3, 3]
    assert hits[0][0].score == pytest.approx(float(queries[0] @ vectors[0]), abs=1e-4)  # IP on unit vectors = cosine
    assert hits[0][0].score > hits[0][1].score
    assert hits[0][0].payload == {"text": ANIMALS[0], "source": "s0.md", "original_document": "Book",
                                  "chapter": "0", "author": "Ann", "position": 0}
    assert store.search(CHUNKS, queries[0], limit=1)[0][0].id == "c0"  # a single 1-d query works too
    bare = store.search(CHUNKS, queries, limit=3, payload=False)  # ids and scores only
    assert [[(h.id, round(h.score, 5)) for h in row] for row in bare] == [
        [(h.id, round(h.score, 5)) for h in row] for row in hits] and all(not h.payload for r in bare for h in r)
    assert store.search(ENTITIES, queries, limit=2) == [[], [], []]  # empty collection: nothing found


def test_get_count_and_idempotent_insert(store: MilvusVectorStore, embedder: Embedder) -> None:
    store.ensure(embedder.dim)
    rows = [{"id": "r1", "text": "Elasticity shapes pricing.", "source_id": "a", "target_id": "b",
             "relation_type": "INFLUENCES"},
            {"id": "r2", "text": "Share builds equity.", "source_id": "c", "target_id": "d",
             "relation_type": "ENABLES"}]
    vectors = embedder.embed([r["text"] for r in rows])
    store.insert(RELATIONS, rows, vectors)
    store.insert(RELATIONS, rows, vectors)
    assert store.count(RELATIONS) == 2
    assert store.get(RELATIONS, ["r2", "missing", "r1", "r2"]) == [rows[1], rows[0]]
    assert store.get(RELATIONS, []) == []
    store.insert(RELATIONS, [{**rows[0], "text": "Changed."}], vectors[:1])
    assert store.get(RELATIONS, ["r1"])[0]["text"] == "Changed."
    assert store.count(RELATIONS) == 2
    assert store.count(ENTITIES) == 0


def test_stored_vectors_by_id_in_the_order_asked(store: MilvusVectorStore, embedder: Embedder) -> None:
    store.ensure(embedder.dim)
    vectors = embedder.embed(ANIMALS)
    store.insert(CHUNKS, _chunk_rows(ANIMALS), vectors)
    got = store.vectors(CHUNKS, ["c2", "missing", "c0", "c2"])
    assert got.shape == (4, embedder.dim)
    np.testing.assert_allclose(got[[0, 2, 3]], vectors[[2, 0, 2]], atol=1e-6)
    assert not got[1].any()  # an unknown id is a zero row, never another row's vector
    assert store.vectors(ENTITIES, ["nothing"]).shape == (1, embedder.dim)


def test_entities_payload_defaults(store: MilvusVectorStore) -> None:
    store.ensure(4)
    store.insert(ENTITIES, [{"id": "e1", "name": "Price"}], np.array([[1.0, 0, 0, 0]], dtype=np.float32))
    assert store.get(ENTITIES, ["e1"]) == [{"id": "e1", "name": "Price", "type": "", "text": ""}]


def test_hostile_strings_round_trip_byte_identical(store: MilvusVectorStore) -> None:
    store.ensure(8)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((len(HOSTILE) + 1, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = [{"id": text[:200], "name": text, "type": text, "text": text} for text in HOSTILE]
    rows.append({"id": "plain", "name": "plain", "type": "t", "text": "plain"})
    store.insert(ENTITIES, rows, vectors)
    for i, text in enumerate(HOSTILE):
        got = store.get(ENTITIES, [text[:200]])
        assert got == [rows[i]]  # exactly the asked id: an id can't widen the filter
        hit = store.search(ENTITIES, vectors[i], limit=1)[0][0]
        assert hit.id == text[:200] and hit.payload["text"].encode() == text.encode()
    assert store.count(ENTITIES) == len(HOSTILE) + 1


def test_invalid_rows_are_refused_with_the_field_named(store: MilvusVectorStore) -> None:
    store.ensure(4)
    one = np.ones((1, 4), dtype=np.float32) / 2
    with pytest.raises(ValidationError, match="description"):
        store.insert(ENTITIES, [{"id": "e", "name": "n", "description": "wrong field"}], one)
    with pytest.raises(ValidationError, match="text"):
        store.insert(ENTITIES, [{"id": "e", "text": "x" * 70_000}], one)
    with pytest.raises(ValidationError, match="id"):
        store.insert(ENTITIES, [{"id": "", "text": "x"}], one)
    with pytest.raises(ValidationError):
        store.insert(ENTITIES, [{"id": "e", "text": "lone \ud800"}], one)
    with pytest.raises(ValidationError, match="vector"):
        store.insert(ENTITIES, [{"id": "e"}, {"id": "f"}], one)
    assert store.count(ENTITIES) == 0


def test_unknown_collection_and_wrong_dim(store: MilvusVectorStore) -> None:
    store.ensure(4)
    with pytest.raises(StoreError, match="unknown collection"):
        store.search("Nope", np.ones((1, 4)), 1)
    with pytest.raises(StoreError, match="4-d"):
        store.ensure(8)


def test_deleted_lite_file_is_a_clear_error(tmp_path: Path, store: MilvusVectorStore) -> None:
    store.ensure(4)
    store.insert(ENTITIES, [{"id": "e1"}], np.array([[1.0, 0, 0, 0]], dtype=np.float32))
    shutil.rmtree(tmp_path / "v1" / "milvus.db")
    with pytest.raises(StoreError, match="deleted"):
        store.search(ENTITIES, np.array([[1.0, 0, 0, 0]]), 1)
    with pytest.raises(StoreError, match="deleted"):
        store.count(ENTITIES)


def test_lite_file_locked_by_another_process(tmp_path: Path, store: MilvusVectorStore) -> None:
    store.ensure(4)
    code = (
        "import sys\nfrom pathlib import Path\nfrom retrieval.config import Settings\n"
        "from retrieval.errors import StoreError\nfrom retrieval.stores.base import StoreLocation\n"
        "from retrieval.stores.milvus import MilvusVectorStore\n"
        "try:\n    MilvusVectorStore.open(Settings(), StoreLocation(Path(sys.argv[1]), 'v1'))\n"
        "except StoreError as exc:\n    print('StoreError:', exc)\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "v1")], capture_output=True, text=True,
                         timeout=120, cwd=root)
    assert "StoreError: cannot open Milvus" in out.stdout, out.stderr[-2000:]
    assert "one process at a time" in out.stdout


def test_reopen_and_drop(tmp_path: Path, settings: Settings) -> None:
    first = open_vector_store(settings, _location(tmp_path))  # through the registry
    first.ensure(4)
    first.insert(CHUNKS, _chunk_rows(["one"]), np.array([[0, 1.0, 0, 0]], dtype=np.float32))
    first.close()
    again = MilvusVectorStore.open(settings, _location(tmp_path))
    try:
        assert again.count(CHUNKS) == 1
        assert again.search(CHUNKS, np.array([[0, 1.0, 0, 0]]), 5)[0][0].id == "c0"
        again.drop()
        assert [again.count(c) for c in (ENTITIES, RELATIONS, CHUNKS)] == [0, 0, 0]
    finally:
        again.close()


def test_two_stores_on_one_lite_path_and_a_renamed_directory(tmp_path: Path, settings: Settings) -> None:
    build = StoreLocation(dir=tmp_path / ".build", key="v1")
    one = MilvusVectorStore.open(settings, build)
    two = MilvusVectorStore.open(settings, build)  # same process, same path: one shared Lite server
    one.ensure(4)
    one.insert(ENTITIES, [{"id": "e1"}], np.array([[1.0, 0, 0, 0]], dtype=np.float32))
    one.close()
    assert two.count(ENTITIES) == 1  # closing one store leaves the other working
    two.close()
    with pytest.raises(StoreError, match="closed"):
        two.count(ENTITIES)
    # Ingest builds in a directory and renames it: the data must open again under the new name.
    (tmp_path / ".build").rename(tmp_path / "final")
    final = MilvusVectorStore.open(settings, StoreLocation(dir=tmp_path / "final", key="v1"))
    try:
        assert final.get(ENTITIES, ["e1"]) == [{"id": "e1", "name": "", "type": "", "text": ""}]
    finally:
        final.close()


def test_another_lite_path_from_settings(tmp_path: Path, settings: Settings) -> None:
    other = tmp_path / "elsewhere" / "vectors.db"
    s = MilvusVectorStore.open(settings.with_(milvus_uri=str(other)), _location(tmp_path))
    try:
        s.ensure(4)
        assert other.exists() and not (tmp_path / "v1" / "milvus.db").exists()
    finally:
        s.close()


def test_collection_names_are_prefixed_only_on_a_server() -> None:
    assert collection_names("/tmp/x/milvus.db", "v1") == {c: c for c in (ENTITIES, RELATIONS, CHUNKS)}
    assert collection_names("http://127.0.0.1:19530", "demo_abc")[ENTITIES] == "demo_abc_Entities"
    assert collection_names("http://h:19530", "2024_x")[CHUNKS] == "kg_2024_x_DocumentChunks"
    assert string_literal('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
