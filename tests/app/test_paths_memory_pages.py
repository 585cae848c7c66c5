"""AppTest: the Paths page (explore with expansion history, why-connected, export/save) and the Graph Memory page
(scope, list, open, traverse, delete, counters) on the real demo graph (Kuzu + Milvus Lite + MiniLM)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from retrieval.evaluation.labels import LabelStore
from retrieval.explore.memory import GraphMemory
from tests.app.grading import grader_data, send_grades
from tests.app.graphs import IMG, SCRIPT, graph_payloads, graph_text
from tests.app.test_pages import run_page, texts

pytestmark = pytest.mark.integration
WHY = "Why are these connected?"


def paths_page() -> AppTest:
    return run_page("pages/paths.py")


def ok(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def caption_with(at: AppTest, needle: str) -> str:
    return next((c.value for c in at.caption if needle in c.value), "")


def test_explore_draws_the_neighbourhood_and_expansion_history_goes_back_and_forward(app_env: Path) -> None:
    at = paths_page()
    assert "Pick a start entity" in texts(at) and not graph_payloads(at)
    ok(at.selectbox(key="start").set_value("price-elasticity").run())
    ok(at.number_input(key="x-depth").set_value(1).run())
    summary = next(m.value for m in at.markdown if "relations in view" in m.value)
    assert "**8 entities**" in summary and "start: showing 7 of 7 within 1 hop" in summary
    assert "expansion" not in summary
    assert graph_payloads(at) and at.dataframe, "graph or entity table missing"
    assert "★ start" in graph_text(at)  # the legend speaks this page's language
    assert at.button(key="x-back").disabled and at.button(key="x-fwd").disabled

    ok(at.selectbox(key="x-node").set_value("penetration-pricing").run())
    link = next(lk.proto for lk in at.get("page_link") if lk.proto.label == "Its communities")
    assert "entity=penetration-pricing" in link.query_string  # jump from the picked entity to its communities
    ok(at.button(key="x-expand").click().run())
    assert "1 expansion" in texts(at)
    assert "penetration pricing" in caption_with(at, "History:")
    grown = len(at.dataframe[0].value)
    assert grown == 16 and "switching costs" in set(at.dataframe[0].value["entity"])
    assert not at.button(key="x-back").disabled and at.button(key="x-fwd").disabled

    ok(at.button(key="x-back").click().run())
    assert "expansion" not in next(m.value for m in at.markdown if "relations in view" in m.value)
    assert len(at.dataframe[0].value) < grown
    assert not at.button(key="x-fwd").disabled
    ok(at.button(key="x-fwd").click().run())
    assert "1 expansion" in texts(at) and len(at.dataframe[0].value) == grown

    ok(at.multiselect(key="x-types").set_value(["metric"]).run())  # a display filter: history is kept
    table = at.dataframe[0].value
    assert "1 expansion" in texts(at) and "hidden by the entity-type filter" in texts(at)
    assert set(table["type"]) <= {"metric", "concept", "strategy"}  # metrics, the start, the expanded node
    assert "revenue" in set(table["entity"]) and "switching costs" not in set(table["entity"])


def test_why_connected_ranks_paths_with_sources_beside_the_graph(app_env: Path) -> None:
    at = paths_page()
    ok(at.segmented_control(key="mode").set_value("why").run())
    ok(at.selectbox(key="a").set_value("price-elasticity").run())
    ok(at.selectbox(key="b").set_value("penetration-pricing").run())
    assert any("paths** between **price elasticity** and **penetration pricing**" in m.value for m in at.markdown)
    listed = grader_data(at, "why-")
    paths = listed["rows"]
    hops = [int(r["tags"][0]["text"].split()[0]) for r in paths]
    assert 1 <= len(paths) <= 5 and hops == sorted(hops) and listed["selectable"]
    # item 6: the screen's one layout (relation, direction, then the description), not the agent's brackets
    first = paths[0]["text"].splitlines()
    assert "--[" not in paths[0]["text"] and ("→ " in first[0] or "— " in first[0]) and first[1].startswith("    ")
    assert paths[0]["key"].split("|")[1].startswith("path:")
    assert [t.label for t in at.tabs][:2] == ["Ranked paths", "Sources"]
    assert "★ endpoints" in graph_text(at)
    assert any(m.value.startswith("##### :material/menu_book:") for m in at.markdown), "sources tab is empty"
    # a path graded in place is stored for the derived question, under the sidebar's annotator
    at.session_state["annotator-input"] = "pat"
    send_grades(at, listed["key"], [(1, paths[0]["key"], 2)])
    ok(at.run())
    assert grader_data(at, "why-")["rows"][0]["grade"] == 2
    store = LabelStore.in_data_dir(app_env)
    question = "How is price elasticity connected to penetration pricing?"
    stored = store.get_labels(question, annotator="pat")
    assert [(lb.item_id, lb.grade) for lb in stored] == [(paths[0]["key"].split("|")[1], 2)]
    store.delete_label(question, stored[0].item_id, stored[0].graph_version, annotator="pat")
    ok(at.number_input(key="k").set_value(2).run())
    assert len(grader_data(at, "why-")["rows"]) == 2
    assert {b.label for b in at.get("download_button")} >= {"JSON", "GraphML"}


def test_save_from_paths_then_open_traverse_and_delete_on_graph_memory(app_env: Path) -> None:
    tenant = f"t{uuid.uuid4().hex[:10]}"
    at = paths_page()
    ok(at.segmented_control(key="mode").set_value("why").run())
    ok(at.selectbox(key="a").set_value("price-elasticity").run())
    ok(at.selectbox(key="b").set_value("penetration-pricing").run())
    at.text_input(key="why-export-tenant").set_value(tenant)
    at.text_input(key="why-export-ns").set_value("../pricing")
    ok(at.form_submit_button[0].click().run())
    assert any("Not saved" in e.value and "invalid namespace" in e.value for e in at.error)
    at.text_input(key="why-export-ns").set_value("pricing")
    ok(at.form_submit_button[0].click().run())
    saved = next(m.value for m in at.markdown if "Saved to Graph Memory as" in m.value)
    memory = GraphMemory(app_env / "memory")
    listed = memory.list_graphs(tenant, "pricing")
    assert listed.ok and len(listed.graphs) == 1
    summary = listed.graphs[0]
    assert summary.graph_id in saved and summary.node_count >= 2 and summary.edge_count >= 1
    assert summary.title == "Why connected: price elasticity ↔ penetration pricing" and summary.tags == ("paths",)
    assert any("memory" in link.proto.page for link in at.get("page_link"))  # "Open in Graph Memory"

    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=120)
    at.query_params.update({"tenant": tenant, "ns": "pricing", "gid": summary.graph_id})
    ok(at.run())
    ok(at.switch_page("pages/memory.py").run())
    assert any(m.value.startswith("#### Why connected\\: price elasticity") for m in at.markdown), texts(at)
    assert [t.label for t in at.tabs][:4] == ["Traverse", "Contents", "Export", "Delete"]
    assert graph_payloads(at), "the stored graph is not drawn"
    retrievals = at.metric[1].value
    ok(at.form_submit_button[0].click().run())  # traverse from the first node, 2 hops, both ways
    assert any("nodes within 2 hops of" in m.value for m in at.markdown)
    assert int(at.metric[2].value) >= 1 and at.metric[1].value == retrievals  # a rerun is not a retrieval

    ok(at.button(key="m-del-ask").click().run())
    assert any("for good?" in w.value for w in at.warning)
    ok(at.button(key="m-del-yes").click().run())
    assert memory.list_graphs(tenant, "pricing").graphs == ()
    assert "No stored graph matches" in texts(at)


def test_graph_memory_search_invalid_ids_and_hostile_labels(app_env: Path) -> None:
    tenant = f"t{uuid.uuid4().hex[:10]}"
    memory = GraphMemory(app_env / "memory")
    stored = memory.store_graph(
        tenant, "lab",
        [{"id": "x", "name": f"Eve {IMG}", "type": f"p{SCRIPT}"}, {"id": "y", "name": "Mallory"}],
        [{"source": "x", "target": "y", "relation": f"KNOWS{IMG}", "description": SCRIPT}],
        keywords=["eve", "archive"], tags=["hostile"], metadata={"title": f"Eve {IMG}"},
    )
    memory.store_graph(tenant, "lab", [{"id": "z", "name": "Zed"}], [], keywords=["other"], tags=["misc"])
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=120)
    at.query_params.update({"tenant": tenant, "ns": "lab"})
    ok(at.run())
    ok(at.switch_page("pages/memory.py").run())
    assert len(at.dataframe[0].value) == 2
    assert {"nodes", "edges"} <= set(at.dataframe[0].value.columns)

    searches = int(at.metric[0].value)
    ok(at.text_input(key="m-q").set_value("archive").run())
    found = at.dataframe[0].value
    assert list(found["graph id"]) == [stored.graph_id] and found["score"].iloc[0] > 0
    assert int(at.metric[0].value) == searches + 1
    ok(at.run())
    assert int(at.metric[0].value) == searches + 1  # the same search is not re-counted on a rerun
    ok(at.text_input(key="m-q").set_value("").run())
    ok(at.multiselect(key="m-tags").set_value(["misc"]).run())
    assert list(at.dataframe[0].value["title"]) == ["(untitled)"]

    at.query_params["gid"] = stored.graph_id
    ok(at.multiselect(key="m-tags").set_value(["hostile"]).run())
    assert any(m.value.startswith("#### Eve &lt;img") for m in at.markdown), [m.value for m in at.markdown]
    assert f"Eve {IMG}" in graph_text(at)  # the raw name as data: the browser sets it as text
    assert all("<img" not in m.value and "<script" not in m.value for m in at.markdown)

    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=120)
    at.query_params["tenant"] = "../etc"  # a typed tenant reaches the page the same way
    ok(at.run())
    ok(at.switch_page("pages/memory.py").run())
    assert any("invalid tenant" in e.value for e in at.error), [e.value for e in at.error]


def test_paths_on_the_hostile_graph_show_payloads_as_text(app_env: Path) -> None:
    at = run_page("pages/paths.py", graph="hostile")
    ok(at.selectbox(key="start").set_value("eve").run())
    assert len(at.dataframe[0].value) == 2 and IMG in " ".join(at.dataframe[0].value["entity"])  # literal text
    assert IMG in graph_text(at)  # as data, set as text in the browser
    ok(at.segmented_control(key="mode").set_value("why").run())
    ok(at.selectbox(key="a").set_value("eve").run())
    ok(at.selectbox(key="b").set_value("mallory").run())
    assert IMG in grader_data(at, "why-")["rows"][0]["text"]
    assert any("path** between **Eve Evilname &lt;img" in m.value for m in at.markdown)
    assert all("<img" not in m.value and "<script" not in m.value for m in at.markdown)
    assert graph_payloads(at)[0]["key"] == "kg-paths-why"
