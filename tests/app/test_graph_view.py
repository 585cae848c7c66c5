"""The live graph view in AppTest: what Python sends the component (roles, details panel, expansion "N of M"),
how its events move state and pages, and the Search page fixes of the same trial (trace count, schema caption
and legend, the Rerank link, bad link values named)."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from components.graph_data import PICKED, SEED, GraphMarks, Legend, drawing
from components.graph_instrument import ViewState, apply_event
from components.graph_view import graph_html
from components.links import PATH_MODES
from components.trace import render_trace
from retrieval.graph.index import schema
from retrieval.models import Entity, Relation, SearchResult, SemanticPath, Subgraph
from tests.app.graphs import DEMO_QUESTION, graph_payloads
from tests.app.test_pages import run_page as run
from tests.unit.test_traverse import make_index

pytestmark = pytest.mark.integration


def payload(at: AppTest) -> dict[str, Any]:
    """The data the page sent the live graph view (the graph, and its details panel and undo state)."""
    graphs = graph_payloads(at)
    assert len(graphs) == 1, "one live graph per page"
    return graphs[0]


def event(at: AppTest, key: str, **ev: Any) -> AppTest:
    """Apply one browser event to the view's state, as the component callback does, and run the page again."""
    state = at.session_state[f"{key}::state"]
    assert isinstance(state, ViewState)
    apply_event(state, ev)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def warnings(at: AppTest) -> str:
    return "\n".join(w.value for w in at.warning)


def test_search_graph_click_shows_engine_details_and_double_click_expands_with_n_of_m(app_env: Path) -> None:
    at = run(q=DEMO_QUESTION)
    data = payload(at)
    assert data["key"] == "kg-search" and data["details"] is None and data["features"]["expand"]
    roles = {n["i"]: n["r"] for n in data["nodes"]}
    assert any(r & SEED for r in roles.values()) and [w for w, _ in data["roles"]][0] == "★ seed"
    node = "brand-awareness"
    assert node in roles

    d = payload(event(at, "kg-search", type="select", kind="node", id=node))["details"]
    assert d["name"] == "brand awareness" and d["type"] == "concept" and d["description"]
    facts = dict(d["facts"])
    assert facts["degree"].endswith("relations") and float(facts["PPR in this search"]) > 0
    assert d["relations"] and all(r["type"] and "out" in r for r in d["relations"])
    assert d["sources"] and d["sources"][0]["book"] and d["sources"][0]["chapter"]
    before = d["neighbours"]
    assert before["shown"] < before["total"] and before["rest"]

    grown = payload(event(at, "kg-search", type="expand", id=node, seq=1))
    assert len(grown["nodes"]) > len(data["nodes"]) and "added by 1 expansion" in grown["status"]
    after = grown["details"]["neighbours"]
    assert after["shown"] == after["total"] == before["total"]
    added = [n for n in grown["nodes"] if "a" in n]
    assert added and {n["a"] for n in added} == {node}  # the browser places them around the expanded node
    assert grown["can_undo"] and not grown["can_redo"]
    again = payload(event(at, "kg-search", type="expand", id=node, seq=1))  # the same event delivered twice
    assert len(again["nodes"]) == len(grown["nodes"]) and "by 1 expansion" in again["status"]

    back = payload(event(at, "kg-search", type="undo", seq=2))
    assert len(back["nodes"]) == len(data["nodes"]) and back["can_redo"]
    hidden = payload(event(at, "kg-search", type="hide", id=node, seq=3))
    assert hidden["hidden"] == [node] and hidden["details"] is None

    edge = data["edges"][0]["i"]
    e = payload(event(at, "kg-search", type="select", kind="edge", id=edge, seq=4))["details"]
    assert e["kind"] == "edge" and e["type"] and e["from"] and e["to"] and "sources" in e


def test_path_start_and_end_open_paths_with_both_set_and_search_from_here_opens_search(app_env: Path) -> None:
    at = run(q=DEMO_QUESTION)
    event(at, "kg-search", type="path_start", id="brand-awareness", seq=1)
    assert "Path start: brand awareness" in payload(at)["notice"]
    at = event(at, "kg-search", type="path_end", id="conversion-rate", seq=2)
    assert at.query_params["mode"] == PATH_MODES["why"]
    assert at.query_params["a"] == "brand awareness (concept)" and at.query_params["b"] == "conversion rate (metric)"
    text = "\n".join(m.value for m in at.markdown)
    assert "between **brand awareness** and **conversion rate**" in text  # Paths ran the question
    assert payload(at)["key"] == "kg-paths-why"

    at = event(at, "kg-paths-why", type="search", id="conversion-rate", seq=3)
    assert at.text_input(key="q").value == "conversion rate"
    assert payload(at)["key"] == "kg-search"

    assert payload(at)["features"]["communities"]
    at = event(at, "kg-search", type="communities", id="conversion-rate", seq=4)
    assert at.query_params["entity"] == "conversion-rate"
    text = "\n".join(m.value for m in at.markdown)
    assert re.search(r"\*\*conversion rate\*\* \(metric\) is in [1-9]\d* communit", text), text
    opened = payload(at)  # its smallest community opens beside the report, the entity picked in it
    assert opened["key"] == "kg-communities" and at.query_params["community"]
    assert next(n["r"] for n in opened["nodes"] if n["i"] == "conversion-rate") & PICKED


