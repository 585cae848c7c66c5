"""Rendering components on hand-built records: escaping, node budget, highlight, grouping, and AppTest rendering."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from components.facts import fact_row, rank_of, score_keys
from components.graph_view import GraphMarks, graph_html, pick_nodes
from components.results import marks_for
from components.sources import group_sources
from retrieval.models import (
    Chunk,
    Decomposition,
    Entity,
    Relation,
    SearchResult,
    SemanticPath,
    SourceMetadata,
    StageTiming,
    Subgraph,
    VerbalizedFact,
)
from tests.app.grading import grader_data
from tests.app.graphs import graph_payloads
from ui_text import clean, md_code, md_literal

IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "</script><script>alert(1)</script>"


def star(leaves: int) -> Subgraph:
    hub = Entity(id="hub", name="Hub", type="place")
    nodes = [hub] + [Entity(id=f"n{i}", name=f"Leaf {i}", type="person") for i in range(leaves)]
    edges = [Relation(id=f"r{i}", source_id="hub", target_id=f"n{i}", relation_type="has") for i in range(leaves)]
    return Subgraph(nodes=tuple(nodes), edges=tuple(edges), total_nodes=leaves + 1)


def hostile_result() -> SearchResult:
    a = Entity(id="a", name=IMG, type=SCRIPT, description=SCRIPT)
    b = Entity(id="b", name="Ada <b>Lovelace</b> href", type="person", description=f"wrote {IMG}")
    r = Relation(id="r1", source_id="a", target_id="b", relation_type=IMG, description=SCRIPT, source_chunks=("c1",))
    fact = VerbalizedFact(
        id="f1", type="local", text=f"{IMG} knows Ada", scores={"ppr": 0.5, "path_semantic": 0.25, "mmr_rank": 1},
        sources=(SourceMetadata(source="c1", original_document=SCRIPT, chapter="Ch *1*", chunk_id="c1"),),
        chunk_ids=("c1",), entity_ids=("a", "b"), relation_ids=("r1",),
    )
    path = SemanticPath(source_node=a, destination_node=b, edges=(r,), ppr_score=0.4, path_semantic_score=0.3)
    return SearchResult(
        query=IMG, facts=(fact,), subgraph=Subgraph(nodes=(a, b), edges=(r,), total_nodes=2),
        seed_ids=("a",), destination_ids=("b",), paths=(path,),
        decomposition=Decomposition(query=IMG, local_queries=(IMG,), global_queries=(SCRIPT,)),
        timings=(StageTiming(stage="seeds", ms=3.0), StageTiming(stage="ppr", ms=5.5)),
        warnings=(f"Gemini not configured: offline decomposition used {IMG}",), graph_version="v1",
    )


def test_graph_html_escapes_every_data_string_and_loads_nothing_remote() -> None:
    view = graph_html(hostile_result().subgraph, GraphMarks.of(seeds=["a"]))
    page = view.html
    assert IMG not in page and SCRIPT not in page
    assert "<b>Lovelace</b>" not in page  # markup from data never reaches HTML as markup
    assert "&lt;/script&gt;&lt;script&gt;" in page  # the legend shows the type escaped
    assert re.findall(r"<(?:script|link)\b[^>]*\b(?:src|href)=", page) == []
    assert "bootstrap" not in page and "cdn.jsdelivr" not in page
    nodes = json.loads(re.search(r"nodes = new vis\.DataSet\((\[.*?\])\);", page).group(1))
    by_id = {n["id"]: n for n in nodes}
    assert by_id["a"]["label"] == IMG  # canvas text: the raw name, drawn literally (JSON escapes it for <script>)
    assert "title" not in by_id["a"]  # tooltips are built in the browser from the escaped `tip`
    assert by_id["a"]["tip"].startswith("<b>&lt;img src=x onerror=alert(1)&gt;</b>")
    assert "kgTips(nodes)" in page


def test_node_budget_keeps_marked_nodes_and_reports_the_total() -> None:
    sg = star(300)
    marks = GraphMarks.of(seeds=["n299"], focus_nodes=["n150"])
    kept = [n.id for n in pick_nodes(sg, marks, 50)]
    assert kept[:2] == ["n150", "n299"] and "hub" in kept and len(kept) == 50
    view = graph_html(sg, marks, max_nodes=50)
    assert (view.shown_nodes, view.total_nodes, view.truncated) == (50, 301, True)
    assert view.shown_edges == 49  # only edges between drawn nodes


def test_focus_counts_follow_the_picked_fact() -> None:
    result = hostile_result()
    plain = graph_html(result.subgraph, marks_for(result))
    focused = graph_html(result.subgraph, marks_for(result, result.facts[0]))
    assert (plain.focus_nodes, plain.focus_edges) == (0, 0)
    assert (focused.focus_nodes, focused.focus_edges) == (2, 1)
    assert 'data-focus-nodes="2"' in focused.html


def test_markdown_helpers_render_literally() -> None:
    assert md_literal(IMG) == "&lt;img src\\=x onerror\\=alert\\(1\\)&gt;"
    assert md_literal("*a* [b](javascript:x)") == "\\*a\\* \\[b\\]\\(javascript\\:x\\)"
    assert md_literal("a & b") == "a &amp; b"
    assert md_code("x`y") == "`` x`y ``"
    assert clean("a\x00b\ud800") == "a\ufffdb?"


def test_fact_rows_carry_the_full_text_every_score_in_reading_order_and_the_book() -> None:
    facts = hostile_result().facts + (
        VerbalizedFact(id="g", type="global", text="g " * 400, scores={"similarity": 0.9, "zeta": 1.0,
                                                                     "ce_score": 2.0}),
    )
    assert score_keys(facts) == ["ppr", "path_semantic", "similarity", "ce_score", "mmr_rank", "zeta"]
    first, second = (fact_row(i, f, "q", channels=False) for i, f in enumerate(facts, 1))
    assert [name for name, _ in second.scores] == ["similarity", "CE score", "zeta"]
    assert second.text == facts[1].text, "the whole fact, never cut"
    assert [t.text for t in second.tags] == ["global"] and second.item_id == "g"
    assert first.meta.startswith(SCRIPT) and ("MMR rank", "1") in first.scores
    assert rank_of(second.key, 2) == 1 and rank_of(second.key, 1) is None and rank_of("x|g", 2) is None


def test_sources_group_by_book_and_chapter_with_citing_facts() -> None:
    result = hostile_result()
    chunks = {"c1": Chunk(id="c1", text="passage", original_document="Book A", chapter="One", author="X")}
    groups = group_sources(result.facts, chunks)
    assert [g.book for g in groups] == ["Book A"]
    assert [(c.chunk_id, c.facts) for c in groups[0].chapters["One"]] == [("c1", [0])]
    # without the chunk record, the fact's SourceMetadata still places it
    fallback = group_sources(result.facts, {})
    assert fallback[0].book == SCRIPT and list(fallback[0].chapters) == ["Ch *1*"]


def _render_hostile() -> None:
    from components.results import render_result
    from retrieval.models import Chunk
    from tests.app.grading import page_stores
    from tests.app.test_components import hostile_result

    chunks = {"c1": Chunk(id="c1", text="Ada wrote <script>alert(2)</script>", original_document="Book A")}
    render_result(hostile_result().model_copy(update={"chunks": chunks}), "## Facts\n- x", key="k", **page_stores())


def test_result_layout_renders_every_tab_with_literal_text(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KG_DATA_DIR", str(tmp_path))  # grades of this page would go to this data dir
    at = AppTest.from_function(_render_hostile).run(timeout=30)
    assert not at.exception
    assert [t.label for t in at.tabs] == ["Facts", "Sources", "Agent context", "Trace"]
    facts, sources = grader_data(at, "facts-"), grader_data(at, "sources-")
    assert [r["text"] for r in facts["rows"]] == [hostile_result().facts[0].text] and facts["selectable"]
    assert sources["rows"][0]["text"] == "Ada wrote <script>alert(2)</script>"  # data, set with textContent
    names = [n["n"] for g in graph_payloads(at) for n in g["nodes"]]  # type: ignore[union-attr]
    assert IMG in names  # sent as data; the browser sets it as text (test_graph_view checks the script)
    assert len(at.warning) == 1 and "&lt;img" in at.warning[0].value
    assert at.code[0].value == "## Facts\n- x"
    bodies = " ".join(m.value for m in at.markdown)
    assert "<script>" not in bodies and IMG not in bodies
