"""AppTest tier for the Rerank Inspector on the demo graph (Kuzu + Milvus Lite + MiniLM): pools, what-if
knobs that re-rank without retrieving, labels read back into the grid, metrics from them."""

from __future__ import annotations

import io
import re
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from components.rerank_view import LabelChanges, LabelTarget, label_changes, qrels_files, runs_zip
from retrieval.evaluation.labels import LabelStore
from retrieval.evaluation.trec import parse_qrels, parse_queries
from retrieval.graph import catalog
from tests.app.conftest import APP
from tests.app.grading import grader_data, scores, send_grades

pytestmark = pytest.mark.integration
TIMEOUT = 120
PAGE = "pages/rerank.py"
QUERY = "How does brand equity support premium pricing?"  # not used by the other app tests
TRACE = re.compile(r"retrievals: (\d+) · re-ranks: (\d+)")


def open_inspector(**params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page(PAGE)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    deadline = time.monotonic() + 30
    while any("still loading" in w.value for w in at.warning):  # the cross-encoder probe runs in a thread
        assert time.monotonic() < deadline, "the cross-encoder probe never finished"
        time.sleep(0.2)
        at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def trace(at: AppTest) -> tuple[int, int]:
    found = next((TRACE.search(c.value) for c in at.caption if TRACE.search(c.value)), None)
    assert found is not None, [c.value for c in at.caption]
    return int(found.group(1)), int(found.group(2))


def grid(at: AppTest) -> pd.DataFrame:
    assert len(at.data_editor) == 1, "exactly one labeling grid"
    return at.data_editor[0].value


def texts(at: AppTest) -> str:
    """Markdown, captions and warnings with Markdown escapes removed (data text is shown literally)."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [w.value for w in at.warning]
    parts += [i.value for i in at.info]  # what this configuration leaves out is said once, in one info box
    return re.sub(r"\\(.)", r"\1", "\n".join(parts))


@pytest.fixture
def store(app_env: Path) -> Iterator[LabelStore]:
    """The app's label store; labels of QUERY are removed before and after (the data dir is shared)."""
    labels = LabelStore.in_data_dir(app_env)

    def wipe() -> None:
        for lb in labels.get_labels(QUERY):
            labels.delete_label(lb.query_text, lb.item_id, lb.graph_version)

    wipe()
    yield labels
    wipe()
    labels.close()


def test_url_query_shows_pool_scores_ranks_chart_and_visible_degradations(store: LabelStore) -> None:
    at = open_inspector(q=QUERY)
    assert at.text_input(key="q").value == QUERY
    assert {s.key for s in at.slider} >= {"alpha", "lambda", "tw"}
    assert at.slider(key="tw").disabled, "text_weight only applies to the chunks pool"
    assert trace(at)[0] == 1
    frame = grid(at)
    assert len(frame) >= 5
    assert {"grade", "note", "rank:graph", "move:graph", "rank:mmr", "similarity", "pagerank",
            "graph_alpha_term", "graph_beta_term", "graph_score", "mmr_score"} <= set(frame.columns)
    assert frame["ppr"].notna().any() and frame["path_semantic"].notna().any()
    assert sorted(frame["rank:graph"]) == list(range(1, len(frame) + 1)), "graph ranks are a permutation"
    assert frame["grade"].isna().all()
    assert at.get("arrow_vega_lite_chart") or at.get("vega_lite_chart"), "the bump chart is missing"
    shown = texts(at)
    assert "is not available offline: it is not in the local Hugging Face cache; results keep their order. It is " \
        "left out of the ranks" in shown
    assert "GEMINI_API_KEY is not set" in shown
    assert "This query** · 0 scored queries" in shown
    listed = grader_data(at, "grade-grid-")["rows"]
    assert [r["key"] for r in listed] == list(frame["id"]), "the grading list shows the pool in retrieval order"
    assert {"graph α/β", "MMR λ", "similarity", "PPR"} <= set(scores(listed[0]))


def test_alpha_and_lambda_rerank_the_same_pool_without_retrieving(store: LabelStore) -> None:
    at = open_inspector(q=QUERY)
    retrievals, reranks = trace(at)
    before = grid(at)
    at.slider(key="alpha").set_value(0.0).run()
    after = grid(at)
    assert trace(at) == (retrievals, reranks + 1), "a knob must re-rank, not retrieve"
    assert list(after["id"]) == list(before["id"]), "the grid keeps the retrieval order"
    assert (after["graph_alpha_term"] == 0).all(), "α = 0 leaves no similarity term"
    assert list(after["rank:graph"]) != list(before["rank:graph"])
    assert any("= **1.00**" in c.value for c in at.caption), "β follows α"
    at.slider(key="lambda").set_value(1.0).run()
    relevance_only = grid(at).sort_values("rank:mmr")  # λ = 1: no redundancy term, a sort by relevance
    assert list(relevance_only["mmr_score"]) == sorted(relevance_only["mmr_score"], reverse=True)
    at.slider(key="lambda").set_value(0.0).run()
    assert list(grid(at).sort_values("rank:mmr")["id"]) != list(relevance_only["id"]), "λ = 0 must diversify"
    assert trace(at) == (retrievals, reranks + 3)


def test_chunk_pool_text_weight_refuses_stored_parts_in_place(store: LabelStore) -> None:
    at = open_inspector(q=QUERY, pool="chunks")
    assert not at.slider(key="tw").disabled
    retrievals, _ = trace(at)
    frame = grid(at)
    assert {"bm25", "bm25_norm", "vector", "vector_norm", "hybrid", "rank:none"} <= set(frame.columns)
    at.slider(key="tw").set_value(1.0).run()
    text_only = grid(at).sort_values("rank:none")
    assert list(text_only["bm25_norm"]) == sorted(text_only["bm25_norm"], reverse=True)
    assert (text_only["hybrid"] - text_only["bm25_norm"]).abs().max() < 1e-9
    at.slider(key="tw").set_value(0.0).run()
    vector_only = grid(at).sort_values("rank:none")
    assert list(vector_only["vector_norm"]) == sorted(vector_only["vector_norm"], reverse=True)
    assert trace(at)[0] == retrievals, "re-fusing must not retrieve again"


def test_entity_pool_has_similarity_and_ppr(store: LabelStore) -> None:
    frame = grid(open_inspector(q=QUERY, pool="entities"))
    assert frame["id"].str.startswith("entity:").all()
    assert frame["similarity"].notna().all() and (frame["ppr"] > 0).any()


def test_stored_labels_fill_the_grid_and_score_every_reranker(store: LabelStore, app_env: Path) -> None:
    at = open_inspector(q=QUERY)
    ids = list(grid(at)["id"])
    version = catalog.resolve(app_env, "demo").version
    store.put_label(QUERY, ids[0], 3, graph_version=version, annotator="t", note="direct answer")
    store.put_label(QUERY, ids[1], 0, graph_version=version, annotator="t")
    store.put_label(QUERY, ids[-1], 2, graph_version=version, annotator="t")
    at.run()
    assert not at.exception
    frame = grid(at)
    assert list(frame["grade"].iloc[[0, 1, -1]]) == [3, 0, 2]
    assert frame["note"].iloc[0] == "direct answer"
    assert f"3 of {len(frame)} graded" in texts(at)
    assert "This query** · 1 scored query" in texts(at)
    headline = next(c.value for c in at.caption if c.value.startswith("nDCG@10:"))
    assert re.match(r"nDCG@10: none \d\.\d{3} · graph α/β \d\.\d{3} \([+-]\d\.\d{3}\) · MMR λ", headline)
    metric_tables = [m.value for m in at.dataframe if "nDCG@10" in m.value.columns]
    assert metric_tables and set(metric_tables[0]["reranker"]) == {"none", "graph α/β", "MMR λ"}
    assert metric_tables[0]["MRR"].between(0, 1).all()
    assert any("nDCG@10 per query" in c.value for c in at.caption)
    intervals = next(d.value for d in at.dataframe if "unjudged@10" in d.value.columns)
    assert set(intervals["reranker"]) == {"none", "graph α/β", "MMR λ"}
    assert intervals["nDCG@10"].str.fullmatch(r"\[\d\.\d{3}, \d\.\d{3}\]").all()
    assert list(intervals.columns[:2]) == ["reranker", "unjudged@10"]
    assert intervals["unjudged@10"].str.fullmatch(r"\d+ of 10").all()
    paired = next(d.value for d in at.dataframe if "p < 0.05" in d.value.columns)  # graph vs none by default
    assert list(paired["measure"]) == ["nDCG@10", "P@10", "R@10", "MRR"] and (paired["p"] == 1.0).all()  # 1 query
    # a grade given in the list is stored at once and counted by this run's metrics
    listed = grader_data(at, "grade-grid-")
    send_grades(at, listed["key"], [(1, ids[2], 1)])
    at.run()
    assert not at.exception and f"4 of {len(frame)} graded" in texts(at)
    assert [(lb.grade, lb.annotator) for lb in store.get_labels(QUERY) if lb.item_id == ids[2]] == [(1, "")]


def test_no_query_offers_the_demo_questions(app_env: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page(PAGE).run()
    assert not at.exception
    assert "Rerank Inspector" in texts(at)
    assert any(b.key and b.key.startswith("example-") for b in at.button)
    assert not at.data_editor


# --- the grid's save logic and the TREC files, without a browser ------------------------------------------


def target(tmp_path: Path, base: dict[str, tuple[int | None, str]] | None = None) -> LabelTarget:
    return LabelTarget(LabelStore.in_data_dir(tmp_path), "q  one", "v1", ("a", "b", "c"), base or {})


def test_label_changes_write_only_rows_touched_since_the_last_save(tmp_path: Path) -> None:
    t = target(tmp_path, {"b": (2, "kept note"), "c": (1, "")})
    edited = {0: {"grade": 3}, "1": {"note": "new note"}, 2: {"grade": None}}
    changes = label_changes(edited, {}, t, "ana")
    assert [(lb.item_id, lb.grade, lb.note, lb.annotator, lb.query_text) for lb in changes.put] == [
        ("a", 3, "", "ana", "q one"), ("b", 2, "new note", "ana", "q one")
    ]
    assert changes.delete == ["c"] and not changes.problems
    again = label_changes(edited, {0: {"grade": 3}, 1: {"note": "new note"}, 2: {"grade": None}}, t, "ana")
    assert again == LabelChanges([], [], []), "a row already saved is not written again"


def test_label_changes_report_a_note_without_grade_and_ignore_unknown_rows(tmp_path: Path) -> None:
    changes = label_changes({0: {"note": "why"}, 7: {"grade": 1}}, {}, target(tmp_path), "")
    assert changes.put == [] and changes.delete == []
    assert changes.problems == ["row 1: a note is saved with a grade; give the row a grade 0–3"]


def test_qrels_and_runs_files_round_trip(tmp_path: Path) -> None:
    store = LabelStore.in_data_dir(tmp_path)
    store.put_label("What builds brand trust?", "path:1", 3, graph_version="v1")
    store.put_label("What builds brand trust?", "rel:2", 0, graph_version="v1")
    qrels, queries = qrels_files(store.all_labels())
    texts_by_id = parse_queries(queries, "queries.tsv")
    assert sorted(parse_qrels(qrels, "qrels.txt", texts_by_id)) == [
        ("What builds brand trust?", "path:1", 3), ("What builds brand trust?", "rel:2", 0)
    ]
    with zipfile.ZipFile(io.BytesIO(runs_zip({"none": {"What builds brand trust?": ["rel:2", "path:1"]}}))) as zf:
        assert zf.namelist() == ["run.none.txt"]
        lines = zf.read("run.none.txt").decode().splitlines()
    assert [line.split()[2:4] for line in lines] == [["rel:2", "1"], ["path:1", "2"]]
