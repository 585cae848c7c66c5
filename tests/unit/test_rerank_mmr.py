"""MMR diversity reranker on real MiniLM embeddings, and the greedy MMR core on hand-made vectors."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.embedding import Embedder, EmbeddingCache
from retrieval.models import VerbalizedFact
from retrieval.rerank import MMRReranker, NoRerank, mmr_order, rerank_by_key

QUERY = "What is the capital of France?"
TEXTS = [
    "Paris is the capital of France.",
    "The capital city of France is Paris.",
    "France's capital is the city of Paris.",
    "Berlin is the capital of Germany.",
    "The Eiffel Tower stands in Paris, on the Champ de Mars.",
    "Bananas are rich in potassium.",
]


def facts(texts: list[str]) -> list[VerbalizedFact]:
    return [VerbalizedFact(id=f"f{i}", type="global", text=t, scores={"ppr": float(i)}) for i, t in enumerate(texts)]


def test_mmr_core_on_hand_vectors() -> None:
    # two identical vectors near the query, one orthogonal-ish but still relevant
    vecs = np.array([[1.0, 0.0], [1.0, 0.0], [0.6, 0.8]])
    rel = np.array([0.9, 0.9, 0.5])
    assert mmr_order(rel, vecs, 1.0, 3)[0] == [0, 1, 2]
    picked, scores = mmr_order(rel, vecs, 0.4, 3)
    assert picked == [0, 2, 1]  # the duplicate drops below the diverse one
    assert scores[0] == pytest.approx(0.4 * 0.9)
    assert scores[1] == pytest.approx(0.4 * 0.5 - 0.6 * 0.6)
    assert scores[2] == pytest.approx(0.4 * 0.9 - 0.6 * 1.0)
    assert mmr_order(rel, vecs, 0.4, 10)[0] == [0, 2, 1]  # top_k beyond n


def test_lambda_one_is_relevance_order(embedder: Embedder) -> None:
    cands = facts(TEXTS)
    out = MMRReranker(embedder, lambda_=1.0).rerank(QUERY, cands, top_k=6)
    vecs = embedder.embed(TEXTS)
    rel = vecs @ embedder.embed([QUERY])[0]
    assert [c.id for c in out.candidates] == [f"f{i}" for i in np.argsort(-rel, kind="stable")]
    assert [c.scores["mmr_rank"] for c in out.candidates] == [1, 2, 3, 4, 5, 6]
    assert out.candidates[0].scores["mmr_score"] == pytest.approx(float(rel.max()), abs=1e-5)


def test_small_lambda_promotes_diversity(embedder: Embedder) -> None:
    cands = facts(TEXTS[:3] + [TEXTS[4]])  # three paraphrases and one different Paris fact
    relevance_top2 = MMRReranker(embedder, lambda_=1.0).rerank(QUERY, cands, top_k=2).candidates
    diverse_top2 = MMRReranker(embedder, lambda_=0.3).rerank(QUERY, cands, top_k=2).candidates
    assert {c.id for c in relevance_top2} <= {"f0", "f1", "f2"}
    assert diverse_top2[0].id == relevance_top2[0].id
    assert diverse_top2[1].id == "f3"


def test_relevance_key_and_inputs_untouched(embedder: Embedder) -> None:
    cands = facts(TEXTS)
    before = [c.model_dump() for c in cands]
    out = MMRReranker(embedder, lambda_=1.0, relevance_key="ppr").rerank(QUERY, cands, top_k=3)
    assert [c.id for c in out.candidates] == ["f5", "f4", "f3"]  # ppr = index
    assert [c.model_dump() for c in cands] == before
    assert all("mmr_rank" not in c.scores for c in cands)


def test_lambda_validation_cache_sharing_and_empty(embedder: Embedder) -> None:
    with pytest.raises(ValueError, match="lambda"):
        MMRReranker(embedder, lambda_=1.5)
    rr = MMRReranker(embedder)
    assert rr.with_lambda(0.2).vectors is rr.vectors
    assert rr.rerank(QUERY, [], 5).candidates == []
    with pytest.raises(ValueError, match="top_k"):
        rr.rerank(QUERY, facts(TEXTS), 0)


def test_embedding_cache_embeds_each_text_once(embedder: Embedder) -> None:
    calls: list[int] = []

    class Counting:
        name, dim = embedder.name, embedder.dim

        def embed(self, texts: list[str]) -> np.ndarray:
            calls.append(len(texts))
            return embedder.embed(texts)

    cache = EmbeddingCache(Counting())
    a = cache.embed(TEXTS)
    b = cache.embed(TEXTS[::-1] + ["new text"])
    assert calls == [6, 1]
    np.testing.assert_allclose(b[:6], a[::-1])


def test_passthroughs() -> None:
    cands = facts(TEXTS)
    assert [c.id for c in NoRerank().rerank(QUERY, cands, 2).candidates] == ["f0", "f1"]
    partial = [*cands[:3], cands[3].model_copy(update={"scores": {}})]
    out = rerank_by_key(partial, "ppr")
    assert [c.id for c in out.candidates] == ["f2", "f1", "f0", "f3"] and "no 'ppr' score" in out.warnings[0]
