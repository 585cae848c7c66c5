"""The live graph view worked by hand in Debian chromium on the demo graph: click a node (details panel with its
sources), double-click it (its neighbours appear, "N of M"), find a node by name, filter a type, full screen,
export a PNG; then the Rerank link carries the query."""

from __future__ import annotations

import io
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.app.graphs import DEMO_QUESTION
from tests.browser.conftest import (
    FRESH_GRAPH_DRAWN,
    graph_data,
    mark_graphs_stale,
    node_point,
    settle,
    wait_graph_drawn,
)
from tests.browser.test_search_page import egress

pytestmark = pytest.mark.browser
NODE = "brand-awareness"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def wait_rev_drawn(page: Any, before: str) -> None:
    """New data has arrived (another revision than `before`) and is drawn."""
    page.wait_for_function(
        """rev => { const r = document.querySelector('.kgv-root');
                    return r.dataset.kgRev !== rev && r.dataset.kgDrawn === r.dataset.kgRev; }""",
        arg=before, timeout=30_000)


def test_click_expand_find_filter_full_screen_and_png_on_the_search_graph(
    page: Any, app_url: str, artifacts: Path
) -> None:
    page.goto(f"{app_url}/?{urllib.parse.urlencode({'q': DEMO_QUESTION})}")
    wait_graph_drawn(page, timeout_ms=90_000)
    root = page.locator(".kgv-root")
    shown = int(graph_data(page)["kgShown"])

    pt = node_point(page, NODE)
    start = time.perf_counter()
    page.mouse.click(pt["x"], pt["y"])
    panel = root.locator(".kgv-panel:not([hidden])")
    panel.wait_for(timeout=30_000)
    click_ms = (time.perf_counter() - start) * 1000
    text = panel.inner_text()
    assert "brand awareness" in text and "PPR in this search" in text and "Relations (" in text
    sources = panel.locator(".kgv-src summary")
    assert sources.count() >= 1 and "›" in sources.first.inner_text()  # book › chapter
    count = panel.locator(".kgv-count").inner_text()
    assert "neighbours shown" in count

    rev = graph_data(page)["kgRev"]
    pt = node_point(page, NODE)
    start = time.perf_counter()
    page.mouse.dblclick(pt["x"], pt["y"])
    wait_rev_drawn(page, rev)
    expand_ms = (time.perf_counter() - start) * 1000
    page.wait_for_function(  # the panel's data comes by its own companion component, maybe a frame later
        "before => document.querySelector('.kgv-root .kgv-panel:not([hidden]) .kgv-count').textContent !== before",
        arg=count, timeout=30_000)
    grown = int(graph_data(page)["kgShown"])
    n, m = (int(x) for x in panel.locator(".kgv-count").inner_text().split(" neighbours")[0].split(" of "))
    assert grown > shown and n == m > 0, (shown, grown, n, m)
    assert "added by 1 expansion" in root.locator(".kgv-status").inner_text()
    assert not root.get_by_role("button", name="↶ Back").is_disabled()

    find = root.locator(".kgv-find")
    find.fill("conversion rate")
    find.press("Enter")
    page.wait_for_function("() => document.querySelector('.kgv-root').dataset.kgFound === 'conversion-rate'")
    panel.locator(".kgv-name", has_text="conversion rate").wait_for(timeout=30_000)

    root.get_by_role("button", name="Filter").click()
    metric = root.locator(".kgv-ftypes label", has_text="metric").locator("input")
    metric.uncheck()
    filtered = int(graph_data(page)["kgShown"])
    assert filtered < grown and "hidden by the filter" in root.locator(".kgv-status").inner_text()
    metric.check()
    assert int(graph_data(page)["kgShown"]) == grown
    root.get_by_role("button", name="Filter").click()

    root.get_by_role("button", name="Full screen").click()
    box = root.bounding_box()
    assert box is not None and box["width"] >= 1600 and box["height"] >= 1000
    page.keyboard.press("Escape")
    assert root.bounding_box()["height"] < 1000  # type: ignore[index]

    with page.expect_download() as download:
        root.get_by_role("button", name="PNG").click()
    png = download.value.path().read_bytes()
    assert png.startswith(PNG_SIGNATURE)
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.size[0] > 100 and image.size[1] > 100
    (artifacts / "graph_view.png").write_bytes(png)
    page.screenshot(path=str(artifacts / "graph_instrument.png"))
    print(f"\nclick->details panel {click_ms:.0f} ms; double-click->neighbours drawn {expand_ms:.0f} ms "
          f"({shown} -> {grown} nodes, {n} of {m} neighbours)")

    page.get_by_role("link", name="Inspect the reranking of this query").click()
    page.get_by_text("retrievals: ").first.wait_for(timeout=90_000)
    assert page.get_by_role("textbox", name="Query").input_value() == DEMO_QUESTION
    assert "graph=demo" in page.url

    page.goto(f"{app_url}/?{urllib.parse.urlencode({'q': DEMO_QUESTION})}")  # from a node to its communities
    wait_graph_drawn(page, timeout_ms=90_000)
    pt = node_point(page, NODE)
    page.mouse.click(pt["x"], pt["y"])
    panel = page.locator(".kgv-root .kgv-panel:not([hidden])")
    mark_graphs_stale(page)  # the Search graph (which holds the node too) stays until the Communities page replaces it
    panel.get_by_role("button", name="Communities").click()
    page.wait_for_url(lambda url: "/communities?" in url and f"entity={NODE}" in url and "community=" in url,
                      timeout=60_000)
    page.get_by_text("brand awareness").first.wait_for(timeout=60_000)
    page.wait_for_function(FRESH_GRAPH_DRAWN, timeout=60_000)
    settle(page)
    held = "id => !!document.querySelector('.kgv-root').kgNetwork.body.data.nodes.get(id)"
    assert page.evaluate(held, NODE), "the community's subgraph holds the entity"
    assert page.dialogs == [] and egress(page.requests, app_url) == []