def test_trace_lists_every_traced_path_it_counts() -> None:
    def page() -> None:
        from components.trace import render_trace as trace
        from tests.app.test_graph_view import eleven_paths

        trace(eleven_paths())

    at = AppTest.from_function(page).run(timeout=30)
    head = next(m.value for m in at.markdown if m.value.startswith("**Traced paths**"))
    listed = sum(m.value.count(" · PPR ") for m in at.markdown)
    assert head == "**Traced paths** (11)" and listed == 11
    assert render_trace  # the function under test


def eleven_paths() -> SearchResult:
    nodes = [Entity(id=f"n{i}", name=f"N{i}") for i in range(12)]
    paths = tuple(SemanticPath(source_node=nodes[0], destination_node=nodes[i], ppr_score=0.1 / i,
                               edges=(Relation(id=f"r{i}", source_id="n0", target_id=f"n{i}", relation_type="R"),))
                  for i in range(1, 12))
    return SearchResult(query="q", paths=paths, subgraph=Subgraph(nodes=tuple(nodes)))


def test_schema_view_says_the_edge_cap_left_types_out_and_shows_no_empty_marks_row() -> None:
    triples = [(f"a{i}", f"R{i}", f"b{i}") for i in range(6)]
    index = make_index(triples)
    index.arrays.node_types[:] = [f"type{i}" for i in range(len(index.arrays.node_ids))]
    capped = schema(index, max_edges=2)
    assert capped.truncated and len(capped.nodes) == 4 and capped.total_nodes == 12
    drawn = drawing(capped, GraphMarks(), max_nodes=60, legend=Legend())
    assert drawn.payload["roles"] == []  # no marks: the legend has no Marks row
    assert "Marks" not in graph_html(capped, GraphMarks()).html

    def page() -> None:
        from components.results import render_overview
        from retrieval.graph.index import schema as schema_of
        from tests.app.test_graph_view import make_index as mk

        idx = mk([(f"a{i}", f"R{i}", f"b{i}") for i in range(6)])
        idx.arrays.node_types[:] = [f"type{i}" for i in range(len(idx.arrays.node_ids))]
        render_overview([], [], schema_of(idx, max_edges=2))

    at = AppTest.from_function(page).run(timeout=30)
    caption = " ".join(c.value for c in at.caption)
    assert "Showing 4 of 12 nodes" in caption and "edge cap" in caption and "node budget" not in caption


def test_bad_link_values_are_each_named_in_a_warning(app_env: Path) -> None:
    at = run(q=DEMO_QUESTION, graph="nope")
    assert "`graph=nope`" in warnings(at) and "demo" in warnings(at)
    at = run(q=DEMO_QUESTION, damping="3")
    assert "`damping=3`" in warnings(at) and "damping uses 0.5" in warnings(at)
    long = "price " * 400
    at = run(q=long)
    assert "2,000" in warnings(at) and f"{len(long):,}" in warnings(at)
    at = run("pages/paths.py", mode="why")
    assert "`mode=why`" in warnings(at) and PATH_MODES["why"] in warnings(at)


def test_rerank_link_carries_the_query_and_the_graph(app_env: Path) -> None:
    at = run(q=DEMO_QUESTION)
    link = next(p.proto for p in at.get("page_link") if p.proto.label == "Inspect the reranking of this query")
    params = dict(urllib.parse.parse_qsl(link.query_string))
    assert params.get("graph") == "demo" and "inspect" in params
    rerank = run("pages/rerank.py", inspect=DEMO_QUESTION, graph="demo")
    assert rerank.text_input(key="q").value == DEMO_QUESTION


def test_the_component_script_sets_data_as_text_only_and_loads_nothing_remote() -> None:
    from components import graph_live

    # the live view's and the Map's modules (each with the shared panel.js), and the details carrier
    scripts = (graph_live.script(graph_live.ASSETS / "graph.js"), graph_live.script(graph_live.MAP_ASSETS / "map.js"),
               (graph_live.ASSETS / "details.js").read_text(encoding="utf-8"))
    for script in scripts:
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                     "setAttribute(\"on", "srcdoc", "fetch(", "XMLHttpRequest", "import("):
            assert sink not in script, sink
        assert "http://" not in script and "https://" not in script  # every resource is the page's own
    bundle = (graph_live.MAP_ASSETS / "map.bundle.js").read_text(encoding="utf-8")  # the vendored sigma.js build
    assert "sigma 3.0.3 (MIT)" in bundle[:300] and "fetch(" not in bundle and "XMLHttpRequest" not in bundle
    vis = graph_live.VIS_JS.read_text(encoding="utf-8")
    assert graph_live.VIS_JS.is_file() and "vis-network" in vis[:200]  # pyvis's own copy, no CDN
