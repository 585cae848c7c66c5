"""AppTest smoke per page: no exception, key elements present, on a real demo graph (Kuzu + Milvus Lite + MiniLM)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import typer
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from components.results import cli_command
from retrieval.cli import search as search_cli
from retrieval.graph import catalog
from tests.app.conftest import APP
from tests.app.grading import grader_data
from tests.app.graphs import DEMO_QUESTION, HOSTILE_GRAPH, IMG, graph_payloads, graph_text, write_hostile_bundle

pytestmark = pytest.mark.integration
TIMEOUT = 120


def run_page(page: str | None = None, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [i.value for i in at.info]
    return "\n".join(parts)


def test_shell_sidebar_shows_graph_backends_and_capabilities(app_env: Path) -> None:
    at = run_page()
    side = "\n".join(m.value for m in at.sidebar.markdown) + "\n".join(c.value for c in at.sidebar.caption)
    assert "**demo** · version" in side
    picker = at.sidebar.radio(key="graph-picker")  # every graph with its counts, the one in use picked
    assert picker.value == "demo" and set(picker.options) >= {"demo", HOSTILE_GRAPH}
    assert any("entities" in c and "relations" in c for c in picker.proto.captions)
    assert "Kuzu" in side and "Milvus Lite" in side
    assert "Gemini: no key" in side and "Cross-encoder:" in side  # st.badge renders as Markdown


def test_search_page_runs_a_url_query_and_fills_every_tab(app_env: Path) -> None:
    at = run_page(q=DEMO_QUESTION, max_results="5")
    assert at.text_input(key="q").value == DEMO_QUESTION
    assert [t.label for t in at.tabs][:5] == ["Facts", "Answer", "Sources", "Agent context", "Trace"]
    facts = grader_data(at, "facts-")["rows"]
    assert 1 <= len(facts) <= 5 and all(r["text"] and r["tags"][0]["text"] in ("local", "global") for r in facts)
    graphs = graph_payloads(at)
    assert len(graphs) == 1 and graphs[0]["nodes"], "the subgraph view is missing"
    assert at.code and at.code[0].value.strip(), "agent context is empty"
    assert at.query_params["graph"] == "demo"
    assert "facts**" in texts(at)
    trace = at.tabs[4]  # the Trace says how strong the evidence was, as the no-match notice does
    assert any(c.value.startswith("Evidence strength 0.") and "against the threshold 0.50." in c.value
               for c in trace.caption)


def test_search_page_without_query_explains_itself(app_env: Path) -> None:
    at = run_page()
    assert "Type a question" in texts(at)
    overview = [list(d.value.columns) for d in at.dataframe]
    assert overview == [["entity type", "count"], ["relation type", "count"]]
    assert len(at.dataframe[0].value) >= 3  # the demo's entity types
    assert len(at.button) >= 3  # demo questions to click
    schema_view = graph_text(at)  # the schema graph: entity types joined by relation types
    assert "INFLUENCES" in schema_view and "relations: concept INFLUENCES concept" in schema_view


def test_search_landing_offers_a_working_cli_command_and_the_schema(app_env: Path) -> None:
    at = run_page()
    words = shlex.split(at.code[0].value)
    assert words[:4] == ["python", "-m", "retrieval", "search"] and words[4] in [b.label for b in at.button]
    cli = typer.Typer(add_completion=False)
    search_cli.register(cli)
    out = CliRunner().invoke(cli, words[3:])  # the command as shown, run in-process
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith("## Retrieved Knowledge from Knowledge Graph")
    download = at.get("download_button")[0].proto
    assert download.label == "Schema as GraphML" and download.url  # the file is served by the media manager
    assert {p.proto.page for p in at.get("page_link")} >= {"paths", "memory"}


def test_search_landing_of_another_graph_asks_about_its_own_entities(app_env: Path) -> None:
    at = run_page(graph=HOSTILE_GRAPH)
    words = shlex.split(at.code[0].value)
    assert words[4].startswith("How does ") and words[-2:] == ["--graph", HOSTILE_GRAPH]


@pytest.mark.parametrize("text", ["it's $(rm -rf /) `x` \"q\" ; echo", "--graph evil", "über\n<img src=x>"])
def test_cli_command_quotes_every_word(text: str, tmp_path: Path) -> None:
    words = shlex.split(cli_command(text, tmp_path / "my data", text))
    assert words == ["python", "-m", "retrieval", "search", text, "--data-dir", str(tmp_path / "my data"),
                     "--graph", text]


def test_search_page_on_the_hostile_graph_renders_payloads_as_text(app_env: Path) -> None:
    at = run_page(q="Who does Eve Evilname know?", graph=HOSTILE_GRAPH)
    assert "**hostile** · version" in "\n".join(c.value for c in [*at.sidebar.markdown, *at.sidebar.caption])
    names = [n["n"] for g in graph_payloads(at) for n in g["nodes"]]  # type: ignore[union-attr]
    assert any(IMG in n for n in names)  # the raw name as data: the browser sets it as text, never as HTML
    assert all(IMG not in m.value and "<script" not in m.value for m in at.markdown)


@pytest.mark.parametrize(
    ("page", "title"),
    [("pages/paths.py", "Paths"), ("pages/memory.py", "Graph Memory"), ("pages/rerank.py", "Rerank Inspector")],
)
def test_other_pages_render(app_env: Path, page: str, title: str) -> None:
    at = run_page(page)
    assert title in texts(at)


def test_data_page_shows_stats_graphs_and_actions(app_env: Path) -> None:
    at = run_page("pages/data.py")
    assert [m.label for m in at.metric] == ["Books", "Chapters", "Chunks", "Entities", "Relations", "Communities"]
    assert int(at.metric[5].value) > 10  # computed at ingest (Leiden)
    assert int(at.metric[0].value) == 4 and int(at.metric[3].value.replace(",", "")) > 100
    graphs = at.dataframe[0].value
    assert sorted(graphs["graph"]) == ["demo", HOSTILE_GRAPH]
    labels = [b.label for b in at.button]
    assert "Make active" in labels and "Rebuild demo graph" in labels and "Import" in labels


def test_no_graph_points_to_the_data_page(empty_env: Path) -> None:
    at = run_page()
    assert "No graph in the data directory yet." in [w.value for w in at.sidebar.warning]
    assert "Build the demo graph" in texts(at)
    data = run_page("pages/data.py")
    assert "Build demo graph" in [b.label for b in data.button]


def test_data_page_imports_a_server_folder_and_switches_graphs(empty_env: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KG_IMPORT_ROOT", str(tmp_path))  # server folders are read only inside the import root
    bundle = write_hostile_bundle(tmp_path / "my-bundle")
    at = run_page("pages/data.py")
    at.text_input(key="import-path").input(str(bundle)).run()
    assert at.text_input(key="import-name").value == "my-bundle"
    at.button[[b.label for b in at.button].index("Import")].click().run()
    assert not at.exception and at.success, [e.value for e in at.error]
    assert catalog.list_graphs(empty_env) == ["my-bundle"]
    assert at.dataframe[0].value["graph"].tolist() == ["my-bundle"]  # listed on the run after the import
    stages = " ".join(m.value for m in at.expander[0].markdown)
    for stage in ("graph store", "embedding Entities", "BM25 index", "committing"):
        assert f"✓ {stage}" in stages.replace("\\", "")
    link = at.get("page_link")[0].proto
    assert link.label == "Open my\\-bundle in Search" and link.query_string == "graph=my-bundle"


def _crafted_import(folder: str) -> None:
    """What a crafted session could ask for: a server-folder import, past the page's own widgets."""
    from components import ingest_panel as ip
    from retrieval.config import Settings

    ip.run_import(Settings.from_env(), ip.ImportSource(folder=folder), "auto", "crafted", None, {})  # type: ignore[arg-type]


