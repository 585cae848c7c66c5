"""AppTest: the Labeling page on the demo graph: pool a set from the page, the blind queue with progress and resume,
grades stored under the sidebar name, agreement with adjudication, qrels export; the Data page's import box."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from components.labeling import qrels_text
from retrieval.evaluation.labels import ADJUDICATED, LabelStore
from retrieval.evaluation.querysets import get_query_set, import_queries
from retrieval.evaluation.trec import parse_qrels, parse_queries
from retrieval.graph import catalog
from tests.app.conftest import APP
from tests.app.grading import grader_data, scores, send_grades, tags
from tests.app.test_pages import texts

pytestmark = pytest.mark.integration
QUESTIONS = ("How do switching costs protect a subscription business?", "What makes a referral programme work?")


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def labeling(name: str, annotator: str) -> AppTest:
    """A new session on the Labeling page, set `name` chosen, with `annotator` typed into the sidebar."""
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["annotator-input"] = annotator
    at.query_params["set"] = name
    return ok(at.switch_page("pages/labels.py").run())


def test_pool_queue_grades_progress_resume_agreement_and_export(app_env: Path) -> None:
    store = LabelStore.in_data_dir(app_env)
    version = catalog.resolve(app_env, "demo").version
    name = f"page-{uuid.uuid4().hex[:8]}"
    import_queries(store, "".join(f"p{i}\t{q}\n" for i, q in enumerate(QUESTIONS, 1)), name)

    at = labeling(name, "ana")
    assert "has no pool on graph version" in texts(at) and "Pool this set first" in texts(at)
    at.multiselect(key="pool-modes").set_value(["vector", "kg"])
    at.multiselect(key="pool-rerankers").set_value(["none"])
    at.number_input(key="pool-depth").set_value(3)
    ok(at.button(key="pool-go").click().run())
    assert "over 2 queries at depth 3" in texts(at)

    queue = grader_data(at, "queue-")
    rows = queue["rows"]
    assert [r["head"] for r in rows if r["head"]] == [f"p{i} · {q}" for i, q in enumerate(QUESTIONS, 1)]
    assert 4 <= len(rows) <= 2 * 3 * 3 and queue["start"] == 0 and queue["annotator"] == "ana"
    assert all(not r["scores"] for r in rows), "blind: no system names or ranks"
    send_grades(at, queue["key"], [(1, rows[0]["key"], 3), (2, rows[1]["key"], 0)])
    ok(at.run())
    progress = [p.proto.text for p in at.get("progress")]
    assert progress == [f"**2 of {len(rows)}** pooled items graded by ana · 2 queries"]
    assert [r["grade"] for r in grader_data(at, "queue-")["rows"][:3]] == [3, 0, None]
    assert {(lb.item_id, lb.grade) for lb in store.all_labels(version, annotator="ana")} == {
        (rows[0]["key"].split("|")[1], 3), (rows[1]["key"].split("|")[1], 0)}

    ok(at.toggle(key="reveal").set_value(True).run())
    revealed = grader_data(at, "queue-")["rows"]
    assert [r["key"] for r in revealed] == [r["key"] for r in rows], "revealing never reorders"
    assert all(set(scores(r)) <= {"vector", "kg", "rerank:none"} and scores(r) for r in revealed)

    again = labeling(name, "ana")  # a new session resumes where ana stopped
    assert grader_data(again, "queue-")["start"] == 2
    ben = labeling(name, "ben")  # ben's queue: his own order, and nobody else's grades
    assert all(r["grade"] is None for r in grader_data(ben, "queue-")["rows"])

    store.put_label(*rows_target(rows[0]), 1, graph_version=version, annotator="ben")
    store.put_label(*rows_target(rows[1]), 0, graph_version=version, annotator="ben")
    ok(at.run())
    assert [m.value for m in at.metric][:2] == ["2", "2"]  # annotators, items graded by both
    adjudicate = grader_data(at, "adjudicate-")
    assert len(adjudicate["rows"]) == 1 and scores(adjudicate["rows"][0]) == {"ana": "3", "ben": "1"}
    assert tags(adjudicate["rows"][0]) == ["tie: unresolved"]
    send_grades(at, adjudicate["key"], [(1, adjudicate["rows"][0]["key"], 2)])
    ok(at.run())
    assert [(lb.item_id, lb.grade) for lb in store.all_labels(version, annotator=ADJUDICATED)] == [
        (rows[0]["key"].split("|")[1], 2)]
    assert tags(grader_data(at, "adjudicate-")["rows"][0]) == ["rule gives 2"]

    qset = get_query_set(store, name)
    set_texts = set(qset.texts().values())
    labels = [lb for lb in store.all_labels(version) if lb.query_text in set_texts]
    qrels, queries, n = qrels_text(labels, qset, include_ties=False)
    assert n == 2 and parse_queries(queries, "q")["p1"] == QUESTIONS[0]
    assert sorted(g for _, _, g in parse_qrels(qrels, "qrels", parse_queries(queries, "q"))) == [0, 2]  # decided
    only_ben, _, _ = qrels_text([lb for lb in labels if lb.annotator == "ben"], qset, include_ties=False)
    assert sorted(line.split()[-1] for line in only_ben.splitlines()) == ["0", "1"]
    assert {b.label for b in at.get("download_button")} >= {"qrels.txt", "queries.tsv"}

    # a reserved name turns grading off: the list is read-only and a grade sent anyway is not stored
    off = labeling(name, "adjudicated")
    queue = grader_data(off, "queue-")
    assert queue["readonly"] and any("Grading is off" in w.value for w in off.warning)
    send_grades(off, queue["key"], [(1, queue["rows"][2]["key"], 1)])
    ok(off.run())
    assert any("Grades are not saved" in e.value for e in off.error)
    assert len(store.all_labels(version, annotator=ADJUDICATED)) == 1


def rows_target(row: dict[str, object]) -> tuple[str, str]:
    """(query text, item id) of a queue row, from its key `query_id|item_id` and the set's questions."""
    qid, item = str(row["key"]).split("|", 1)
    return QUESTIONS[int(qid[1:]) - 1], item
