"""Back-end parity: the same ingest and the same searches on Kuzu + Milvus Lite and on FalkorDB + a Milvus
server (both servers started by the project's scripts) give the same graph, facts and top results.

Runs on the demo graph, and on the MuSiQue graph (slow, opt-in: ~38k texts through MiniLM, embedded once,
shared by both back-end pairs and cached in tests/artifacts for the next run).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.graph.runtime import open_kg
from retrieval.ingest.build import build_graph
from retrieval.ingest.bundle import load_bundle
from retrieval.ingest.hipporag import load_hipporag
from retrieval.models import Entity, GraphData, Relation, SearchParams
from retrieval.search.retriever import search
from retrieval.search.tools import comprehensive_search
from tests.conftest import DEMO_BUNDLE, MUSIQUE, ROOT

pytestmark = [pytest.mark.server, pytest.mark.integration]

PAIRS = ("kuzu+milvus-lite", "falkordb+milvus-server")
ARTIFACTS = ROOT / "tests" / "artifacts"
TOP = 5  # top results compared in order
SCORE_TOL = 1e-3  # float32 cosine from two engines


class CachingEmbedder:
    """The real embedder, each distinct text embedded once: both back-end pairs ingest the same texts, and
    the vectors are kept in tests/artifacts (git-ignored) so a re-run skips MiniLM's ~10 minutes on MuSiQue."""

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner, self.name, self.dim, self.path = inner, inner.name, inner.dim, path
        self._cache: dict[str, np.ndarray] = {}
        if path.is_file():
            stored = np.load(path)
            texts = json.loads(stored["texts"].tobytes().decode("utf-8"))
            self._cache = dict(zip(texts, stored["vectors"], strict=True))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            self._cache.update(zip(todo, np.asarray(self.inner.embed(todo), dtype=np.float32), strict=True))
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, self.dim), dtype=np.float32)

    def save(self) -> None:
        texts = list(self._cache)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        raw = np.frombuffer(json.dumps(texts, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
        np.savez(self.path, texts=raw, vectors=np.stack([self._cache[t] for t in texts]))


@dataclass
class Run:
    """What one back-end pair stored and answered for one dataset."""

    counts: dict[str, int]
    entities: list[Entity]
    relations: list[Relation]
    kg_top: dict[str, list[tuple[str, dict[str, float]]]] = field(default_factory=dict)  # query -> (id, scores)
    kg_facts: dict[str, set[str]] = field(default_factory=dict)
    comprehensive_top: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _dataset(name: str) -> tuple[GraphData, list[str]]:
    if name == "demo":
        questions = json.loads((DEMO_BUNDLE / "questions.json").read_text(encoding="utf-8"))
        return load_bundle(DEMO_BUNDLE), [q["question"] for q in questions[:6]]
    questions = json.loads((MUSIQUE / "musique_train.json").read_text(encoding="utf-8"))
    return load_hipporag(MUSIQUE), [q["question"] for q in questions[:8]]


def _settings(pair: str, data_dir: Path, falkordb_url: str, milvus_uri: str) -> Settings:
    if pair == "kuzu+milvus-lite":
        return Settings.from_env(env={}, data_dir=data_dir)
    return Settings.from_env(
        env={}, data_dir=data_dir, graph_backend="falkordb", falkordb_url=falkordb_url, milvus_uri=milvus_uri
    )


def _run(settings: Settings, dataset: str, data: GraphData, questions: list[str], embedder: Embedder) -> Run:
    build_graph(settings, data, dataset, embedder=embedder, progress=False)
    kg = open_kg(settings, dataset, embedder=embedder)
    try:
        kg.vectors.wait_ready()  # a server answers from its built index only after this (see MilvusVectorStore)
        ids = kg.index.arrays
        run = Run(
            counts=kg.graph.counts(),
            entities=sorted(kg.graph.get_entities(ids.node_ids), key=lambda e: e.id),
            relations=sorted(kg.graph.get_relations(ids.relation_ids), key=lambda r: r.id),
        )
        for q in questions:
            result = search(kg, q, SearchParams(max_results=10))
            run.kg_top[q] = [(f.id, dict(f.scores)) for f in result.facts[:TOP]]
            run.kg_facts[q] = {f.id for f in result.facts}
            run.warnings.extend(result.warnings)
            both = comprehensive_search(kg, q, limit=10)
            run.comprehensive_top[q] = [f.id for f in both.facts[:TOP]]
            run.warnings.extend(both.warnings)
        return run
    finally:
        kg.close()


@pytest.fixture(scope="module")
def caching_embedder(embedder: Embedder) -> Iterator[CachingEmbedder]:
    cached = CachingEmbedder(embedder, ARTIFACTS / f"parity-embeddings-{embedder.name.replace('/', '_')}.npz")
    yield cached
    cached.save()


# Embedding the full MuSiQue corpus with MiniLM takes 5-15 min on 2 cores (issue #2's ingest speed work);
# until that is fixed the MuSiQue parity case runs on request: KG_PARITY_MUSIQUE=1 make test.
MUSIQUE_OPT_IN = pytest.mark.skipif(
    not os.environ.get("KG_PARITY_MUSIQUE"), reason="MuSiQue parity is opt-in: set KG_PARITY_MUSIQUE=1"
)


@pytest.fixture(scope="module", params=["demo", pytest.param("musique", marks=[pytest.mark.slow, MUSIQUE_OPT_IN])])
def runs(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    falkordb_url: str,
    milvus_uri: str,
    caching_embedder: CachingEmbedder,
) -> Iterator[dict[str, Run]]:
    dataset = request.param
    data, questions = _dataset(dataset)
    out = {}
    for pair in PAIRS:
        settings = _settings(pair, tmp_path_factory.mktemp(pair.replace("+", "_")), falkordb_url, milvus_uri)
        out[pair] = _run(settings, dataset, data, questions, caching_embedder)
    yield out


def test_same_counts(runs: dict[str, Run]) -> None:
    kuzu, falkor = (runs[p] for p in PAIRS)
    assert falkor.counts == kuzu.counts and kuzu.counts["relations"] > 0


def test_same_entities_and_relations(runs: dict[str, Run]) -> None:
    kuzu, falkor = (runs[p] for p in PAIRS)
    assert [e.id for e in falkor.entities] == [e.id for e in kuzu.entities]
    assert falkor.entities == kuzu.entities
    assert falkor.relations == kuzu.relations


def test_same_facts_and_top_results(runs: dict[str, Run]) -> None:
    kuzu, falkor = (runs[p] for p in PAIRS)
    assert kuzu.kg_top.keys() == falkor.kg_top.keys()
    for q, top in kuzu.kg_top.items():
        other = falkor.kg_top[q]
        assert [fid for fid, _ in other] == [fid for fid, _ in top], q
        for (_, theirs), (_, ours) in zip(other, top, strict=True):
            assert theirs.keys() == ours.keys() and theirs == pytest.approx(ours, abs=SCORE_TOL), q
        assert falkor.kg_facts[q] == kuzu.kg_facts[q], q
        assert falkor.comprehensive_top[q] == kuzu.comprehensive_top[q], q


@pytest.mark.parametrize("pair", PAIRS)
def test_each_pair_answers_without_store_warnings(runs: dict[str, Run], pair: str) -> None:
    run = runs[pair]
    assert sum(1 for top in run.kg_top.values() if top) >= len(run.kg_top) - 1
    assert not [w for w in run.warnings if "store" in w.lower() or "failed" in w.lower()]