def test_without_an_import_root_the_server_refuses_server_folders(empty_env: Path, tmp_path: Path) -> None:
    """No KG_IMPORT_ROOT: the box is not drawn, a widget state naming a folder is ignored, and an import of a
    server folder that reaches the server anyway is refused there (nothing is read, no graph is made)."""
    bundle = write_hostile_bundle(tmp_path / "my-bundle")
    at = run_page("pages/data.py")
    assert "import-path" not in [t.key for t in at.text_input]
    at.session_state["import-path"] = str(bundle)
    at.run()
    assert not at.exception and "import-path" not in [t.key for t in at.text_input]
    assert at.button[[b.label for b in at.button].index("Import")].disabled
    crafted = AppTest.from_function(_crafted_import, args=(str(bundle),), default_timeout=TIMEOUT).run()
    assert not crafted.exception
    assert [e.value for e in crafted.error] == [
        "**Import refused:** importing a folder on the server is switched off \\(KG\\_IMPORT\\_ROOT is not set\\); "
        "upload a \\.zip instead"]
    assert catalog.list_graphs(empty_env) == []


def test_data_page_names_file_line_and_field_of_a_bad_bundle(empty_env: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KG_IMPORT_ROOT", str(tmp_path))
    bundle = write_hostile_bundle(tmp_path / "bad")
    rows = (bundle / "entities.jsonl").read_text().splitlines()
    rows[1] = json.dumps({"id": "mallory", "type": "person"})  # no name
    (bundle / "entities.jsonl").write_text("\n".join(rows) + "\n")
    at = run_page("pages/data.py")
    at.text_input(key="import-path").input(str(bundle)).run()
    at.button[[b.label for b in at.button].index("Import")].click().run()
    errors = " ".join(e.value for e in at.error)
    assert "entities.jsonl:2" in errors and "name" in errors
    assert catalog.list_graphs(empty_env) == []
