"""The real google-genai client against the local stand-in server."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from retrieval.config import Settings
from retrieval.llm import LLMError, gemini_json
from tests.gemini_stub import gemini_stub


class Ranked(BaseModel):
    top_ranked_ids: list[int]


def _settings(url: str) -> Settings:
    return Settings.from_env(env={}, gemini_api_key="test-key", gemini_base_url=url)


def test_good_answer_is_parsed_and_key_sent() -> None:
    with gemini_stub() as (url, state):
        state.text = '{"top_ranked_ids": [2, 0]}'
        out = gemini_json(_settings(url), "rank these", Ranked, system_instruction="be diverse")
    assert out.top_ranked_ids == [2, 0]
    assert state.requests[0]["key"] == "test-key"
    assert ":generateContent" in state.requests[0]["path"]


@pytest.mark.parametrize(("status", "text"), [(200, "not json"), (200, '{"other": 1}'), (429, ""), (500, "")])
def test_failures_raise_llm_error(status: int, text: str) -> None:
    with gemini_stub() as (url, state):
        state.status, state.text = status, text
        with pytest.raises(LLMError):
            gemini_json(_settings(url), "q", Ranked)


def test_server_down_and_no_key() -> None:
    with gemini_stub() as (url, _):
        pass  # stopped: nothing listens on the port any more
    with pytest.raises(LLMError, match="failed"):
        gemini_json(_settings(url), "q", Ranked, timeout_ms=2000)
    with pytest.raises(LLMError, match="not configured"):
        gemini_json(Settings.from_env(env={}), "q", Ranked)
