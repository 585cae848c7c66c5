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

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from retrieval.graph import catalog
from retrieval.graph.communities import CommunityIndex, load_extras
from tests.browser.conftest import ALL_GRAPHS_DRAWN, ask
from tests.browser.test_search_page import FACT_TABLE, egress
from tests.conftest import DULCE, ROOT
from tests.data.documents.make_docs import write_library

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


def mini_graphrag(dst: Path) -> Path:
    """The shared GraphRAG index cut to its first text unit and that unit's six best-connected entities, with the
    relationships, communities (and reports) and claims among them: a real index, small enough to embed quickly."""
    if not DULCE.is_dir():
        pytest.skip(f"shared GraphRAG index not found at {DULCE}")
    dst.mkdir(parents=True)

    def rows(name: str) -> list[dict[str, Any]]:
        return pq.read_table(DULCE / f"{name}.parquet").to_pylist()

    def save(name: str, items: list[dict[str, Any]]) -> None:
        pq.write_table(pa.Table.from_pylist(items), dst / f"{name}.parquet")

    unit = rows("text_units")[0]
    save("text_units", [unit])
    save("documents", [{**d, "text_unit_ids": [unit["id"]]} for d in rows("documents")])
    ents = sorted((e for e in rows("entities") if unit["id"] in e["text_unit_ids"]), key=lambda e: -e["degree"])[:6]
    save("entities", ents)
    titles, ids = {e["title"] for e in ents}, {e["id"] for e in ents}
    rels = [r for r in rows("relationships") if r["source"] in titles and r["target"] in titles]
    save("relationships", rels)
    comms = [{**c, "entity_ids": [e for e in c["entity_ids"] if e in ids]} for c in rows("communities")]
    kept = {c["community"] for c in comms if c["entity_ids"]}
    save("communities", [c for c in comms if c["community"] in kept])
    save("community_reports", [r for r in rows("community_reports") if r["community"] in kept])
    save("covariates", [c for c in rows("covariates") if c["subject_id"] in titles])
    return dst


@dataclass(frozen=True)
class Case:
    make: Callable[[Path], Path]  # writes the folder to zip into the given path, returns it
    question: str


CASES = {
    "graphrag": Case(mini_graphrag, "What is Alex Mercer's role in Operation: Dulce?"),
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
    page.locator('[data-testid="stFileUploaderDropzoneInput"][accept*=".zip"]').set_input_files(str(archive))
    page.get_by_text(archive.name).first.wait_for(timeout=60_000)
    # the app has the upload once it proposes its name (the zip's stem); only then pick the format
    page.wait_for_function("n => [...document.querySelectorAll('input')].some(i => i.value === n)", arg=name,
                           timeout=60_000)
    page.get_by_test_id("stButtonGroup").get_by_text(fmt, exact=True).click()
    page.wait_for_function(ENABLED, arg="Import", timeout=60_000)
    page.get_by_role("button", name="Import", exact=True).click()  # not "Import query set"
    link = page.get_by_role("link", name=f"Open {name} in Search")
    link.wait_for(timeout=120_000)
    assert page.get_by_test_id("stDataFrame").first.is_visible()  # the graph list, now holding the new graph
    assert name in catalog.list_graphs(app_data_dir)
    link.click()
    # Search is the default page: its URL is the app's root (or /search), the new graph named in ?graph=
    page.wait_for_function("n => new URLSearchParams(location.search).get('graph') === n", arg=name, timeout=30_000)

    # the first view of a new graph opens it (stores, CSR, warm-up search) before the query box appears
    page.get_by_placeholder("Ask a multi-hop question", exact=False).wait_for(timeout=120_000)
    ask(page, page.url, case.question)
    page.locator(FACT_TABLE).first.wait_for(state="visible", timeout=60_000)

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
