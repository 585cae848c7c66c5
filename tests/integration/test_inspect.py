"""retrieval.evaluation.inspect on the demo graph (Kuzu + Milvus Lite + MiniLM): pools, exact re-fusion, reranking."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from retrieval.evaluation.inspect import (
    Memo,
    Pool,
    apply_rerankers,
    candidate_pool,
    pool_kind_of,
    pool_order,
    refuse,
)
from retrieval.graph.runtime import KG
from retrieval.models import VerbalizedFact
from retrieval.rerank import GraphReranker, MMRReranker, NoRerank, RerankOutput
from retrieval.search.tools import hybrid_search

pytestmark = pytest.mark.integration
QUERY = "How does brand awareness connect to conversion rate?"


@pytest.fixture(scope="module")
def chunks(demo_kg: KG) -> Pool:
    return candidate_pool(demo_kg, QUERY, "chunks", 20)


def test_every_pool_kind_carries_similarity_and_its_own_scores(demo_kg: KG, chunks: Pool) -> None:
    facts = candidate_pool(demo_kg, QUERY, "facts", 20)
    entities = candidate_pool(demo_kg, QUERY, "entities", 15)
    for pool, kind in ((facts, "facts"), (chunks, "chunks"), (entities, "entities")):
        assert pool.candidates and pool.kind == kind and pool.graph_version == demo_kg.version
        assert all("similarity" in c.scores for c in pool.candidates)
        assert {pool_kind_of(c.id) for c in pool.candidates} == {kind}
    assert any("ppr" in c.scores for c in facts.candidates)
    assert all({"bm25_norm", "vector_norm", "hybrid"} <= set(c.scores) for c in chunks.candidates)
    assert len(entities.candidates) == 15 and all(c.type == "entity" for c in entities.candidates)
    ppr = [c.scores["ppr"] for c in entities.candidates]
    assert max(ppr) > 0 and len(set(ppr)) > 1, "PPR seeded on the hits spreads unevenly"
    with pytest.raises(ValueError, match="unknown pool kind"):
        candidate_pool(demo_kg, QUERY, "paths", 5)  # type: ignore[arg-type]


def test_refuse_at_the_retrieval_weight_reproduces_hybrid_search(demo_kg: KG, chunks: Pool) -> None:
    again = refuse(chunks.candidates, 0.3)
    expected = hybrid_search(demo_kg, QUERY, limit=20, text_weight=0.3).facts
    assert [c.id for c in again] == [c.id for c in expected]
    assert [c.scores["hybrid"] for c in again] == pytest.approx([c.scores["hybrid"] for c in expected])


@pytest.mark.parametrize(("weight", "part"), [(1.0, "bm25_norm"), (0.0, "vector_norm")])
def test_refuse_at_an_extreme_weight_orders_by_one_part(chunks: Pool, weight: float, part: str) -> None:
    before = [dict(c.scores) for c in chunks.candidates]
    out = refuse(chunks.candidates, weight)
    assert [c.scores[part] for c in out] == sorted((c.scores[part] for c in out), reverse=True)
    assert [c.scores["hybrid"] for c in out] == pytest.approx([c.scores[part] for c in out])
    assert [dict(c.scores) for c in chunks.candidates] == before, "inputs are never mutated"
    assert [c.id for c in pool_order(chunks, weight)] == [c.id for c in out]


def test_refuse_keeps_candidates_without_parts_and_checks_the_weight() -> None:
    plain = [VerbalizedFact(id="x", type="local", text="x"), VerbalizedFact(id="y", type="local", text="y")]
    assert refuse(plain, 0.5) == plain
    with pytest.raises(ValueError, match="text_weight"):
        refuse(plain, 1.5)


def test_apply_rerankers_ranks_the_whole_pool_and_merges_added_scores(demo_kg: KG, chunks: Pool) -> None:
    pool = list(chunks.candidates)
    rerankers = {
        "none": NoRerank(),
        "graph": GraphReranker(demo_kg, demo_kg.embedder, 0.0, 1.0),
        "mmr": MMRReranker(demo_kg.embedder, 0.5),
    }
    inspection = apply_rerankers(QUERY, pool, rerankers)
    ids = [c.id for c in pool]
    for name in rerankers:
        assert sorted(inspection.orders[name]) == sorted(ids), f"{name} must rank the whole pool"
    assert inspection.orders["none"] == ids
    merged = inspection.candidates[0].scores
    assert {"hybrid", "pagerank", "graph_beta_term", "mmr_rank"} <= set(merged)
    assert all(c.scores.get("graph_alpha_term") == 0.0 for c in inspection.candidates)  # α = 0
    ranks = inspection.ranks()
    assert ranks["graph"][inspection.orders["graph"][0]] == 1
    assert inspection.runs()["mmr"] == {QUERY: inspection.orders["mmr"]}
    shuffled = inspection.in_order(list(reversed(ids)))
    assert [c.id for c in shuffled.candidates] == list(reversed(ids)) and shuffled.orders == inspection.orders
    assert "graph_score" not in pool[0].scores, "inputs are never mutated"


class Counting:
    """A reranker that reverses the pool and counts its calls."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def rerank(self, query: str, candidates: Sequence[VerbalizedFact], top_k: int) -> RerankOutput:
        self.calls += 1
        return RerankOutput(list(reversed(candidates))[:top_k], ["slow model"])


def test_memo_pays_once_per_query_and_pool() -> None:
    inner = Counting()
    memo = Memo(inner)
    pool = [VerbalizedFact(id=i, type="local", text=i) for i in "abc"]
    first = memo.rerank("q", pool, 3)
    assert memo.rerank("q", pool, 3) is first and inner.calls == 1
    memo.rerank("q", list(reversed(pool)), 3)
    memo.rerank("other", pool, 3)
    assert inner.calls == 3
    assert [c.id for c in first.candidates] == ["c", "b", "a"] and first.warnings == ["slow model"]
    assert apply_rerankers("q", pool, {"m": memo}).warnings == {"m": ["slow model"]}
