"""LLM diversity reranker (seed 000): Gemini picks the most relevant and diverse facts, as JSON ids."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from retrieval.config import Settings
from retrieval.llm import LLMError, gemini_json
from retrieval.models import VerbalizedFact
from retrieval.rerank.base import RerankContext, RerankOutput, check_top_k, with_scores

SYSTEM_INSTRUCTION = (
    "You are a reranker for a knowledge-graph retrieval system. Given a user query and a numbered list of "
    "candidate facts, choose the facts that are most relevant to the query AND together most DIVERSE: prefer a "
    "fact that adds new information over a near-duplicate of a fact already chosen. Use only the ids shown. "
    'Answer with JSON only: {"top_ranked_ids": [id, ...]}, best first.'
)

TASK_PROMPT = (
    "Query: {query}\n\n"
    "Candidate facts:\n{candidates}\n\n"
    "Return JSON {{\"top_ranked_ids\": [...]}} with the ids of the {top_k} best facts for answering the query, "
    "most relevant first, avoiding redundant facts."
)


class RankedIds(BaseModel):
    """The structured answer asked of Gemini."""

    top_ranked_ids: list[int]


def build_prompt(query: str, candidates: Sequence[VerbalizedFact], top_k: int, max_chars: int = 400) -> str:
    """The seed task prompt: numbered `[i] text` candidates (0-based), each cut to `max_chars`."""
    lines = "\n".join(f"[{i}] {' '.join(c.text.split())[:max_chars]}" for i, c in enumerate(candidates))
    return TASK_PROMPT.format(query=query, candidates=lines, top_k=top_k)


def clean_ids(ids: Sequence[int], n: int, top_k: int) -> tuple[list[int], list[str]]:
    """Keep in-range, first-seen ids (at most top_k); say what was dropped."""
    kept: list[int] = []
    out_of_range, duplicates = [], []
    for i in ids:
        if not 0 <= i < n:
            out_of_range.append(i)
        elif i in kept:
            duplicates.append(i)
        elif len(kept) < top_k:
            kept.append(i)
    notes = []
    if out_of_range:
        notes.append(f"LLM rerank: dropped out-of-range ids {out_of_range[:10]}")
    if duplicates:
        notes.append(f"LLM rerank: dropped duplicate ids {duplicates[:10]}")
    return kept, notes


class LLMDiversityReranker:
    """Gemini (google-genai, structured JSON) diversity reranker; adds `llm_rank` (1-based).

    Invalid ids are dropped and the list is filled from the original order; any failure (no key,
    HTTP error, 429, malformed JSON) keeps the first top_k with a warning.
    """

    name = "llm"

    @classmethod
    def build(cls, ctx: RerankContext) -> LLMDiversityReranker | None:
        return cls(ctx.settings) if ctx.settings.gemini_enabled else None

    def __init__(self, settings: Settings, *, timeout_ms: int = 15_000, max_chars: int = 400) -> None:
        self.settings = settings
        self.timeout_ms = timeout_ms
        self.max_chars = max_chars

    def rerank(self, query: str, candidates: Sequence[VerbalizedFact], top_k: int) -> RerankOutput:
        check_top_k(top_k)
        if not candidates:
            return RerankOutput([], [])
        k = min(top_k, len(candidates))
        try:
            answer = gemini_json(
                self.settings,
                build_prompt(query, candidates, k, self.max_chars),
                RankedIds,
                system_instruction=SYSTEM_INSTRUCTION,
                timeout_ms=self.timeout_ms,
            )
        except LLMError as exc:
            return RerankOutput(list(candidates[:k]), [f"LLM rerank failed, kept the first {k}: {exc}"])
        chosen, warnings = clean_ids(answer.top_ranked_ids, len(candidates), k)
        if len(chosen) < k:
            warnings.append(f"LLM rerank: {len(chosen)} valid ids for {k} places; filled from the original order")
            chosen += [i for i in range(len(candidates)) if i not in chosen][: k - len(chosen)]
        out = [with_scores(candidates[i], {"llm_rank": rank}) for rank, i in enumerate(chosen, start=1)]
        return RerankOutput(out, warnings)
