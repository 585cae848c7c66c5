"""Answer parts without a graph: sentence split, citation check, evidence numbering, prompt, the no-match
threshold calibration, console parameters and value conversion, and Gemini streaming through the stand-in."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterator

import pytest

from retrieval.answer.synthesis import build_prompt, check_citations, number_evidence, split_sentences, to_markdown
from retrieval.config import Settings
from retrieval.errors import ValidationError
from retrieval.evaluation.calibration import Labelled, calibrate, quality
from retrieval.explore.console import check_params, parse_params
from retrieval.llm import LLMError, gemini_stream
from retrieval.models import Answer, EvidenceStrength, SearchResult, SourceMetadata, VerbalizedFact
from retrieval.search.nomatch import gate
from retrieval.search.verbalize import NOTHING
from retrieval.stores.base import VectorHit
from retrieval.stores.console import Collector, json_safe
from tests.gemini_stub import StubState, gemini_stub


def fact(i: int, chunks: tuple[str, ...] = (), book: str = "") -> VerbalizedFact:
    sources = tuple(SourceMetadata(source=c, original_document=book, chunk_id=c) for c in chunks)
    return VerbalizedFact(id=f"f{i}", type="local", text=f"fact {i}", chunk_ids=chunks, sources=sources)


def test_sentences_keep_trailing_citations_and_abbreviations() -> None:
    text = ("E. Jerome McCarthy named the four Ps, e.g. price [1]. Loss aversion lowers churn. [2][3]\n"
            "It is measured by cohorts [4, 2].")
    assert split_sentences(text) == [
        "E. Jerome McCarthy named the four Ps, e.g. price [1].",
        "Loss aversion lowers churn. [2][3]",
        "It is measured by cohorts [4, 2].",
    ]


def test_citation_check_marks_uncited_sentences_and_numbers_that_cite_nothing() -> None:
    sentences = check_citations("Price matters [1]. Nobody knows why. Brands grow [2][9]. Reviews help [0].", 3)
    assert [(s.text, s.citations, s.invalid) for s in sentences] == [
        ("Price matters.", (1,), ()),
        ("Nobody knows why.", (), ()),
        ("Brands grow.", (2,), (9,)),
        ("Reviews help.", (), (0,)),
    ]
    assert [s.cited for s in sentences] == [True, False, True, False]


def test_evidence_numbers_facts_then_their_chunks_once() -> None:
    facts = [fact(1, ("c1", "c2"), "Pricing"), fact(2, ("c2", "c3"))]
    chunks = {c: {"id": c, "text": f"text of {c}", "original_document": "Pricing", "chapter": "One"}
              for c in ("c1", "c2")}  # c3 is not in the store: skipped
    extra = [VerbalizedFact(id="chunk:c9", type="document", text="t", chunk_ids=("c9",))]
    chunks["c9"] = {"id": "c9", "text": "nine", "original_document": "Growth"}
    ev = number_evidence(facts, chunks, extra)
    assert [(e.n, e.kind, e.id) for e in ev] == [(1, "fact", "f1"), (2, "fact", "f2"), (3, "chunk", "c9"),
                                                 (4, "chunk", "c1"), (5, "chunk", "c2")]
    assert ev[3].source == "Pricing — One" and ev[0].book == "Pricing"
    prompt = build_prompt("Why?", ev, by_book=True)
    assert "Question: Why?" in prompt and "Book: Growth" in prompt
    assert "[4] (passage, Pricing — One) text of c1" in prompt


def test_no_match_answer_markdown_lists_weak_matches() -> None:
    answer = Answer(query="q", kind="no_match", answer=NOTHING, weak_matches=(fact(1),),
                    evidence_strength=EvidenceStrength(score=0.2, threshold=0.5))
    md = to_markdown(answer)
    assert md.startswith(NOTHING) and "0.20, below the threshold 0.50" in md and "1. fact 1" in md


def test_gate_moves_facts_to_weak_matches_only_below_an_applied_threshold() -> None:
    facts = tuple(fact(i) for i in range(8))
    weak = SearchResult(query="q", facts=facts, evidence_strength=EvidenceStrength(score=0.3, threshold=0.5))
    gated = gate(weak)
    assert gated.no_match and gated.facts == () and [f.id for f in gated.weak_matches] == [f"f{i}" for i in range(5)]
    strong = weak.model_copy(update={"evidence_strength": EvidenceStrength(score=0.6, threshold=0.5)})
    assert not gate(strong).no_match and len(gate(strong).facts) == 8
    other_model = weak.model_copy(update={"evidence_strength": EvidenceStrength(score=0.3, threshold=0.5,
                                                                                applied=False)})
    assert not gate(other_model).no_match  # a threshold calibrated for MiniLM says nothing about hash vectors


def test_strength_is_the_mean_best_cosine_of_the_three_collections() -> None:
    from retrieval.search.nomatch import strength

    hit = lambda s: [VectorHit("x", s, {}), VectorHit("y", s - 0.1, {})]  # noqa: E731
    found = strength(hit(0.6), hit(0.3), hit(0.0), "all-MiniLM-L6-v2")
    assert math.isclose(found.score, 0.3) and found.signals == pytest.approx({"relation": 0.6, "chunk": 0.3,
                                                                              "entity": 0.0})
    # an empty collection (a graph without text has no chunks) is left out of the mean, not counted as a miss
    no_text = strength(hit(0.6), [], hit(0.4), "all-MiniLM-L6-v2")
    assert math.isclose(no_text.score, 0.5) and set(no_text.signals) == {"relation", "entity"}
    assert found.applied and not strength([], [], [], "hash-384").applied


def test_calibration_picks_the_best_f1_that_silences_few_answerable_questions() -> None:
    rows = [Labelled("g", "answerable", f"a{i}", s) for i, s in enumerate([0.7, 0.65, 0.6, 0.55, 0.3])]
    rows += [Labelled("g", "gibberish", f"u{i}", s) for i, s in enumerate([0.1, 0.2, 0.25, 0.58])]
    q = quality(rows, 0.5)
    assert (q.precision, q.recall, q.false_fires) == (0.75, 0.75, 1)
    best = calibrate(rows, max_false_fires=0.0)  # no answerable question may be silenced: stay below 0.3
    assert best.false_fires == 0 and best.threshold <= 0.3 and best.recall == 0.75


def test_console_params_are_a_json_object_of_identifiers() -> None:
    assert parse_params("") == {} and parse_params('{"name": "x", "n": [1, 2]}') == {"name": "x", "n": [1, 2]}
    for bad, why in (("[1]", "JSON object"), ("{bad", "not valid JSON"), ('{"a b": 1}', "identifier"),
                     ('{"x}) MATCH (n) DETACH DELETE n //": 1}', "identifier")):
        with pytest.raises(ValidationError, match=why):
            parse_params(bad)
    with pytest.raises(ValidationError):
        check_params({"1x": 1})


def test_values_become_json_and_nodes_become_records() -> None:
    value = {"when": dt.date(2024, 1, 2), "nan": float("nan"), "raw": b"\x01", "nested": [dt.timedelta(hours=1)]}
    assert json.dumps(json_safe(value)) == '{"when": "2024-01-02", "nan": "nan", "raw": "01", "nested": ["1:00:00"]}'
    c = Collector()
    c.node(1, "Entity", {"id": "e1", "name": "<b>Eve</b>", "type": "person", "_id": {"table": 0}})
    cell = c.edge(7, 1, 2, "RELATES", {"id": "r1", "relation_type": "KNOWS", "weight": 2})
    assert cell == {"type": "RELATES", "properties": {"id": "r1", "relation_type": "KNOWS", "weight": 2}}
    g = c.subgraph()
    assert [(n.id, n.name, n.type) for n in g.nodes] == [("e1", "<b>Eve</b>", "person"),
                                                         ("node:2", "node 2", "(not in the result)")]
    assert [(e.source_id, e.target_id, e.relation_type, e.weight) for e in g.edges] == [("e1", "node:2", "KNOWS", 2.0)]


@pytest.fixture(scope="module")
def stub() -> Iterator[tuple[Settings, StubState]]:
    """One stand-in for this module's streaming tests (each resets it)."""
    with gemini_stub() as (url, state):
        yield Settings.from_env(env={}, gemini_api_key="test-key", gemini_base_url=url), state


def test_stream_yields_chunks_through_the_real_client(stub: tuple[Settings, StubState]) -> None:
    settings, state = stub
    state.reset()
    state.stream = ["Price ", "elasticity [1].", " Brands [2]."]
    assert list(gemini_stream(settings, "q")) == ["Price ", "elasticity [1].", " Brands [2]."]
    assert ":streamGenerateContent" in state.requests[0]["path"] and state.requests[0]["key"] == "test-key"


@pytest.mark.parametrize(("setup", "why"), [
    ({"finish_reason": "SAFETY"}, "finish reason SAFETY"),
    ({"block_reason": "SAFETY"}, "refused the prompt"),
    ({"raw": "{not json"}, "Gemini call failed"),
    ({"stream": [""]}, "empty answer"),
    ({"status": 429}, "Gemini call failed"),
    ({"delay_s": 0.6}, "did not answer within 0.3 s"),
])
def test_stream_failures_raise_with_the_reason(stub: tuple[Settings, StubState], setup: dict[str, object],
                                               why: str) -> None:
    settings, state = stub
    state.reset()
    for k, v in setup.items():
        setattr(state, k, v)
    with pytest.raises(LLMError, match=why):
        list(gemini_stream(settings, "q", timeout_ms=300))
