"""The KG retriever end to end on the demo graph (Kuzu + Milvus Lite + packaged MiniLM)."""

from __future__ import annotations

import json

import pytest

from retrieval.answer.agent_tools import search_knowledge_graph
from retrieval.config import Settings
from retrieval.errors import ValidationError
from retrieval.graph.runtime import KG
from retrieval.models import SearchParams, SearchResult
from retrieval.search.retriever import search
from retrieval.search.verbalize import HEADER, NOTHING, to_markdown
from tests.aio import run_async
from tests.gemini_stub import gemini_stub

pytestmark = pytest.mark.integration
MULTI_HOP = "How does brand awareness connect to conversion rate?"
STAGES = {"decompose", "seeds", "ppr", "paths", "global", "verbalize", "sources", "rerank", "total"}


@pytest.fixture(scope="module")
def result(demo_kg: KG) -> SearchResult:
    return search(demo_kg, MULTI_HOP, SearchParams(max_results=8))


def test_multi_hop_question_gives_described_paths_and_book_chapter_sources(result: SearchResult) -> None:
    assert result.decomposition is not None and result.decomposition.hops == 2
    assert result.paths and any(len(p.edges) >= 2 for p in result.paths)
    for path in result.paths:
        assert path.edges and all(e.description and e.source_chunk for e in path.edges)
        assert path.ppr_score > 0 and -1.0 <= path.path_semantic_score <= 1.0
    local = [f for f in result.facts if f.type == "local"]
    assert local and all("--[" in f.text and ": " in f.text for f in local)
    assert all({"ppr", "path_semantic"} <= f.scores.keys() for f in local)
    assert all("similarity" in f.scores for f in result.facts if f.type == "global")
    assert {f.channel for f in result.facts} == {"graph"}  # cited as graph facts in every mode
    for fact in result.facts:
        assert fact.sources, fact.text
        assert all(s.original_document and s.chapter for s in fact.sources)
        assert len({(s.source, s.original_document) for s in fact.sources}) == len(fact.sources)


def test_result_trace_subgraph_and_rerank(result: SearchResult) -> None:
    assert len(result.facts) == 8 and len(result.paths) + len(result.global_relations) > 8
    assert [f.scores["mmr_rank"] for f in result.facts] == list(range(1, 9))
    assert {t.stage for t in result.timings} == STAGES and all(t.ms >= 0 for t in result.timings)
    # no key: offline decomposition by design, said by the trace's method; a warning is for what changed the result
    assert result.decomposition is not None and result.decomposition.method == "offline" and result.warnings == ()
    node_ids = {n.id for n in result.subgraph.nodes}
    assert result.seed_ids and set(result.seed_ids) <= node_ids
    assert "brand-awareness" in result.seed_ids and "conversion-rate" in result.seed_ids
    assert set(result.destination_ids) <= node_ids and not set(result.destination_ids) & set(result.seed_ids)
    edge_ids = {e.id for e in result.subgraph.edges}
    assert {r for f in result.facts for r in f.relation_ids} == edge_ids
    json.loads(result.model_dump_json())  # the UI and `search --json` serialise it


def test_path_scores_come_from_stored_vectors_and_only_queries_are_embedded(demo_kg: KG) -> None:
    import numpy as np

    from retrieval.stores.base import RELATIONS

    seen: list[str] = []
    embed = demo_kg.embedder.embed

    def counting(texts: list[str]) -> np.ndarray:
        seen.extend(texts)
        return embed(texts)

    query = "Which channel strategy raises customer lifetime value?"  # not embedded by any other test
    demo_kg.embedder.embed = counting  # type: ignore[method-assign]
    try:
        got = search(demo_kg, query, SearchParams(max_results=4))
    finally:
        del demo_kg.embedder.embed
    decomposition = got.decomposition
    assert decomposition is not None and got.paths
    assert set(seen) <= {query, *decomposition.global_queries}  # no fact, path or entity text
    qvec = embed([query])[0]
    for path in got.paths:
        summed = demo_kg.vectors.vectors(RELATIONS, [e.id for e in path.edges]).sum(axis=0)
        expected = float(summed @ qvec / np.linalg.norm(summed))
        assert path.path_semantic_score == pytest.approx(expected, abs=1e-5)


