"""Answers, few-shot examples and the no-match signal on the demo graph (Kuzu + Milvus Lite + packaged MiniLM);
Gemini through the real google-genai client against the local stand-in server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retrieval.__main__ import app as cli_app
from retrieval.answer.agent_tools import answer_with_knowledge_graph, search_knowledge_graph
from retrieval.answer.fewshot import FewShotManager
from retrieval.answer.synthesis import answer_question
from retrieval.cli import answer as answer_cli
from retrieval.config import Settings
from retrieval.embedding import Embedder
from retrieval.errors import ValidationError
from retrieval.evaluation.pooling import run_systems
from retrieval.graph.runtime import KG, embedding_cache, open_kg
from retrieval.ingest.build import ingest
from retrieval.models import Answer, Enhancements, SearchResult
from retrieval.search.modes import run_mode
from retrieval.search.nomatch import THRESHOLD
from retrieval.search.retriever import search
from retrieval.search.verbalize import NOTHING
from tests.aio import run_async
from tests.app.graphs import write_hostile_bundle
from tests.gemini_stub import StubState, gemini_stub

pytestmark = pytest.mark.integration
QUESTION = "How does price elasticity affect the choice of a penetration pricing strategy?"
GIBBERISH = "florp glimbus traxon vell?"


@pytest.fixture(scope="module")
def found(demo_kg: KG) -> SearchResult:
    return search(demo_kg, QUESTION)


@pytest.fixture(scope="module")
def stub() -> Iterator[tuple[str, StubState]]:
    with gemini_stub() as served:
        yield served


def keyed(tmp_path: Path, url: str) -> Settings:
    """Gemini on the stand-in; few-shot examples in a data dir of this test (the demo graph is shared)."""
    return Settings.from_env(env={}, data_dir=tmp_path, gemini_api_key="test-key", gemini_base_url=url)


def assert_checked(answer: Answer) -> None:
    """Every citation points to a retrieved item, and the record says which sentences cite nothing."""
    numbers = {e.n for e in answer.evidence}
    assert all(n in numbers for s in answer.sentences for n in s.citations)
    assert answer.uncited == sum(not s.cited for s in answer.sentences)
    assert [e.n for e in answer.citations] == sorted({n for s in answer.sentences for n in s.citations})


def test_without_a_key_the_answer_is_extractive_and_every_sentence_cites(demo_kg: KG, found: SearchResult) -> None:
    answer = answer_question(demo_kg, QUESTION, result=found)
    assert answer.kind == "extractive" and answer.model == ""
    assert "Gemini is not configured (no GEMINI_API_KEY): extractive answer shown" in answer.warnings
    assert 1 <= len(answer.sentences) <= 3 and answer.uncited == 0 and not answer.invalid_citations
    assert_checked(answer)
    assert "penetration pricing" in answer.answer.lower()
    evidence_text = " ".join(e.text for e in answer.citations)
    for s in answer.sentences:  # extractive: each sentence is taken from the evidence it cites
        assert s.text.rstrip(".")[:60] in evidence_text or any(s.text.rstrip(".")[:40] in r.description
                                                               for r in found.subgraph.edges)
    assert answer.enhancements["graph_rerank"].startswith("on:") and answer.enhancements["multi_doc"] == "off"


def test_gemini_answer_streams_and_is_checked(demo_kg: KG, found: SearchResult, stub: tuple[str, StubState],
                                              tmp_path: Path) -> None:
    url, state = stub
    state.reset()
    state.stream = ["Price elasticity decides ", "whether penetration pricing pays [1][2].",
                    " Nobody says why.", " Scale follows [99]."]
    FewShotManager(tmp_path, "demo").add("How does price sensitivity shape discounting?",
                                         "High sensitivity makes discounts win volume [1].")
    seen: list[str] = []
    answer = answer_question(demo_kg, QUESTION, result=found, settings=keyed(tmp_path, url), on_text=seen.append)
    assert answer.kind == "generated" and answer.model == "gemini-2.5-flash"
    assert seen == ["Price elasticity decides ", "Price elasticity decides whether penetration pricing pays [1][2].",
                    "Price elasticity decides whether penetration pricing pays [1][2]. Nobody says why.",
                    answer.answer]  # streamed: the text grows chunk by chunk
    assert [(s.citations, s.invalid) for s in answer.sentences] == [((1, 2), ()), ((), ()), ((), (99,))]
    assert answer.uncited == 2 and answer.invalid_citations == (99,)
    assert [e.n for e in answer.citations] == [1, 2] and answer.citations[0].kind == "fact"
    assert any("[99], which no evidence has" in w for w in answer.warnings)
    assert any("2 of 3 sentences cite no evidence" in w for w in answer.warnings)
    body = state.requests[-1]["body"]
    assert ":streamGenerateContent" in state.requests[-1]["path"]
    prompt = body["contents"][0]["parts"][0]["text"]
    assert f"Question: {QUESTION}" in prompt and "[1] (fact" in prompt and "(passage, " in prompt
    assert "Q: How does price sensitivity shape discounting?" in prompt  # the stored example was chosen
    assert "only what the evidence states" in body["systemInstruction"]["parts"][0]["text"]
    assert answer.examples == ("How does price sensitivity shape discounting?",)
    assert "price sensitivity shape discounting" in answer.enhancements["few_shot"]


@pytest.mark.parametrize(("setup", "why"), [
    ({"raw": "{malformed"}, "Gemini call failed"),
    ({"finish_reason": "SAFETY"}, "finish reason SAFETY"),
    ({"block_reason": "PROHIBITED_CONTENT"}, "refused the prompt"),
    ({"delay_s": 0.8}, "did not answer within 0.4 s"),
])
def test_gemini_failures_fall_back_to_an_extractive_answer_saying_why(
        demo_kg: KG, found: SearchResult, stub: tuple[str, StubState], tmp_path: Path,
        setup: dict[str, object], why: str) -> None:
    url, state = stub
    state.reset()
    state.stream = ["A partial answer [1] that is then withdrawn."]
    for k, v in setup.items():
        setattr(state, k, v)
    answer = answer_question(demo_kg, QUESTION, result=found, settings=keyed(tmp_path, url), timeout_ms=400)
    assert answer.kind == "extractive" and answer.uncited == 0 and answer.sentences
    assert any(why in w and w.endswith("extractive answer shown instead") for w in answer.warnings), answer.warnings
    assert "withdrawn" not in answer.answer  # nothing of a refused or broken answer is kept


def test_enhancements_are_each_reported(demo_kg: KG, found: SearchResult, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a missing model is then named at once, without importing torch
    settings = demo_kg.settings.with_(cross_encoder_model="/nonexistent/cross-encoder")
    enh = Enhancements(graph_rerank=False, cross_encoder=True, few_shot=False, multi_doc=True)
    answer = answer_question(demo_kg, QUESTION, result=found, settings=settings, enhancements=enh)
    assert answer.enhancements["graph_rerank"] == "off" and answer.enhancements["few_shot"] == "off"
    assert answer.enhancements["cross_encoder"].startswith("on, but unavailable")
    assert any(w.startswith("Cross-encoder /nonexistent/cross-encoder ") and "keep their order" in w
               for w in answer.warnings)
    assert answer.enhancements["multi_doc"].startswith("on: ") and "books" in answer.enhancements["multi_doc"]
    assert {t.stage for t in answer.timings} >= {"cross-encoder", "multi-doc", "evidence", "extract"}
    assert any(e.kind == "chunk" for e in answer.evidence)


def test_nonsense_gets_no_match_everywhere(demo_kg: KG) -> None:
    result = search(demo_kg, GIBBERISH)
    assert result.evidence_strength is not None and result.evidence_strength.score < THRESHOLD
    assert result.facts  # the retriever still ranks; the signal is applied by its callers
    gated = run_mode(demo_kg, "kg", GIBBERISH)
    assert gated.no_match and gated.facts == () and 1 <= len(gated.weak_matches) <= 5
    vector = run_mode(demo_kg, "vector", GIBBERISH)  # a tool mode is measured by its own vector searches
    assert vector.no_match and vector.evidence_strength is not None
    assert not run_mode(demo_kg, "vector", GIBBERISH, no_match=False).no_match  # evaluation ranks regardless
    answer = answer_question(demo_kg, GIBBERISH)
    assert answer.kind == "no_match" and answer.answer == NOTHING and answer.weak_matches and not answer.citations
    assert not run_mode(demo_kg, "kg", QUESTION).no_match
    both = run_mode(demo_kg, "comprehensive", GIBBERISH)  # the graph channel's measured strength is kept
    assert both.no_match and both.evidence_strength == search(demo_kg, GIBBERISH).evidence_strength


def test_a_labeling_pool_takes_every_mode_s_items_even_for_a_weak_query(demo_kg: KG) -> None:
    runs = run_systems(demo_kg, [GIBBERISH], 5, ["kg", "vector", "hybrid"], {})
    assert all(len(runs.runs[m][GIBBERISH]) == 5 for m in ("kg", "vector", "hybrid")), \
        {m: len(r[GIBBERISH]) for m, r in runs.runs.items()}  # judged as ranked, not silenced by the no-match gate


def test_agent_tools_say_no_match_and_answer(demo_data_dir: Path) -> None:
    settings = Settings.from_env(env={}, data_dir=demo_data_dir)
    md = run_async(search_knowledge_graph(GIBBERISH, settings=settings))
    assert md.startswith(NOTHING) and "Weak matches" in md
    md = run_async(answer_with_knowledge_graph(QUESTION, settings=settings))
    assert md.startswith("## Extractive answer") and "### Citations" in md
    assert re.search(r"\n\[\d+\] \((fact|chunk)\) ", md)
    with pytest.raises(ValidationError):
        run_async(answer_with_knowledge_graph("  ", settings=settings))


def test_cli_answer_json_and_text(demo_data_dir: Path) -> None:
    runner = CliRunner()
    answer_cli.register(cli_app)
    out = runner.invoke(cli_app, ["answer", QUESTION, "--json", "--data-dir", str(demo_data_dir)])
    assert out.exit_code == 0, out.output
    record = json.loads(out.output)
    assert record["kind"] == "extractive" and record["answer"] and record["citations"]
    assert {"n", "kind", "id", "text", "source"} <= record["citations"][0].keys()
    out = runner.invoke(cli_app, ["answer", GIBBERISH, "--json", "--data-dir", str(demo_data_dir)])
    assert json.loads(out.output)["kind"] == "no_match" and json.loads(out.output)["answer"] == NOTHING
    out = runner.invoke(cli_app, ["answer", QUESTION, "--enhance", "warp", "--data-dir", str(demo_data_dir)])
    assert out.exit_code == 2 and "unknown enhancement 'warp'" in out.output


def test_few_shot_examples_are_validated_chosen_and_survive_reingest(tmp_path: Path, embedder: Embedder) -> None:
    settings = Settings.from_env(env={}, data_dir=tmp_path / "kg")
    bundle = write_hostile_bundle(tmp_path / "bundle")
    ingest(settings, bundle, fmt="bundle", name="tiny", embedder=embedder, progress=False)
    manager = FewShotManager(settings.data_dir, "tiny")
    first = manager.add("  Who knows Mallory?  ", "Eve knows Mallory [1].", "MATCH (a)-[r]->(b) RETURN a")
    manager.add("What is churn?", "Customers who leave [1].")
    for bad in (("", "a"), ("q", " "), ("q" * 501, "a"), ("q", "a\x00")):
        with pytest.raises(ValidationError):
            manager.add(*bad)
    manager.update(first.id, "Who does Eve know?", "Mallory [1].", "MATCH (e:Entity) RETURN e")
    (bundle / "chunks.jsonl").write_text((bundle / "chunks.jsonl").read_text().replace("well", "very well"))
    report = ingest(settings, bundle, fmt="bundle", name="tiny", embedder=embedder, progress=False)
    assert not report.unchanged  # a new version replaced the old one...
    kept = FewShotManager(settings.data_dir, "tiny").examples()  # ...and the examples stayed with the name
    assert [(e.question, e.cypher) for e in kept] == [("Who does Eve know?", "MATCH (e:Entity) RETURN e"),
                                                      ("What is churn?", "")]
    kg = open_kg(settings, "tiny", embedder)
    vectors = embedding_cache(kg)
    kg.close()
    picked = manager.select("Whom does Eve know?", vectors, 2)
    assert picked[0][0].question == "Who does Eve know?" and picked[0][1] > 0.5
    assert [e.question for e, _ in manager.select("Whom does Eve know?", vectors, 2, with_cypher=True)] == [
        "Who does Eve know?"]
    manager.delete(first.id)
    assert [e.question for e in manager.examples()] == ["What is churn?"]
    assert not list((settings.data_dir / "fewshot").glob("*.partial"))  # written by atomic rename
