"""The imported-graph journey in screenshots (docs/walkthrough.md): a fresh data dir with the demo graph, the shared
GraphRAG index zipped in a temp dir, then in Debian chromium against `streamlit run`:

1. Data: upload the zip, import it as `dulce`, "Open dulce in Search";
2. Search on dulce: a question, its facts with book › chapter sources;
3. the graph: click an entity (the details drawer opens below the graph), double-click it (its neighbours added);
4. grade: an annotator name in the sidebar, a fact graded 3;
5. Communities from the sidebar: the same graph, its top community open.

Every step checks that the graph in use is still `dulce` (URL and sidebar picker) and stops with an error if not.

    .venv/bin/python scripts/walkthrough.py [--out docs/walkthrough] [--data-dir DIR]

Needs /usr/bin/chromium and ../shared/data/graphrag_operation_dulce; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    FRESH_GRAPH_DRAWN,
    RECORD_LONG_TASKS,
    graph_upload,
    mark_graphs_stale,
    node_point,
    settle,
    streamlit_app,
    wait_graph_drawn,
)
from tests.browser.test_import_formats import ENABLED  # noqa: E402
from tests.conftest import DEMO_BUNDLE, DULCE  # noqa: E402

GRAPH = "dulce"
QUESTION = "What is Alex Mercer's role in Operation: Dulce?"
SIZE = {"width": 1440, "height": 900}
FACTS = '[class*="st-key-facts-"] .kg-grader'


def zip_index(folder: Path, out: Path) -> Path:
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.glob("*.parquet")):
            zf.write(path, Path("graphrag_operation_dulce") / path.name)
    return out


def build_demo(data_dir: Path) -> None:
    from retrieval.config import Settings
    from retrieval.embedding import load_embedder
    from retrieval.ingest.build import ingest

    ingest(Settings.from_env(env={}, data_dir=data_dir), DEMO_BUNDLE, fmt="bundle", name="demo",
           embedder=load_embedder(""), progress=False)


def shoot(page: Any, out: Path, name: str) -> None:
    """A small PNG of the viewport: 256 colours (the UI is flat), about a tenth of a true-colour screenshot."""
    from PIL import Image

    image = Image.open(io.BytesIO(page.screenshot())).convert("RGB")
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out / name, optimize=True)
    print(f"  {out / name} ({(out / name).stat().st_size // 1024} kB)")


def same_graph(page: Any, where: str) -> None:
    """The graph in use is still dulce: in the URL and checked in the sidebar's picker."""
    param = page.evaluate("() => new URLSearchParams(location.search).get('graph')")
    picked = page.locator('[data-testid="stSidebar"] [role="radiogroup"] input:checked').evaluate(
        "i => i.closest('label').innerText")
    if param != GRAPH or not picked.startswith(GRAPH):
        raise SystemExit(f"{where}: the graph changed to {param!r} / picker {picked!r}")


def walk(url: str, zipped: Path, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=SIZE)
        context.add_init_script(RECORD_LONG_TASKS)
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.goto(url + "/")
        page.get_by_placeholder("Ask a multi-hop question", exact=False).wait_for()  # the demo graph is open
        settle(page)

        print("1. Data: upload the GraphRAG zip")
        page.get_by_test_id("stSidebar").get_by_role("link", name="Data").click()
        page.get_by_text("Import a graph").wait_for()
        graph_upload(page).set_input_files(str(zipped))
        name = page.get_by_role("textbox", name="Graph name")  # the app has the upload once it proposes a name
        page.wait_for_function("() => [...document.querySelectorAll('input')].some(i => i.value.endsWith('dulce'))")
        name.fill(GRAPH)
        name.press("Enter")
        page.wait_for_function(ENABLED, arg="Import")
        page.get_by_role("button", name="Import", exact=True).click()
        link = page.get_by_role("link", name=f"Open {GRAPH} in Search")
        link.wait_for()
        settle(page)
        shoot(page, out, "1-import.png")

        print("2. Search on the imported graph: facts with book › chapter")
        link.click()
        box = page.get_by_placeholder("Ask a multi-hop question", exact=False)
        box.wait_for()
        settle(page)
        box.fill(QUESTION)
        mark_graphs_stale(page)  # the schema's graph is replaced by the answer's
        box.press("Enter")
        page.locator(FACTS + " .row").first.wait_for()
        page.wait_for_function(FRESH_GRAPH_DRAWN)
        settle(page)
        same_graph(page, "Search")
        where = " ".join(page.locator(FACTS + " .row .where").all_inner_texts())
        if "dulce.txt › Chapter" not in where:
            raise SystemExit(f"Search: no book › chapter sources: {where[:200]!r}")
        shoot(page, out, "2-search.png")

        print("3. Click an entity, then double-click it: the drawer below the graph, its neighbours added")
        alex = page.evaluate("""() => { const n = document.querySelector('.kgv-root').kgNetwork;
            return n.body.data.nodes.get().find(x => x.label === 'ALEX MERCER').id; }""")
        pt = node_point(page, alex)
        page.mouse.click(pt["x"], pt["y"])
        page.locator(".kgv-root .kgv-panel:not([hidden])").wait_for()
        rev = page.evaluate("() => document.querySelector('.kgv-root').dataset.kgRev")
        pt = node_point(page, alex)
        page.mouse.dblclick(pt["x"], pt["y"])
        page.wait_for_function("""r => { const d = document.querySelector('.kgv-root').dataset;
            return d.kgRev !== r && d.kgDrawn === d.kgRev; }""", arg=rev)
        settle(page)
        page.locator(".kgv-root").scroll_into_view_if_needed()
        shoot(page, out, "3-expand.png")

        print("4. Grade: an annotator name, a fact graded 3")
        annotator = page.get_by_role("textbox", name="Annotator")
        annotator.fill("ana")
        annotator.press("Enter")
        page.wait_for_function("() => sessionStorage.getItem('kglens.annotator') === 'ana'")
        first = page.locator(FACTS + " .row").first
        first.scroll_into_view_if_needed()
        first.locator('button[data-grade="3"]').click()
        page.locator(FACTS + '[data-pending="0"]').wait_for()
        page.locator(FACTS + " .status").get_by_text("grading as ana").wait_for()
        same_graph(page, "grading")
        page.evaluate("() => window.scrollTo(0, 0)")
        shoot(page, out, "4-grade.png")

        print("5. Communities, from the sidebar: the same graph")
        page.get_by_test_id("stSidebar").get_by_role("link", name="Communities").click()
        page.locator("h4").first.wait_for()
        wait_graph_drawn(page)
        settle(page)
        same_graph(page, "Communities")
        shoot(page, out, "5-communities.png")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "walkthrough")
    parser.add_argument("--data-dir", type=Path, help="a data dir with the demo graph (default: built in a temp dir)")
    args = parser.parse_args()
    if not DULCE.is_dir():
        raise SystemExit(f"the shared GraphRAG index is not at {DULCE}")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kg-walkthrough-") as tmp:
        data_dir = args.data_dir or Path(tmp) / "kg"
        if args.data_dir is None:
            print("building the demo graph …")
            build_demo(data_dir)
        zipped = zip_index(DULCE, Path(tmp) / "graphrag_operation_dulce.zip")
        with streamlit_app(data_dir, Path(tmp) / "server.log") as url:
            try:
                walk(url, zipped, args.out)
            except Exception:
                print((Path(tmp) / "server.log").read_text(errors="replace")[-3000:])
                raise


if __name__ == "__main__":
    main()