def test_markdown_layout(result: SearchResult) -> None:
    md = to_markdown(result)
    lines = md.splitlines()
    assert lines[0] == HEADER and "### Entities" in lines and "### Relationships & Paths" in lines
    facts = [i for i, line in enumerate(lines) if line[:1].isdigit()]
    assert len(facts) == len(result.facts)
    assert all(lines[i + 1].startswith("   _Source: ") and " — " in lines[i + 1] for i in facts)
    assert to_markdown(SearchResult(query="anything")) == NOTHING


def test_hops_and_neighbourhood_mode(demo_kg: KG) -> None:
    one = search(demo_kg, MULTI_HOP, SearchParams(max_hops=1))
    assert one.paths and all(len(p.edges) == 1 for p in one.paths)
    local = search(demo_kg, MULTI_HOP, SearchParams(full_graph_max_edges=0, max_edges=50))
    assert local.paths and all(p.edges for p in local.paths)


def test_unknown_entities_and_bad_queries(demo_kg: KG) -> None:
    res = search(demo_kg, "Qwzx vlorp frobnicate?", SearchParams(max_results=3))
    assert len(res.facts) <= 3  # fewer facts, never a crash
    for bad in ("", "   ", "x" * 2001):
        with pytest.raises(ValidationError, match="query"):
            search(demo_kg, bad)


def _gemini(demo_kg: KG, url: str) -> Settings:
    return demo_kg.settings.with_(gemini_api_key="test-key", gemini_base_url=url)


LLM = SearchParams(max_results=3, rerank="llm")
GOOD = {"local_queries": ["brand awareness"], "global_queries": ["brand awareness drives conversion"],
        "entities": ["brand awareness", "conversion rate", "consideration set"], "top_ranked_ids": [2, 0, 1]}


def test_gemini_good_answer(demo_kg: KG) -> None:
    with gemini_stub() as (url, state):
        state.text = json.dumps(GOOD)
        res = search(demo_kg, MULTI_HOP, LLM, settings=_gemini(demo_kg, url))
    assert res.decomposition is not None and res.decomposition.method == "gemini"
    assert "brand awareness drives conversion" in res.decomposition.global_queries
    assert "consideration-set" in res.seed_ids
    assert [f.scores["llm_rank"] for f in res.facts] == [1, 2, 3] and not res.warnings
    assert len(state.requests) == 2  # one decomposition, one rerank


def test_gemini_malformed_and_out_of_range(demo_kg: KG) -> None:
    with gemini_stub() as (url, state):
        state.text = "not json at all"
        bad = search(demo_kg, MULTI_HOP, LLM, settings=_gemini(demo_kg, url))
        state.text = json.dumps({**GOOD, "top_ranked_ids": [99, -1, 0]})
        odd = search(demo_kg, MULTI_HOP, LLM, settings=_gemini(demo_kg, url))
    assert any(w.startswith("Gemini decomposition failed") for w in bad.warnings)
    assert any(w.startswith("LLM rerank failed") for w in bad.warnings) and len(bad.facts) == 3
    assert bad.decomposition is not None and bad.decomposition.method == "offline"
    assert any("out-of-range" in w for w in odd.warnings)
    assert len(odd.facts) == 3 and odd.facts[0].scores["llm_rank"] == 1


def test_gemini_server_down(demo_kg: KG) -> None:
    with gemini_stub() as (url, _):
        pass  # stopped
    res = search(demo_kg, MULTI_HOP, LLM, settings=_gemini(demo_kg, url))
    assert res.decomposition is not None and res.decomposition.method == "offline"
    assert any(w.startswith("Gemini decomposition failed") for w in res.warnings)
    assert any(w.startswith("LLM rerank failed") for w in res.warnings)
    assert len(res.facts) == 3 and res.paths


def test_agent_tool_returns_markdown(demo_kg: KG) -> None:
    md = run_async(search_knowledge_graph(MULTI_HOP, 4, settings=demo_kg.settings))
    assert md.startswith(HEADER) and "_Source: " in md
    assert sum(1 for line in md.splitlines() if line[:1].isdigit()) == 4
    with pytest.raises(ValidationError):
        run_async(search_knowledge_graph("", settings=demo_kg.settings))
    with pytest.raises(ValidationError):
        run_async(search_knowledge_graph("ok", 0, settings=demo_kg.settings))
