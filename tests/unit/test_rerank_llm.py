"""LLM diversity reranker: the real google-genai client against the local Gemini stand-in server."""

from __future__ import annotations

import pytest

from retrieval.config import Settings
from retrieval.models import VerbalizedFact
from retrieval.rerank import LLMDiversityReranker
from retrieval.rerank.llm import SYSTEM_INSTRUCTION
from tests.gemini_stub import gemini_stub

QUERY = "How is Ada Lovelace connected to Charles Babbage?"


def facts(n: int = 6) -> list[VerbalizedFact]:
    return [VerbalizedFact(id=f"f{i}", type="global", text=f"fact number {i}", scores={"ppr": 1.0 - i / 10})
            for i in range(n)]


def reranker(url: str) -> LLMDiversityReranker:
    return LLMDiversityReranker(Settings.from_env(env={}, gemini_api_key="k", gemini_base_url=url), timeout_ms=3000)


def test_good_answer_orders_and_sends_the_seed_prompts() -> None:
    cands = facts()
    before = [c.model_dump() for c in cands]
    with gemini_stub() as (url, state):
        state.text = '{"top_ranked_ids": [4, 0, 2]}'
        out = reranker(url).rerank(QUERY, cands, top_k=3)
    assert [c.id for c in out.candidates] == ["f4", "f0", "f2"]
    assert [c.scores["llm_rank"] for c in out.candidates] == [1, 2, 3]
    assert out.candidates[0].scores["ppr"] == pytest.approx(0.6)
    assert out.warnings == []
    assert [c.model_dump() for c in cands] == before
    body = state.requests[0]["body"]
    prompt = body["contents"][0]["parts"][0]["text"]
    assert QUERY in prompt and "[0] fact number 0" in prompt and "[5] fact number 5" in prompt
    assert "top_ranked_ids" in prompt and "3 best" in prompt
    assert body["systemInstruction"]["parts"][0]["text"] == SYSTEM_INSTRUCTION
    assert "DIVERSE" in SYSTEM_INSTRUCTION
    assert body["generationConfig"]["responseMimeType"] == "application/json"


def test_out_of_range_and_duplicate_ids_dropped_then_filled_in_original_order() -> None:
    with gemini_stub() as (url, state):
        state.text = '{"top_ranked_ids": [3, 99, 3, -1, 1]}'
        out = reranker(url).rerank(QUERY, facts(), top_k=4)
    assert [c.id for c in out.candidates] == ["f3", "f1", "f0", "f2"]
    assert [c.scores["llm_rank"] for c in out.candidates] == [1, 2, 3, 4]
    text = " | ".join(out.warnings)
    assert "out-of-range ids [99, -1]" in text and "duplicate ids [3]" in text and "filled from the original" in text


def test_extra_ids_beyond_top_k_are_cut() -> None:
    with gemini_stub() as (url, state):
        state.text = '{"top_ranked_ids": [5, 4, 3, 2, 1, 0]}'
        out = reranker(url).rerank(QUERY, facts(), top_k=2)
    assert [c.id for c in out.candidates] == ["f5", "f4"] and out.warnings == []


@pytest.mark.parametrize(
    ("status", "text", "reason"),
    [(200, "this is not json", "off-schema"), (200, '{"ranked": [1]}', "off-schema"), (429, "", "429"),
     (500, "", "500")],
)
def test_failures_fall_back_to_first_top_k(status: int, text: str, reason: str) -> None:
    with gemini_stub() as (url, state):
        state.status, state.text = status, text
        out = reranker(url).rerank(QUERY, facts(), top_k=3)
    assert [c.id for c in out.candidates] == ["f0", "f1", "f2"]
    assert all("llm_rank" not in c.scores for c in out.candidates)
    assert len(out.warnings) == 1 and out.warnings[0].startswith("LLM rerank failed, kept the first 3")
    assert reason in out.warnings[0]


def test_server_down_and_no_key_fall_back() -> None:
    with gemini_stub() as (url, _):
        pass  # stopped
    out = reranker(url).rerank(QUERY, facts(), top_k=2)
    assert [c.id for c in out.candidates] == ["f0", "f1"] and "failed" in out.warnings[0]
    out = LLMDiversityReranker(Settings.from_env(env={})).rerank(QUERY, facts(), top_k=2)
    assert [c.id for c in out.candidates] == ["f0", "f1"] and "not configured" in out.warnings[0]
    assert LLMDiversityReranker(Settings.from_env(env={})).rerank(QUERY, [], 2).candidates == []
