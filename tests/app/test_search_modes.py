"""Search page modes and the Compare view (AppTest on the real demo graph); the comparison on hand-built records."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from components.compare_view import compare
from components.search_form import MODE_LABELS
from retrieval.config import Settings
from retrieval.evaluation.labels import LabelStore
from retrieval.graph import catalog
from retrieval.graph.runtime import KG
from retrieval.models import SearchParams, SearchResult, SourceMetadata, VerbalizedFact
from retrieval.search.modes import MODES, cited_chunks, jaccard, run_mode
from tests.app.conftest import APP
from tests.app.grading import grader_data, scores, send_grades, tags
from tests.app.graphs import DEMO_QUESTION, HOSTILE_GRAPH, HOSTILE_QUERY, IMG, SCRIPT, graph_payloads

TIMEOUT = 120


def channel(row: dict[str, object]) -> str:
    """A row's document/graph mark (a passage's type is the same word, so it is badged once)."""
    return [t for t in tags(row) if t in ("document", "graph")][-1]


def run_page(**query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [(e.value, e.stack_trace) for e in at.exception]
    return at


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def demo_kg() -> KG:
    """The KG the page opened (st.cache_resource is process-wide), so the test can run the same modes directly."""
    import app_state

    cfg = Settings.from_env()
    return app_state.open_kg(cfg, catalog.resolve(cfg.data_dir, "demo"))


def fact(fid: str, *chunks: str, channel: str = "document") -> VerbalizedFact:
    src = tuple(SourceMetadata(source=c, original_document="Book", chapter="Ch", chunk_id=c) for c in chunks)
    return VerbalizedFact(id=fid, type="document" if channel == "document" else "local", text=fid,
                          chunk_ids=chunks, sources=src, channel=channel)  # type: ignore[arg-type]


def test_every_retrieval_mode_has_a_label_that_is_its_url_value() -> None:
    assert set(MODE_LABELS) == set(MODES)
    assert len(set(MODE_LABELS.values())) == len(MODES)
    assert all(label.replace("-", "").isalnum() for label in MODE_LABELS.values())  # clean in a URL


def test_compare_counts_shared_and_unique_items_by_id_or_cited_chunk() -> None:
    a = SearchResult(query="q", mode="kg", facts=(fact("p1", "c1", channel="graph"), fact("p2", "c9", channel="graph"),
                                                  fact("p3", channel="graph")))
    b = SearchResult(query="q", mode="vector", facts=(fact("chunk:c1", "c1"), fact("chunk:c2", "c2"), fact("p3")))
    cmp = compare(a, b)
    assert cmp.jaccard == pytest.approx(1 / 3)  # {c1, c9} vs {c1, c2}
    assert cmp.shared_chunks == {"c1"} and cmp.only_a_chunks == {"c9"} and cmp.only_b_chunks == {"c2"}
    assert cmp.unique_a == {"p2"}  # p1 shares chunk c1, p3 is the same item on both sides
    assert cmp.unique_b == {"chunk:c2"}


@pytest.mark.integration
def test_mode_selector_drives_each_mode_and_shows_its_items(app_env: Path) -> None:
    at = run_page(q=DEMO_QUESTION, limit="5", max_results="4")
    for mode in MODES:
        at.button_group(key="search_mode").set_value(mode).run()
        assert not at.exception, (mode, [(e.value, e.stack_trace) for e in at.exception])
        table = grader_data(at, "facts-")["rows"]
        assert len(table) >= 1, mode
        tabs = [t.label for t in at.tabs]
        if mode == "kg":
            assert tabs[:5] == ["Facts", "Answer", "Sources", "Agent context", "Trace"]
            assert all(len(row["tags"]) == 1 for row in table), "no channel mark on KG facts"
            continue
        assert f"**{MODE_LABELS[mode]} · {len(table)} items**" in markdown(at)
        assert {channel(row) for row in table} <= {"document", "graph"} and all(row["meta"] for row in table)
        assert ("Books" in tabs) == (mode == "multidoc")
        assert bool(graph_payloads(at)) == (mode in ("graph", "comprehensive", "dual")), mode
        if mode in ("vector", "hybrid", "multidoc"):
            assert len(table) <= (24 if mode == "multidoc" else 5)  # multi-doc: 5 books × (3 chunks + 3 relations)
    at.button_group(key="search_mode").set_value("kg").run()  # KG parameters kept while they were hidden
    assert at.number_input(key="max_results").value == 4 and len(grader_data(at, "facts-")["rows"]) == 4


@pytest.mark.integration
def test_tool_modes_show_the_items_the_tool_returns(app_env: Path) -> None:
    at = run_page(q=DEMO_QUESTION, search_mode="dual-channel", limit="4")
    result = run_mode(demo_kg(), "dual", DEMO_QUESTION, limit=4)
    table = grader_data(at, "facts-")["rows"]
    assert [row["meta"].split(" (+")[0] for row in table] == [f.citation for f in result.facts]
    assert [channel(row) for row in table] == [f.channel for f in result.facts]
    assert [row["text"] for row in table] == [f.text for f in result.facts]
    assert {"document", "graph"} <= {f.channel for f in result.facts}
    books = run_page(q=DEMO_QUESTION, search_mode="multi-doc", limit="2")
    groups = run_mode(demo_kg(), "multidoc", DEMO_QUESTION, limit=2).groups
    rows = grader_data(books, "book-")["rows"]
    assert len(groups) == 2 and [row["head"] for row in rows if row["head"]] == list(groups)
    assert {channel(row) for row in rows} == {"document", "graph"}


@pytest.mark.integration
def test_hybrid_text_weight_from_the_link_reaches_the_search(app_env: Path) -> None:
    at = run_page(q=DEMO_QUESTION, search_mode="hybrid", text_weight="0.8", limit="5")
    assert at.slider(key="text_weight").value == pytest.approx(0.8)
    weights = [float(scores(row)["text_weight"]) for row in grader_data(at, "facts-")["rows"]]
    assert len(weights) == 5 and weights == pytest.approx([0.8] * 5)
    assert not at.warning


@pytest.mark.integration
@pytest.mark.parametrize("bad", ["abc", "1.7", "-0.2", "nan"])
def test_bad_text_weight_in_the_link_is_explained_not_a_crash(app_env: Path, bad: str) -> None:
    at = run_page(q=DEMO_QUESTION, search_mode="hybrid", text_weight=bad)
    notes = [w.value for w in at.warning]
    assert any(f"`text_weight={bad}`" in n and "text_weight uses 0.3" in n for n in notes), notes
    assert at.slider(key="text_weight").value == pytest.approx(0.3)
    weights = [float(scores(row)["text_weight"]) for row in grader_data(at, "facts-")["rows"]]
    assert weights and weights == pytest.approx([0.3] * len(weights))  # the search still ran, on the default


@pytest.mark.integration
def test_unknown_mode_and_bad_limit_in_the_link_are_explained(app_env: Path) -> None:
    at = run_page(q=DEMO_QUESTION, search_mode="bogus", vs="vector", limit="500")
    notes = " ".join(w.value for w in at.warning)
    assert "`search_mode=bogus`" in notes and "the search uses KG" in notes
    # KG is in the comparison: its Max results sets both sides, and the link's limit is named as not used
    assert "`limit=500`" in notes and "Max results sets both sides" in notes
    assert metric(at, "Chunks only in KG")  # KG vs vector was compared


@pytest.mark.integration
def test_compare_shows_the_jaccard_of_the_two_results_computed_directly(app_env: Path) -> None:
    at = run_page(q=DEMO_QUESTION, vs="vector", limit="6", max_results="6")
    kg = demo_kg()
    a = run_mode(kg, "kg", DEMO_QUESTION, params=SearchParams.model_validate({"max_results": 6}))
    b = run_mode(kg, "vector", DEMO_QUESTION, limit=6)
    ca, cb = cited_chunks(a), cited_chunks(b)
    expected = jaccard(ca, cb)
    assert 0.0 < expected < 1.0  # a real overlap on the demo question, so the figure says something
    assert metric(at, "Overlap (Jaccard of cited chunks)") == f"{expected:.3f}"
    assert metric(at, "Shared chunks") == str(len(ca & cb))
    assert metric(at, "Chunks only in KG") == str(len(ca - cb))
    assert metric(at, "Chunks only in vector") == str(len(cb - ca))
    body = markdown(at)
    assert "#### KG vs vector" in body
    # both ranked lists, each item gradable with its rank, channel mark and shared/unique tag
    side_a, side_b = grader_data(at, "compare-list-a")["rows"], grader_data(at, "compare-list-b")["rows"]
    assert [r["rank"] for r in side_a] == [str(i) for i in range(1, len(a.facts) + 1)] and len(side_b) == len(b.facts)
    assert all(channel(r) == "graph" for r in side_a) and all(channel(r) == "document" for r in side_b)
    unique_b = [f for f in b.facts if not ca & set(f.chunk_ids)]
    cards = side_a + side_b
    assert sum("only here" in tags(r) for r in cards) == len(unique_b) + sum(
        1 for f in a.facts if not cb & set(f.chunk_ids))
    at.toggle(key="compare-only-unique").set_value(True).run()
    shown = grader_data(at, "compare-list-a")["rows"] + grader_data(at, "compare-list-b")["rows"]
    assert all("only here" in tags(r) for r in shown) and len(shown) < len(cards)


@pytest.mark.integration
def test_a_grade_given_in_one_compared_list_shows_in_the_other(app_env: Path) -> None:
    question = "What does a price anchor do to willingness to pay?"  # not used by the other app tests
    at = run_page(q=question, search_mode="vector", vs="hybrid", limit="5")
    a, b = grader_data(at, "compare-list-a"), grader_data(at, "compare-list-b")
    item = next(r["key"].split("|")[1] for r in a["rows"] if any(r["key"].split("|")[1] == x["key"].split("|")[1]
                                                                 for x in b["rows"]))
    send_grades(at, a["key"], [(1, next(r["key"] for r in a["rows"] if r["key"].endswith("|" + item)), 3)])
    at.run()
    shown = [r for r in grader_data(at, "compare-list-b")["rows"] if r["key"].endswith("|" + item)]
    assert [(r["grade"], r["mine"]) for r in shown] == [(3, True)]
    store = LabelStore.in_data_dir(app_env)
    assert [(lb.item_id, lb.grade) for lb in store.get_labels(question)] == [(item, 3)]
    store.delete_label(question, item, store.get_labels(question)[0].graph_version)


@pytest.mark.integration
def test_compare_on_the_hostile_graph_shows_payloads_as_text(app_env: Path) -> None:
    at = run_page(q=HOSTILE_QUERY, graph=HOSTILE_GRAPH, vs="dual-channel")
    body = markdown(at)
    assert IMG not in body and "<script" not in body and SCRIPT not in body
    rows = grader_data(at, "compare-list-a")["rows"] + grader_data(at, "compare-list-b")["rows"]
    assert any(IMG in r["text"] for r in rows)  # data for textContent: the browser shows it as text
    assert {channel(r) for r in rows} == {"document", "graph"}


def _render_partial_failure() -> None:
    from components.results import render_result
    from retrieval.models import SearchResult
    from tests.app.grading import page_stores
    from tests.app.test_search_modes import fact

    result = SearchResult(
        query="q", mode="comprehensive", facts=(fact("chunk:c1", "c1"),), counts={"vector": 1, "total": 1},
        warnings=("graph search failed: RetrievalError: kuzu went away",),
    )
    render_result(result, "listing", key="k", **page_stores())


def test_a_tool_result_shows_its_degradation_up_front_and_takes_the_full_width(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KG_DATA_DIR", str(tmp_path))  # where this page's grades would go
    at = AppTest.from_function(_render_partial_failure).run(timeout=30)
    assert not at.exception, [e.stack_trace for e in at.exception]
    assert "graph search failed" in at.warning[0].value  # above the tabs, before the Trace repeats it
    assert [t.label for t in at.tabs] == ["Facts", "Sources", "Listing", "Trace"]
    assert not graph_payloads(at)  # no subgraph: no empty graph box
    table = grader_data(at, "facts-")["rows"]
    # item 10: a passage is badged "document" once (its type and its channel are the same word)
    assert [tags(row) for row in table] == [["document"]] and table[0]["meta"] == "Book › Ch"
    assert "**comprehensive · 1 items** (1 document, 0 graph)" in markdown(at) and ":orange[1 warning]" in markdown(at)
    assert at.code[0].value == "listing"
