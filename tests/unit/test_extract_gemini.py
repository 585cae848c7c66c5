"""Gemini extraction through the real google-genai client against the local stand-in server: per-chunk answers,
the answer cache (re-ingest and resume), retries with back-off, malformed answers, bounded concurrency."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from retrieval.config import Settings
from retrieval.ingest.extract import extractor_for
from retrieval.ingest.extract.base import ChunkInput, merge_graphs
from retrieval.ingest.extract.gemini import CACHE_FILE, GeminiExtractor
from retrieval.ingest.extract.offline import OfflineExtractor
from retrieval.llm import LLMError
from tests.gemini_stub import gemini_stub, prompt_of

CHUNKS = [
    ChunkInput(f"c{i}", f"Person{i} founded Company{i} in City{i}.", book="Annals", chapter=f"Chapter {i}")
    for i in range(6)
]


def answer_for(body: dict[str, Any]) -> str:
    """A well-formed answer naming the chunk's own entities (parsed back from the prompt's passage)."""
    i = re.search(r"Person(\d+) founded", prompt_of(body)).group(1)  # type: ignore[union-attr]
    return json.dumps({
        "entities": [{"name": f"Person{i}", "type": "PERSON", "description": f"Founder of Company{i}."},
                     {"name": f"Company{i}", "type": "ORGANIZATION", "description": ""}],
        "relations": [{"source": f"Person{i}", "target": f"Company{i}", "type": "founded",
                       "description": f"Person{i} founded Company{i} in City{i}."},
                      {"source": f"Company{i}", "target": f"City{i}", "type": "LOCATED_IN",
                       "description": f"Company{i} was founded in City{i}."}],
    })


def _settings(url: str, data_dir: Path) -> Settings:
    return Settings.from_env(env={}, gemini_api_key="test-key", gemini_base_url=url, data_dir=data_dir)


def _extractor(settings: Settings, **kw: Any) -> GeminiExtractor:
    return GeminiExtractor(settings, backoff_s=0.01, **kw)


def test_each_chunk_gets_its_own_typed_answer_merged_with_source_chunks(tmp_path: Path) -> None:
    with gemini_stub() as (url, state):
        state.responder = lambda body: (200, answer_for(body))
        run = _extractor(_settings(url, tmp_path)).extract(CHUNKS)
    assert len(state.requests) == len(CHUNKS) and run.stats["calls"] == len(CHUNKS)
    body = state.requests[0]["body"]
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert "responseSchema" in body["generationConfig"] or "responseJsonSchema" in body["generationConfig"]
    assert "Chapter " in prompt_of(body) and "Book: Annals" in prompt_of(body)
    entities, relations, warnings = merge_graphs(CHUNKS, run.graphs)
    by_name = {e.name: e for e in entities}
    assert by_name["Person3"].type == "person" and by_name["Person3"].description == "Founder of Company3."
    assert by_name["City3"].type == "unknown"  # named only by a relation: added and counted
    assert any("not among their chunk's entities" in w for w in warnings)
    founded = [r for r in relations if r.relation_type == "FOUNDED"]
    assert len(founded) == len(CHUNKS)
    assert {r.source_chunks for r in founded} == {(c.id,) for c in CHUNKS}
    assert all(r.description.startswith("Person") for r in founded)


def test_reingest_is_served_from_the_cache_and_a_resumed_run_asks_only_the_missing(tmp_path: Path) -> None:
    with gemini_stub() as (url, state):
        state.responder = lambda body: (200, answer_for(body))
        settings = _settings(url, tmp_path)
        first = _extractor(settings).extract(CHUNKS[:4])  # "killed" after four chunks
        assert len(state.requests) == 4 and (tmp_path / CACHE_FILE).is_file()
        seen: list[tuple[str, int, int]] = []
        resumed = _extractor(settings).extract(CHUNKS, lambda *a: seen.append(a))
        assert len(state.requests) == 6  # only the two missing chunks were asked
        assert seen[0] == ("extracting", 4, 6) and seen[-1] == ("extracting", 6, 6)
        assert resumed.stats["cached"] == 4 and resumed.stats["calls"] == 2
        again = _extractor(settings).extract(CHUNKS)
        assert len(state.requests) == 6 and again.stats["calls"] == 0  # re-ingest: no call at all
    assert again.graphs == resumed.graphs and again.graphs[:4] == first.graphs


def test_rate_limits_server_errors_and_timeouts_are_retried(tmp_path: Path) -> None:
    calls: dict[str, int] = {}
    lock = threading.Lock()

    def flaky(body: dict[str, Any]) -> tuple[int, str]:
        key = prompt_of(body)
        with lock:
            calls[key] = calls.get(key, 0) + 1
            n = calls[key]
        if "Person0 " in key and n == 1:
            return 429, ""
        if "Person1 " in key and n <= 2:
            return 503, ""
        if "Person2 " in key and n == 1:
            threading.Event().wait(0.8)  # outlasts the client's 0.4 s timeout
        return 200, answer_for(body)

    with gemini_stub() as (url, state):
        state.responder = flaky
        sleeps: list[float] = []
        run = _extractor(_settings(url, tmp_path), timeout_ms=400, sleep=sleeps.append).extract(CHUNKS[:3])
    assert all(g is not None for g in run.graphs) and not run.warnings
    assert sorted(calls.values()) == [2, 2, 3]
    assert len(sleeps) == 4 and all(0 <= s <= 0.04 for s in sleeps)  # jittered, exponential cap 0.01 * 2**n


def test_malformed_answer_is_a_counted_warning_and_not_cached(tmp_path: Path) -> None:
    def half_bad(body: dict[str, Any]) -> tuple[int, str]:
        return (200, "{not json") if "Person1 " in prompt_of(body) else (200, answer_for(body))

    with gemini_stub() as (url, state):
        state.responder = half_bad
        settings = _settings(url, tmp_path)
        run = _extractor(settings).extract(CHUNKS[:3])
        assert run.graphs[1] is None and run.graphs[0] is not None and run.stats["malformed"] == 1
        assert any("1 chunks got an answer off the schema" in w for w in run.warnings)
        state.responder = lambda body: (200, answer_for(body))
        retry = _extractor(settings).extract(CHUNKS[:3])
    assert retry.stats["calls"] == 1 and retry.graphs[1] is not None  # asked again next time


def test_exhausted_retries_warn_and_a_bad_key_stops_at_once(tmp_path: Path) -> None:
    with gemini_stub() as (url, state):
        state.responder = lambda body: (500, "") if "Person0 " in prompt_of(body) else (200, answer_for(body))
        run = _extractor(_settings(url, tmp_path), attempts=2).extract(CHUNKS[:3])
        assert run.graphs[0] is None and run.stats["failed"] == 1
        assert any("failed after 2 attempts" in w and "re-run" in w for w in run.warnings)
        state.requests.clear()
        state.responder = lambda body: (403, "")
        with pytest.raises(LLMError, match="Gemini call failed"):
            _extractor(_settings(url, tmp_path / "other"), workers=1).extract(CHUNKS)
        assert len(state.requests) < len(CHUNKS)  # not retried, and the queue was cancelled
        state.responder = lambda body: (500, "")
        with pytest.raises(LLMError, match="failed for every chunk"):
            _extractor(_settings(url, tmp_path / "third"), attempts=1).extract(CHUNKS[:2])


def test_concurrency_is_bounded_by_the_worker_count(tmp_path: Path) -> None:
    with gemini_stub() as (url, state):
        state.responder = lambda body: (200, answer_for(body))
        state.delay_s = 0.15
        _extractor(_settings(url, tmp_path), workers=2).extract(CHUNKS)
    assert state.max_in_flight == 2 and len(state.requests) == len(CHUNKS)


def test_the_key_chooses_the_back_end_and_the_warning_says_which() -> None:
    gemini, line = extractor_for(Settings.from_env(env={}, gemini_api_key="k"))
    assert isinstance(gemini, GeminiExtractor) and "Gemini extractor" in line
    offline, line = extractor_for(Settings.from_env(env={}))
    assert isinstance(offline, OfflineExtractor) and line.startswith("extraction: no GEMINI_API_KEY")


def test_the_documents_reader_extracts_with_gemini_and_a_reingest_asks_nothing(tmp_path: Path) -> None:
    from retrieval.ingest import IngestOptions
    from retrieval.ingest.documents import load_documents

    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(3):
        (folder / f"book{i}.md").write_text(f"## Chapter {i}\n\nPerson{i} founded Company{i} in City{i}.\n")
    with gemini_stub() as (url, state):
        state.responder = lambda body: (200, answer_for(body))
        options = IngestOptions(settings=_settings(url, tmp_path / "kg"))
        data = load_documents(folder, options)
        assert len(state.requests) == 3
        assert data.warnings[0].startswith("extraction: Gemini extractor (gemini-2.5-flash, prompt v1")
        assert load_documents(folder, options) == data and len(state.requests) == 3
    founded = next(r for r in data.relations if r.relation_type == "FOUNDED")
    chunk = next(c for c in data.chunks if c.id == founded.source_chunks[0])
    assert founded.description.split(" founded")[0] in chunk.text and chunk.chapter.startswith("Chapter")
