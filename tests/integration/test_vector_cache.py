"""The data directory's vector cache: the same vectors, nothing embedded twice across names and graphs, bounded,
safe under concurrent writers, and never a reason for an import to fail."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.graph.runtime import open_kg
from retrieval.ingest.build import ingest
from retrieval.stores.base import ENTITIES, RELATIONS
from retrieval.stores.vector_cache import FILE, CachingEmbedder, VectorCache, caching_embedder, text_hash

pytestmark = pytest.mark.integration

SMALL = Path(__file__).resolve().parents[1] / "data" / "bundles" / "small"


class Counting:
    """The packaged MiniLM, counting every text it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += list(texts)
        return self.inner.embed(texts)


def test_a_second_graph_over_the_same_texts_embeds_nothing(settings: Settings, embedder: Embedder) -> None:
    counting = Counting(embedder)
    first = ingest(settings, SMALL, fmt="bundle", name="small", embedder=counting, progress=False)
    n = len(counting.texts)
    assert n > 0 and len(set(counting.texts)) == n  # each distinct text once
    assert first.embedded == n and first.reused == 0
    again = ingest(settings, SMALL, fmt="bundle", name="other", embedder=counting, progress=False)
    assert len(counting.texts) == n  # a re-import under another name: not one text embedded
    assert again.embedded == 0 and again.reused >= n and "from the cache" in again.summary()
    # the vectors it stored are the model's own
    kg = open_kg(settings, "other", embedder)
    try:
        arrays = kg.graph.export_edges()
        for collection, ids in ((ENTITIES, arrays.node_ids), (RELATIONS, arrays.relation_ids)):
            texts = [r["text"] for r in kg.vectors.get(collection, list(ids))]
            got = kg.vectors.vectors(collection, list(ids))
            assert len(texts) == len(ids) > 0
            assert np.min(np.sum(got * embedder.embed(texts), axis=1)) > 0.9999
    finally:
        kg.close()


def test_cached_vectors_are_the_embedders(tmp_path: Path, embedder: Embedder) -> None:
    counting = Counting(embedder)
    through = caching_embedder(tmp_path, 64, counting)
    assert isinstance(through, CachingEmbedder)
    texts = ["alpha beta", "gamma", "alpha beta", "ünïcödé 日本語 🙂"]
    first = through.embed(texts)
    assert counting.texts == ["alpha beta", "gamma", "ünïcödé 日本語 🙂"]  # repeats embedded once
    second = caching_embedder(tmp_path, 64, counting).embed(texts[::-1])
    assert len(counting.texts) == 3
    np.testing.assert_array_equal(second, first[::-1])  # bit for bit what the model gave
    # another model's vectors never answer for this one
    other = Counting(embedder)
    other.name = "another-model"
    caching_embedder(tmp_path, 64, other).embed(texts)
    assert len(other.texts) == 3


def test_the_cache_is_bounded_least_recently_used_first(tmp_path: Path) -> None:
    dim = 384
    per_row = dim * 4 + 96
    cache = VectorCache(tmp_path / FILE, max_mb=1)  # room for 1_000_000 // per_row = 632 rows
    keep = 1_000_000 // per_row
    rows = np.random.default_rng(0).standard_normal((keep + 100, dim)).astype(np.float32)
    hashes = [text_hash(str(i)) for i in range(len(rows))]
    cache.put("m:384", hashes[:10], rows[:10])
    cache.put("m:384", hashes[10:keep], rows[10:keep])
    assert len(cache.get("m:384", dim, hashes[:10])) == 10  # used again: now the most recent
    cache.put("m:384", hashes[keep:], rows[keep:])
    assert cache._db.rows("SELECT count(*) FROM vectors")[0][0] == keep
    assert len(cache.get("m:384", dim, hashes[:10])) == 10  # the recently used rows stayed
    assert len(cache.get("m:384", dim, hashes[10:110])) == 0  # the oldest went


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((8, 200, 16)).astype(np.float32)
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        cache = VectorCache(tmp_path / FILE, max_mb=64)  # a connection of its own, as another process has
        try:
            for part in range(0, 200, 20):
                cache.put("m:16", [text_hash(f"{k}-{i}") for i in range(part, part + 20)], vecs[k, part:part + 20])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            cache.close()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    found = VectorCache(tmp_path / FILE, max_mb=64).get("m:16", 16, [text_hash(f"3-{i}") for i in range(200)])
    assert len(found) == 200
    np.testing.assert_array_equal(found[text_hash("3-7")], vecs[3, 7])


def test_a_broken_cache_file_costs_only_embedding(settings: Settings, embedder: Embedder) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / FILE).write_bytes(b"this is not a SQLite database" * 100)
    counting = Counting(embedder)
    report = ingest(settings, SMALL, fmt="bundle", name="small", embedder=counting, progress=False)
    assert report.counts["entities"] == 11 and report.embedded == len(counting.texts) > 0
    assert any("vector cache could not be used" in w for w in report.warnings)


def test_off_and_cheap_embedders_bypass_the_cache(tmp_path: Path, embedder: Embedder) -> None:
    from retrieval.embedding import HashEmbedder

    assert caching_embedder(tmp_path, 0, embedder) is embedder
    hashed = HashEmbedder()
    assert caching_embedder(tmp_path, 64, hashed) is hashed
    assert not (tmp_path / FILE).exists()


def test_an_undo_embeds_nothing(settings: Settings, embedder: Embedder) -> None:
    from retrieval.curation.apply import Curator
    from retrieval.curation.ops import RenameEntity

    counting = Counting(embedder)
    ingest(settings, SMALL, fmt="bundle", name="small", embedder=counting, progress=False)
    kg = open_kg(settings, "small", counting)
    cur = Curator(kg)
    try:
        eid = kg.graph.export_edges().node_ids[0]
        before = len(counting.texts)
        changeset = cur.apply([RenameEntity(entity_id=eid, name="A brand new name")], author="ana")
        assert len(counting.texts) == before + 1  # the new text, once
        cur.undo(author="ana", changeset=changeset.id)
        assert len(counting.texts) == before + 1  # the restored text's vector came from the cache
        assert kg.graph.get_entities([eid])[0].name != "A brand new name"
    finally:
        cur.close()
        kg.close()
