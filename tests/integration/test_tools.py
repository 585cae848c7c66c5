"""Search tools, dual-channel and multi-doc retrieval on the real demo graph (Kuzu + Milvus Lite + MiniLM)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.graph.runtime import KG, open_kg
from retrieval.graph.traverse import read_chunks
from retrieval.search.dual_channel import dual_channel_search
from retrieval.search.modes import MODES, run_mode
from retrieval.search.multidoc import multidoc_search
from retrieval.search.tools import comprehensive_search, fuse_weighted, graph_search, hybrid_search, vector_search

pytestmark = pytest.mark.integration
Q = "How does price elasticity affect the choice of a penetration pricing strategy?"


@pytest.mark.parametrize(
    ("fn", "kwargs", "field"),
    [
        (vector_search, {"query": ""}, "query"),
        (vector_search, {"query": "   "}, "query"),
        (vector_search, {"query": "x" * 2001}, "query"),
        (vector_search, {"query": "ok", "limit": 0}, "limit"),
        (vector_search, {"query": "ok", "limit": 51}, "limit"),
        (hybrid_search, {"query": "ok", "text_weight": -0.1}, "text_weight"),
        (hybrid_search, {"query": "ok", "text_weight": 1.5}, "text_weight"),
        (comprehensive_search, {"query": "ok", "limit": 100}, "limit"),
        (graph_search, {"query": ""}, "query"),
    ],
)
def test_parameters_are_validated(demo_kg: KG, fn, kwargs, field) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError) as err:
        fn(demo_kg, **kwargs)
    assert err.value.errors()[0]["loc"] == (field,)


def test_vector_search_returns_chunks_with_metadata(demo_kg: KG) -> None:
    res = vector_search(demo_kg, Q, limit=5)
    assert res.mode == "vector" and len(res.facts) == 5
    scores = [f.scores["vector"] for f in res.facts]
    assert scores == sorted(scores, reverse=True)
    top = res.facts[0]
    assert "elasticity" in top.text.lower() or "penetration" in top.text.lower()
    assert top.sources[0].original_document and top.sources[0].chapter and top.sources[0].author


def test_hybrid_weights_move_the_fused_score(demo_kg: KG) -> None:
    text_only = hybrid_search(demo_kg, Q, limit=5, text_weight=1.0)
    vec_only = hybrid_search(demo_kg, Q, limit=5, text_weight=0.0)
    for f in text_only.facts:
        assert f.scores["hybrid"] == pytest.approx(f.scores["bm25_norm"])
    for f in vec_only.facts:
        assert f.scores["hybrid"] == pytest.approx(f.scores["vector_norm"])
    assert all("bm25" in f.scores and "vector" in f.scores for f in text_only.facts)


def test_fusion_is_normalised_weighting() -> None:
    fused = fuse_weighted([("a", 10.0), ("b", 5.0)], [("b", 0.9), ("c", 0.5)], text_weight=0.5)
    got = {i: round(s, 6) for i, s, _, _ in fused}
    assert got == {"a": 0.5, "b": 0.5, "c": 0.0}


def test_graph_search_facts_carry_ids_and_chunks(demo_kg: KG) -> None:
    res = graph_search(demo_kg, Q, limit=5)
    assert res.mode == "graph" and res.facts
    assert all(f.relation_ids and f.entity_ids and f.chunk_ids for f in res.facts)


def test_comprehensive_merges_both_channels(demo_kg: KG) -> None:
    res = comprehensive_search(demo_kg, Q, limit=5)
    assert res.counts["vector"] == 5 and res.counts["graph"] > 0
    assert res.counts["total"] == len(res.facts) and not res.warnings or all("Gemini" in w for w in res.warnings)


def test_dual_channel_orders_and_cites(demo_kg: KG) -> None:
    res = dual_channel_search(demo_kg, Q, limit=4)
    channels = [f.channel for f in res.facts]
    assert channels[:4] == ["document"] * 4 and "graph" in channels
    assert channels.index("graph") >= 4  # graph context after the semantic chunks
    assert res.counts["graph"] <= 2 * res.counts["document"]
    assert res.counts["hops"] == 2  # "affect" + two entities: a relationship query
    graph_facts = [f for f in res.facts if f.channel == "graph"]
    assert all(f.citation.startswith(f"[{i}: Knowledge Graph - ") for i, f in enumerate(res.facts, 1)
               if f.channel == "graph")
    names = [f.citation.split(" - ", 1)[1] for f in graph_facts]
    assert len(names) == len({n.casefold() for n in names})  # deduplicated by entity name
    simple = dual_channel_search(demo_kg, "What is price elasticity?", limit=4)
    assert simple.counts["hops"] == 1


def test_multidoc_groups_by_book(demo_kg: KG) -> None:
    res = multidoc_search(demo_kg, Q, num_docs=2, max_sections=2, min_relevance=0.1)
    assert 1 <= len(res.groups) <= 2
    by_id = {f.id: f for f in res.facts}
    for book, ids in res.groups.items():
        chunks = [by_id[i] for i in ids if by_id[i].type == "document"]
        assert 1 <= len(chunks) <= 2
        assert all(c.sources[0].original_document == book for c in chunks)


@pytest.mark.parametrize("mode", MODES)
def test_a_result_carries_the_records_of_the_chunks_it_cites(demo_kg: KG, mode: str) -> None:
    """What a page used to read from DocumentChunks after the search comes with the result: every chunk a fact
    cites (its chunk ids and its sources), as the store holds it, and no other."""
    res = run_mode(demo_kg, mode, Q, limit=5, no_match=False)
    cited = [c for f in res.facts for c in (*f.chunk_ids, *(s.chunk_id for s in f.sources)) if c]
    assert res.facts and cited, mode
    assert res.chunks == read_chunks(demo_kg.vectors, cited)


def _broken_copy(demo_data_dir: Path, tmp_path: Path, embedder: Embedder, corrupt: str) -> KG:
    """A copy of the demo graph with one store's file overwritten by garbage: a real fault, not a mock."""
    copy = tmp_path / "kg"
    shutil.copytree(demo_data_dir, copy, symlinks=True)
    kg = open_kg(Settings.from_env(env={}, data_dir=copy), embedder=embedder)
    target = kg.handle.dir / corrupt
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    target.write_bytes(b"not a database" * 100)
    return kg


def test_comprehensive_survives_a_broken_graph_store(demo_data_dir: Path, tmp_path: Path, embedder: Embedder) -> None:
    kg = _broken_copy(demo_data_dir, tmp_path, embedder, "kuzu")
    try:
        res = comprehensive_search(kg, Q, limit=3)
        dual = dual_channel_search(kg, Q, limit=3)
    finally:
        kg.close()
    assert res.counts == {"vector": 3, "total": 3}
    assert any(w.startswith("graph search failed") for w in res.warnings)
    assert [f.channel for f in dual.facts] == ["document"] * 3
    assert any(w.startswith("graph channel failed") for w in dual.warnings)
