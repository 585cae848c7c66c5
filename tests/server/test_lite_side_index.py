"""Milvus Lite's side index (retrieval.stores.milvus): searches go through faiss, not Lite's per-row scan.

Real Milvus Lite and faiss; ANN_EXACT_MAX is lowered so that a few hundred rows take the HNSW path.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval.config import Settings
from retrieval.stores import milvus
from retrieval.stores.base import RELATIONS, StoreLocation
from retrieval.stores.milvus import MilvusVectorStore, ann_dir

pytestmark = pytest.mark.integration

DIM = 16


def _rows(n: int, start: int = 0) -> list[dict[str, str]]:
    return [{"id": f"r{i}", "text": f"relation {i}", "source_id": f"e{i}", "target_id": f"e{i + 1}",
             "relation_type": "LINKS"} for i in range(start, start + n)]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(params=[10_000, 50], ids=["exact", "hnsw"])
def exact_max(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(milvus, "ANN_EXACT_MAX", request.param)
    return int(request.param)


def test_side_index_answers_like_brute_force_and_survives_reopen(tmp_path: Path, exact_max: int) -> None:
    settings = Settings.from_env(env={}, data_dir=tmp_path)
    location = StoreLocation(dir=tmp_path / "v1", key="k")
    rng = np.random.default_rng(7)
    vecs = _unit(rng, 300)
    store = MilvusVectorStore.open(settings, location)
    try:
        store.ensure(DIM)
        store.insert(RELATIONS, _rows(200), vecs[:200])
        store.insert(RELATIONS, _rows(100, 200), vecs[200:])
        hits = store.search(RELATIONS, vecs[:5], 10)  # builds the side index from both inserts
    finally:
        store.close()
    files = sorted(p.name for p in ann_dir(location.dir / "milvus.db").iterdir())
    assert files == [f"{RELATIONS}.faiss", f"{RELATIONS}.ids.json"]
    for q, row in enumerate(hits):
        exact = np.argsort(-(vecs @ vecs[q]))[:10]
        assert row[0].id == f"r{q}" and row[0].score == pytest.approx(1.0, abs=1e-5)
        assert row[0].payload["source_id"] == f"e{q}"
        if exact_max > 300:  # the flat index is exact
            assert [h.id for h in row] == [f"r{i}" for i in exact]
        assert [h.score for h in row] == sorted((h.score for h in row), reverse=True)

    again = MilvusVectorStore.open(settings, location)
    try:
        # a re-insert of an id replaces its vector, in Lite and in the side index
        moved = _unit(rng, 1)
        again.insert(RELATIONS, _rows(1, 3), moved)
        top = again.search(RELATIONS, moved, 3)[0]
        assert top[0].id == "r3" and top[0].score == pytest.approx(1.0, abs=1e-5)
        assert again.search(RELATIONS, vecs[3:4], 1)[0][0].id != "r3"
        assert again.count(RELATIONS) == 300
        again.drop()
        assert not ann_dir(location.dir / "milvus.db").exists()
    finally:
        again.close()
