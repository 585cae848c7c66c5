"""Search page modes and the Compare view (AppTest on the real demo graph); the comparison on hand-built records."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from components.compare_view import compare
from components.search_form import MODE_LABELS
from retrieval import catalog
from retrieval.config import Settings
from retrieval.models import SearchParams, SearchResult, SourceMetadata, VerbalizedFact
from retrieval.modes import MODES, cited_chunks, jaccard, run_mode
from retrieval.runtime import KG
from tests.app.conftest import APP
from tests.app.graphs import DEMO_QUESTION, HOSTILE_GRAPH, HOSTILE_QUERY, IMG, SCRIPT, graph_payloads

TIMEOUT = 120


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
        table = at.dataframe[0].value
        assert len(table) >= 1, mode
        tabs = [t.label for t in at.tabs]
        if mode == "kg":
            assert tabs[:5] == ["Facts", "Answer", "Sources", "Agent context", "Trace"]
            assert "channel" not in table.columns
            continue
        assert f"**{MODE_LABELS[mode]} · {len(table)} items**" in markdown(at)
        assert {"channel", "citation"} <= set(table.columns)
        assert {c for row in table["channel"] for c in row} <= {"document", "graph"}
        assert ("Books" in tabs) == (mode == "multidoc")
        assert bool(graph_payloads(at)) == (mode in ("graph", "comprehensive", "dual")), mode
        if mode in ("vector", "hybrid", "multidoc"):
            assert len(table) <= (24 if mode == "multidoc" else 5)  # multi-doc: 5 books × (3 chunks + 3 relations)
    at.button_group(key="search_mode").set_value("kg").run()  # KG parameters kept while they were hidden
    assert at.number_input(key="max_results").value == 4 and len(at.dataframe[0].value) == 4


@pytest.mark.integration
def test_tool_modes_show_the_items_the_tool_returns(app_env: Path) -> None:
    at = run_page(q=DEMO_QUESTION, search_mode="dual-channel", limit="4")
    result = run_mode(demo_kg(), "dual", DEMO_QUESTION, limit=4)
    table = at.dataframe[0].value
    assert list(table["citation"]) == [f.citation for f in result.facts]
    assert [row[0] for row in table["channel"]] == [f.channel for f in result.facts]
    assert {"document", "graph"} <= {f.channel for f in result.facts}
    books = run_page(q=DEMO_QUESTION, search_mode="multi-doc", limit="2")
    groups = run_mode(demo_kg(), "multidoc", DEMO_QUESTION, limit=2).groups
    body = markdown(books)
    assert len(groups) == 2 and all(f":material/menu_book: {book}" in body for book in groups)
    assert ":blue-badge[:material/description: document]" in body and ":violet-badge[:material/hub: graph]" in body


@pytest.mark.integration
def test_hybrid_text_weight_from_the_link_reaches_the_search(app_env: Path) -> None:
    at = run_page(q=DEMO_QUESTION, search_mode="hybrid", text_weight="0.8", limit="5")
    assert at.slider(key="text_weight").value == pytest.approx(0.8)
    weights = list(at.dataframe[0].value["text_weight"])
    assert len(weights) == 5 and weights == pytest.approx([0.8] * 5)
    assert not at.warning


@pytest.mark.integration
@pytest.mark.parametrize("bad", ["abc", "1.7", "-0.2", "nan"])
def test_bad_text_weight_in_the_link_is_explained_not_a_crash(app_env: Path, bad: str) -> None:
    at = run_page(q=DEMO_QUESTION, search_mode="hybrid", text_weight=bad)
    notes = [w.value for w in at.warning]
    assert any(f"`text_weight={bad}`" in n and "text_weight uses 0.3" in n for n in notes), notes
    assert at.slider(key="text_weight").value == pytest.approx(0.3)
    weights = list(at.dataframe[0].value["text_weight"])
    assert weights and weights == pytest.approx([0.3] * len(weights))  # the search still ran, on the default


@pytest.mark.integration
def test_unknown_mode_and_bad_limit_in_the_link_are_explained(app_env: Path) -> None:
    at = run_page(q=DEMO_QUESTION, search_mode="bogus", vs="vector", limit="500")
    notes = " ".join(w.value for w in at.warning)
    assert "`search_mode=bogus`" in notes and "the search uses KG" in notes
    assert "`limit=500`" in notes and "limit uses 10" in notes
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
    # both ranked lists, each item with its rank, channel badge and shared/unique tag
    cards = [m.value for m in at.markdown if m.value.startswith("**") and "-badge[" in m.value]
    assert len(cards) == len(a.facts) + len(b.facts)
    assert sum(":violet-badge[:material/hub: graph]" in c for c in cards) == len(a.facts)
    assert sum(":blue-badge[:material/description: document]" in c for c in cards) == len(b.facts)
    unique_b = [f for f in b.facts if not ca & set(f.chunk_ids)]
    assert sum(":orange-badge[only here]" in c for c in cards) == len(unique_b) + sum(
        1 for f in a.facts if not cb & set(f.chunk_ids))
    at.toggle(key="compare-only-unique").set_value(True).run()
    shown = [m.value for m in at.markdown if m.value.startswith("**") and "-badge[" in m.value]
    assert all(":orange-badge[only here]" in c for c in shown) and len(shown) < len(cards)


@pytest.mark.integration
def test_compare_on_the_hostile_graph_shows_payloads_as_text(app_env: Path) -> None:
    at = run_page(q=HOSTILE_QUERY, graph=HOSTILE_GRAPH, vs="dual-channel")
    body = markdown(at)
    assert ":violet-badge[:material/hub: graph]" in body and ":blue-badge[:material/description: document]" in body
    assert IMG not in body and "<script" not in body and SCRIPT not in body
    assert "&lt;img src\\=x onerror\\=alert\\(1\\)&gt;" in body  # shown as text, every Markdown sign escaped


def _render_partial_failure() -> None:
    from components.results import render_result
    from retrieval.models import SearchResult
    from tests.app.test_search_modes import fact

    result = SearchResult(
        query="q", mode="comprehensive", facts=(fact("chunk:c1", "c1"),), counts={"vector": 1, "total": 1},
        warnings=("graph search failed: RetrievalError: kuzu went away",),
    )
    render_result(result, {}, "listing", key="k")


def test_a_tool_result_shows_its_degradation_up_front_and_takes_the_full_width() -> None:
    at = AppTest.from_function(_render_partial_failure).run(timeout=30)
    assert not at.exception, [e.stack_trace for e in at.exception]
    assert "graph search failed" in at.warning[0].value  # above the tabs, before the Trace repeats it
    assert [t.label for t in at.tabs] == ["Facts", "Sources", "Listing", "Trace"]
    assert not graph_payloads(at)  # no subgraph: no empty graph box
    table = at.dataframe[0].value
    assert list(table["channel"]) == [["document"]] and list(table["citation"]) == ["Book › Ch"]
    assert "**comprehensive · 1 items** (1 document, 0 graph)" in markdown(at) and ":orange[1 warning]" in markdown(at)
    assert at.code[0].value == "listing"
