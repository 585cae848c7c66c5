"""The Map in Debian chromium (software WebGL) on the demo graph: it draws every entity; zoomed out, communities
with their titles; a search opened from Search ("Show on map") lights its seeds and paths; a click opens the
details panel; a double-click opens the entity's neighbourhood in the live view (Paths › Explore)."""

from __future__ import annotations

import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from retrieval.graph import catalog
from retrieval.graph.communities import load_extras
from tests.app.graphs import DEMO_QUESTION
from tests.browser.conftest import FRESH_GRAPH_DRAWN, ask, mark_graphs_stale

pytestmark = pytest.mark.browser

MAP = ".kgm-root"
# the map has drawn what it holds now (its data revision), and no rebuild is pending
MAP_DRAWN = """() => { const r = document.querySelector('.kgm-root');
    return r && r.dataset.kgDrawn && r.dataset.kgDrawn === r.dataset.kgRev && r.dataset.kgMode; }"""
ENTITY_POINT = """i => { const m = document.querySelector('.kgm-root').kgMap;
    const p = m.sigma.graphToViewport({x: m.model.x[i], y: m.model.y[i]});
    const b = m.canvasBox.getBoundingClientRect(); return {x: b.left + p.x, y: b.top + p.y}; }"""


def map_state(page: Any) -> dict[str, Any]:
    return page.evaluate("""() => { const r = document.querySelector('.kgm-root'); const m = r.kgMap;
        const g = m.sigma.getGraph();
        return {...r.dataset, labels: m.labels, lights: m.lights ? {seeds: [...m.lights.seeds],
                path: [...m.lights.path], edges: m.lights.edges} : null,
                nodes: g.nodes(), edgeKeys: g.edges(), names: m.model.names}; }""")


def wait_map(page: Any, timeout_ms: int = 90_000) -> None:
    page.wait_for_function(MAP_DRAWN, timeout=timeout_ms)


def test_the_map_draws_zooms_out_lights_a_search_and_opens_details(page: Any, app_url: str, app_data_dir: Path,
                                                                      artifacts: Path) -> None:
    handle = catalog.resolve(app_data_dir, "demo")
    entities = handle.manifest["counts"]["entities"]
    titles = {c.title for c in load_extras(handle.dir).communities}

    # the whole graph: every entity drawn (the demo fits the budget), with the relations among them
    start = time.perf_counter()
    page.goto(f"{app_url}/map?graph=demo")
    wait_map(page)
    first_ms = (time.perf_counter() - start) * 1000
    state = map_state(page)
    assert state["kgMode"] == "entities" and int(state["kgEntitiesDrawn"]) == entities == int(state["kgEntities"])
    assert sum(1 for k in state["nodes"] if k.startswith("e")) == entities
    assert f"{entities} of {entities} entities drawn" in page.locator(MAP + " .kgv-status").inner_text()
    page.screenshot(path=str(artifacts / "map-demo.png"))

    # zoomed out: the communities, drawn as discs with their titles (the labels actually drawn on the canvas)
    canvas = page.locator(MAP + " .kgm-canvas").bounding_box()
    page.mouse.move(canvas["x"] + canvas["width"] / 2, canvas["y"] + canvas["height"] / 2)
    for _ in range(2):
        page.mouse.wheel(0, 400)
        time.sleep(0.4)
    page.wait_for_function("() => ['c0', 'c1'].includes(document.querySelector('.kgm-root').dataset.kgMode)",
                           timeout=30_000)
    wait_map(page)
    page.wait_for_function("() => document.querySelector('.kgm-root').kgMap.labels.length > 0", timeout=30_000)
    state = map_state(page)
    drawn = [text for text, kind in state["labels"] if kind == "region"]
    assert len(drawn) >= 3 and set(drawn) <= titles, drawn
    assert "Aggregated: " in state["kgStatus"] and "communities" in state["kgStatus"]
    page.screenshot(path=str(artifacts / "map-demo-out.png"))

    # a search on the Search page, then "Show on map": its seeds and traced paths lit on the whole map
    ask(page, f"{app_url}/?{urllib.parse.urlencode({'graph': 'demo'})}", DEMO_QUESTION)
    page.wait_for_function(FRESH_GRAPH_DRAWN, timeout=90_000)
    mark_graphs_stale(page)
    start = time.perf_counter()
    page.get_by_role("link", name="Show on map", exact=False).click()
    page.wait_for_url(lambda url: "/map" in url and "q=" in url, timeout=60_000)
    page.wait_for_function("() => { const r = document.querySelector('.kgm-root'); return r && r.dataset.kgLights; }",
                           timeout=90_000)
    wait_map(page)
    lit_ms = (time.perf_counter() - start) * 1000
    state = map_state(page)
    lights = state["lights"]
    assert lights["seeds"] and lights["path"] and lights["edges"]
    for i in lights["seeds"]:  # every seed drawn, ringed
        assert f"e{i}" in state["nodes"] and f"k{i}" in state["nodes"]
    path_edges = {k for k in state["edgeKeys"] if k.startswith("p")}
    assert path_edges == {f"p{min(a, b)}_{max(a, b)}" for a, b in lights["edges"] if a != b}
    assert "seeds" in state["kgStatus"] and "the rest dimmed" in state["kgStatus"]
    page.screenshot(path=str(artifacts / "map-demo-search.png"))

    # a click on a seed: the live view's details panel, with this search's PPR
    seed = lights["seeds"][0]
    pt = page.evaluate(ENTITY_POINT, seed)
    start = time.perf_counter()
    page.mouse.click(pt["x"], pt["y"])
    panel = page.locator(MAP + " .kgv-panel:not([hidden])")
    panel.wait_for(timeout=30_000)
    click_ms = (time.perf_counter() - start) * 1000
    text = panel.inner_text()
    assert state["names"][seed] in text and "PPR in this search" in text and "Relations (" in text
    assert panel.get_by_role("button", name="Open here").is_visible()

    # a double-click: its neighbourhood in the live view, on Paths' Explore (once the details' run is over: a person
    # reads them first)
    page.get_by_test_id("stStatusWidget").wait_for(state="hidden", timeout=60_000)
    pt = page.evaluate(ENTITY_POINT, seed)
    page.mouse.dblclick(pt["x"], pt["y"])
    page.wait_for_url(lambda url: "/paths" in url and "start=" in url, timeout=60_000)
    page.locator(".kgv-root canvas").first.wait_for(state="visible", timeout=60_000)
    print(f"\nmap of the demo graph ({entities} entities): first map {first_ms:.0f} ms, Show on map -> lit "
          f"{lit_ms:.0f} ms, click -> details {click_ms:.0f} ms")
