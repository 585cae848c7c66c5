"""AppTest: the Search page's Answer tab with and without a Gemini key (the key on the local stand-in), the
no-match notice, the Query page (examples, writes refused, history, natural language to Cypher) and the
few-shot editor on the Data page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from retrieval.answer.fewshot import FewShotManager
from retrieval.search.verbalize import NOTHING
from tests.app.grading import grader_data, tags
from tests.app.graphs import DEMO_QUESTION, graph_payloads
from tests.app.test_pages import run_page
from tests.gemini_stub import StubState, gemini_stub

pytestmark = pytest.mark.integration
DRAFT = {"cypher": "MATCH (e:Entity) WHERE e.type = $type RETURN e.name AS name ORDER BY name LIMIT 5",
         "params": [{"name": "type", "value": "metric"}], "explanation": "Metrics by name."}


@pytest.fixture
def keyed(app_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StubState]:
    """The app with GEMINI_API_KEY set and Gemini on the local stand-in."""
    with gemini_stub() as (url, state):
        monkeypatch.setenv("GEMINI_API_KEY", "test-key")
        monkeypatch.setenv("KG_GEMINI_BASE_URL", url)
        yield state


def click(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def answer_html(at: AppTest) -> str:
    return next(h.proto.body for h in at.get("html") if "kg-answer" in h.proto.body)


def test_answer_tab_without_a_key_offers_a_labelled_extractive_answer(app_env: Path) -> None:
    at = run_page(q=DEMO_QUESTION)
    assert [t.label for t in at.tabs][:2] == ["Facts", "Answer"]
    assert any("no GEMINI_API_KEY" in i.value for i in at.info)
    assert {t.key for t in at.toggle} == {f"answer-switch-{n}" for n in
                                          ("graph_rerank", "cross_encoder", "few_shot", "multi_doc")}
    click(at, "Show an extractive answer")
    html = answer_html(at)
    assert 'class="kg-cite" href="#ev-' in html and 'id="ev-' in html and 'class="kg-uncited"' not in html
    assert any(":orange-badge[:material/format_quote: extractive]" in m.value for m in at.markdown)
    assert any(c.value.startswith("Citation check:") and "every one cites evidence" in c.value for c in at.caption)


def test_answer_tab_with_a_key_streams_gemini_and_marks_uncited_sentences(keyed: StubState) -> None:
    keyed.text = "not json"  # the search's decomposition call fails over to offline (its own warning)
    keyed.stream = ["Brand awareness feeds ", "conversion [1].", " It is a hunch."]
    at = run_page(q=DEMO_QUESTION)
    assert not any("no GEMINI_API_KEY" in i.value for i in at.info)
    click(at, "Write an answer with Gemini")
    assert any(":streamGenerateContent" in r["path"] for r in keyed.requests)
    html = answer_html(at)
    assert "Brand awareness feeds conversion." in html and 'href="#ev-' in html
    assert '<span class="kg-uncited" title="this sentence cites no evidence">It is a hunch.</span>' in html
    assert any(":blue-badge[:material/auto_awesome: generated]" in m.value for m in at.markdown)
    assert any("1 cite nothing (marked)" in c.value for c in at.caption)
    keyed.finish_reason = "SAFETY"  # a refusal on a second press: extractive, and the page says why
    click(at, "Write an answer with Gemini")
    assert any("finish reason SAFETY" in w.value for w in at.warning)
    assert any("extractive]" in m.value for m in at.markdown)


def test_search_page_says_no_match_and_lists_weak_matches(app_env: Path) -> None:
    at = run_page(q="florp glimbus traxon vell?")
    assert [i.value for i in at.info][0] == NOTHING
    assert any(c.value.startswith("Evidence strength 0.") for c in at.caption)
    assert any(m.value == "##### Weak matches" for m in at.markdown) and not at.tabs
    assert grader_data(at, "weak-")["rows"], "the weak matches are listed, gradable"


def test_compare_says_no_match_on_each_side_and_marks_weak_matches(app_env: Path) -> None:
    at = run_page(q="florp glimbus traxon vell?", vs="vector")
    assert [i.value for i in at.info].count(NOTHING) == 2, "each compared mode says it found no evidence"
    assert sum(c.value.startswith("Evidence strength 0.") for c in at.caption) == 2
    rows = grader_data(at, "compare-list-a")["rows"] + grader_data(at, "compare-list-b")["rows"]
    assert rows and all("weak match" in tags(r) for r in rows), rows[:1]


def test_query_page_runs_examples_refuses_writes_and_keeps_history(app_env: Path) -> None:
    at = run_page("pages/query.py")
    assert any("needs Gemini: GEMINI_API_KEY is not set" in c.value for c in at.caption)
    assert any("stops after 10 s and shows at most 1,000 rows" in c.value for c in at.caption)
    titles = at.selectbox(key="console-example").options
    neighbourhood = next(i for i, t in enumerate(titles) if t.startswith("Neighbourhood of"))
    at.selectbox(key="console-example").select_index(neighbourhood).run()
    assert json.loads(at.text_area(key="console-params").value) == {"name": "loyalty programme"}
    click(at, "Run")
    assert len(at.dataframe) == 1 and graph_payloads(at), "rows and their graph"
    assert graph_payloads(at)[0]["key"] == "kg-query" and graph_payloads(at)[0]["features"]["expand"]
    assert any(m.value.startswith("**14 rows**") for m in at.markdown)
    at.text_area(key="console-query").set_value("MATCH (e:Entity) DETACH DELETE e")
    click(at, "Run")
    assert "Kuzu refused the query" in at.error[0].value
    at.text_area(key="console-query").set_value("RETURN $x AS x")
    at.text_area(key="console-params").set_value('{"x": 1')
    click(at, "Run")
    assert "parameters are not valid JSON" in at.error[0].value
    history = [m.value for m in at.markdown if "·" in m.value and "`" in m.value]
    assert len(history) == 3 and "refused" in history[1] and "14 rows" in history[2]
    next(b for b in at.button if b.key == "console-edit-2").click().run()  # back into the editor
    assert at.text_area(key="console-query").value.startswith("MATCH (a:Entity {name: $name})")
    assert json.loads(at.text_area(key="console-params").value) == {"name": "loyalty programme"}
    next(b for b in at.button if b.key == "console-again-1").click().run()  # the refused write, run again
    assert "Kuzu refused the query" in at.error[0].value and len(at.session_state["console-history"]) == 4


def test_query_page_drafts_cypher_with_gemini_and_checks_it_before_running(keyed: StubState) -> None:
    keyed.text = json.dumps(DRAFT)
    at = run_page("pages/query.py")
    at.text_input(key="console-nl").set_value("Which metrics are there?").run()
    click(at, "Draft Cypher")
    assert at.text_area(key="console-query").value == DRAFT["cypher"]
    assert json.loads(at.text_area(key="console-params").value) == {"type": "metric"}
    assert any("checked with the engine's plan (not run)" in s.value for s in at.success)
    prompt = keyed.requests[-1]["body"]["contents"][0]["parts"][0]["text"]
    assert "Node table Entity(" in prompt and "Question: Which metrics are there?" in prompt and "metric" in prompt
    click(at, "Run")
    assert len(at.dataframe[0].value) == 5
    keyed.text = json.dumps({**DRAFT, "cypher": "MATCH (e:Entity) SET e.name = 'x'"})
    click(at, "Draft Cypher")
    assert any("does not pass the engine's check" in w.value and "Kuzu refused" in w.value for w in at.warning)


def test_data_page_edits_few_shot_examples(app_env: Path) -> None:
    at = run_page("pages/data.py")
    form_inputs = [t for t in at.text_input if t.label == "Question"]
    form_inputs[0].set_value("How is churn measured?")
    next(t for t in at.text_area if t.label == "Answer").set_value("By the share of customers who leave [1].")
    click(at, "Save")
    stored = FewShotManager(app_env, "demo").examples()
    assert [e.question for e in stored][-1] == "How is churn measured?"
    assert at.dataframe[-1].value["question"].tolist()[-1] == "How is churn measured?"
    next(t for t in at.text_input if t.label == "Question").set_value("")  # a new empty example is refused
    click(at, "Save")
    assert any("question must not be empty" in e.value for e in at.error)
    at.selectbox(key="fewshot-pick-demo").select_index(len(stored)).run()
    click(at, "Delete")
    assert [e.question for e in FewShotManager(app_env, "demo").examples()] == [e.question for e in stored[:-1]]
