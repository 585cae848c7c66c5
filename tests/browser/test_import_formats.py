"""Bring your own graph in Debian chromium: upload a zip of each format on the Data page, follow "Open in Search",
search the new graph (documents included: a PDF, an EPUB, Markdown and text, built offline), then jump from one of
its entities to its communities and open one (report + subgraph).

One case per format (`CASES`); a format is added by appending a case. Fixtures are small on purpose: the server
embeds each upload."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from retrieval.graph import catalog
from retrieval.graph.communities import CommunityIndex, load_extras
from tests.browser.conftest import ALL_GRAPHS_DRAWN, ask, graph_upload
from tests.browser.test_search_page import FACT_TABLE, egress
from tests.conftest import DULCE, ROOT
from tests.data.documents.make_docs import write_library
from tests.data.graphrag_book import write_graphrag_book

pytestmark = pytest.mark.browser
DATA = ROOT / "tests" / "data"
# a button with this text is drawn enabled (queried afresh: a rerun replaces the element)
ENABLED = "t => [...document.querySelectorAll('button')].some(b => b.innerText.trim().endsWith(t) && !b.disabled)"


def zip_folder(folder: Path, out: Path) -> Path:
    with zipfile.ZipFile(out, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, Path(out.stem) / path.relative_to(folder))
    return out


def graphrag_book(dst: Path) -> Path:
    """A novel as GraphRAG indexes one (tests/data/graphrag_book.py): the whole Gutenberg-style text in
    documents.text with chapters as heading lines, text units cut across them and prefixed `title: dulce.txt.`,
    and the shared index's entities, relationships, communities with reports and claims."""
    if not DULCE.is_dir():
        pytest.skip(f"shared GraphRAG index not found at {DULCE}")
    return write_graphrag_book(DULCE, dst)


@dataclass(frozen=True)
class Case:
    make: Callable[[Path], Path]  # writes the folder to zip into the given path, returns it
    question: str


CASES = {
    "graphrag": Case(graphrag_book, "What is Alex Mercer's role in Operation: Dulce?"),
    "lightrag": Case(lambda d: DATA / "lightrag" / "workdir", "What did Ada Lovelace write?"),
    "graphml": Case(lambda d: DATA / "graphml" / "gephi.graphml", "Who pursues Valjean?"),
    "csv": Case(lambda d: DATA / "csv" / "movies", "Who acted in The Matrix?"),
    # a PDF (fpdf2), an EPUB (EbookLib), Markdown and text; no key here, so the offline extractor builds it
    "documents": Case(write_library, "Who did Marta Silva save near Cabo Frio?"),
}


def make_zip(case: Case, fmt: str, tmp: Path) -> Path:
    made = case.make(tmp / fmt)
    if made.is_file():  # a single file (GraphML): zip its folder's copy of just that file
        folder = tmp / f"{fmt}-src"
        folder.mkdir()
        (folder / made.name).write_bytes(made.read_bytes())
        made = folder
    return zip_folder(made, tmp / f"byog-{fmt}.zip")


@pytest.mark.parametrize("fmt", list(CASES))
def test_upload_open_in_search_and_open_a_community(
    page: Any, app_url: str, app_data_dir: Path, tmp_path: Path, artifacts: Path, fmt: str
) -> None:
    case = CASES[fmt]
    archive = make_zip(case, fmt, tmp_path)
    name = f"byog-{fmt}"
    page.goto(app_url + "/data")
    page.get_by_text("Import a graph").wait_for(timeout=90_000)
    graph_upload(page).set_input_files(str(archive))
    page.get_by_text(archive.name).first.wait_for(timeout=60_000)
    # the app has the upload once it proposes its name (the zip's stem); only then pick the format
    page.wait_for_function("n => [...document.querySelectorAll('input')].some(i => i.value === n)", arg=name,
                           timeout=60_000)
    page.get_by_test_id("stButtonGroup").get_by_text(fmt, exact=True).click()
    page.wait_for_function(ENABLED, arg="Import", timeout=60_000)
    page.get_by_role("button", name="Import", exact=True).click()  # not "Import query set"
    link = page.get_by_role("link", name=f"Open {name} in Search")
    link.wait_for(timeout=120_000)
    if fmt == "lightrag":  # one document has only LightRAG's placeholder for a file: said once, on import
        notes = page.get_by_text("without a title", exact=False)
        assert notes.count() == 1 and "doc-notes" in notes.first.inner_text(), "item 4: untitled books not said once"
    assert page.get_by_test_id("stDataFrame").first.is_visible()  # the graph list, now holding the new graph
    assert name in catalog.list_graphs(app_data_dir)
    link.click()
    # Search is the default page: its URL is the app's root (or /search), the new graph named in ?graph=
    page.wait_for_function("n => new URLSearchParams(location.search).get('graph') === n", arg=name, timeout=30_000)

    # the first view of a new graph opens it (stores, CSR, warm-up search) before the query box appears
    page.get_by_placeholder("Ask a multi-hop question", exact=False).wait_for(timeout=120_000)
    if fmt == "graphrag":  # the sample question comes from the novel's substance, not its Gutenberg licence
        command = page.get_by_test_id("stCode").first.inner_text()
        assert "ALEX MERCER" in command and "GUTENBERG" not in command, f"item 4: sample question {command!r}"
    ask(page, page.url, case.question)
    page.locator(FACT_TABLE).first.wait_for(state="visible", timeout=60_000)
    if fmt == "graphrag":  # sources read book › chapter, the chapters found in the document's heading lines
        where = " ".join(page.locator(FACT_TABLE + " .row .where").all_inner_texts())
        assert "dulce.txt › CHAPTER I" in where, f"item 4: no chapters in the sources: {where[:300]!r}"
        page.get_by_role("tab", name="Sources").click()
        chunk = page.locator('[class*="st-key-sources-"] .kg-grader .row .text').first.inner_text()
        assert not chunk.startswith("title:"), "item 4: the chunk text keeps GraphRAG's metadata line"
        assert any(len(line) > 90 for line in chunk.splitlines()), "item 4: the chunk keeps its hard line wraps"
        page.get_by_role("tab", name="Facts").click()

    index = CommunityIndex.of(load_extras(catalog.resolve(app_data_dir, name).dir))
    entity = index.ranked(0)[0].entity_ids[0]  # a member of the top community: jump from it to its communities
    page.goto(f"{app_url}/communities?graph={name}&entity={entity}")
    first = page.get_by_role("link", name="Level 0").first
    first.wait_for(timeout=60_000)
    first.click()
    page.wait_for_url("**community=*", timeout=30_000)
    page.locator("h4").first.wait_for(timeout=30_000)
    page.wait_for_function(ALL_GRAPHS_DRAWN, timeout=60_000)
    page.screenshot(path=str(artifacts / f"import_{fmt}_community.png"))
    assert page.dialogs == [] and egress(page.requests, app_url) == []
