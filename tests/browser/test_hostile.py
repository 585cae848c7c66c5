"""The hostile corpus in Debian chromium: with its graph active, tour Search (with its Answer tab), Paths, Graph
Memory (after saving a hostile subgraph), Rerank Inspector, Query, Communities and Data; hover the graph's nodes
and work the live graph (details panel, expansion, context menu, find, filter) on payload nodes. No dialog opens,
no request leaves 127.0.0.1, no payload script runs (window.__pwned stays unset in every frame), no payload
becomes an element, and payloads show as literal text."""

from __future__ import annotations

import time
import urllib.parse
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from retrieval.embedding import Embedder
from retrieval.graph import catalog
from tests.browser.conftest import FRESH_GRAPH_DRAWN, mark_graphs_stale, settle, wait_graph_drawn
from tests.browser.test_search_page import FACT_TABLE, click_fact_row
from tests.data.hostile.graph import GRAPH, copy_graph, hostile_data_dir
from tests.data.hostile.make_bundle import EVIL_HOST, HUB_ID, PWNED, QUERY, Payload, accepted, load_payloads
from ui_text import short

pytestmark = pytest.mark.browser

LOCAL_HOSTS = {"127.0.0.1", "localhost"}
IN_PAGE_SCHEMES = ("data:", "blob:", "about:")
# Elements a payload would create if it were parsed as markup (Streamlit's own DOM has none of these).
INJECTED = (
    "img[src='x'], img[src*='evil'], [onerror], [onload], [onfocus], [onmouseover], [ontoggle], "
    "a[href^='javascript' i], base[href], meta[http-equiv], link[href*='evil'], [style*='evil'], "
    "iframe[srcdoc]:not([data-testid='stIFrame']), object[data*='evil']"
)
FRAME_STATE = f"""sel => ({{
    pwned: typeof window.{PWNED} === 'undefined' ? null : String(window.{PWNED}),
    title: document.title,
    injected: [...document.querySelectorAll(sel)].map(e => e.outerHTML.slice(0, 120)),
    text: document.body ? document.body.innerText : '',
}})"""
HOVER_NODES = """() => {
    const r = document.querySelector('.kgv-root'); const net = r.kgNetwork;
    const b = r.querySelector('.kgv-canvas').getBoundingClientRect(); const pos = net.getPositions();
    return Object.keys(pos).slice(0, 8).map(id => { const p = net.canvasToDOM(pos[id]);
        return {id, x: b.left + p.x, y: b.top + p.y}; });
}"""


def label(p: Payload) -> str:
    """How the Paths pickers name an entity (and keep it in the URL): `name (type)`, both shortened."""
    return f"{short(p.value, 80)} ({short(p.value, 30)})"


def literal_sample(payloads: list[Payload]) -> list[Payload]:
    """Payloads whose text a browser shows as typed (single spaces, printable ASCII), to look for in the page."""
    return [p for p in payloads if p.value.isascii() and p.value.isprintable() and "  " not in p.value
            and p.value == p.value.strip() and len(p.value) <= 80]


@pytest.fixture(scope="module")
def hostile_graph(app_data_dir: Path, tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> str:
    """The corpus graph added to the browser server's data dir (the server lists graphs on every run)."""
    if GRAPH not in catalog.list_graphs(app_data_dir):
        src, _ = hostile_data_dir(tmp_path_factory.mktemp("hostile"), embedder)
        copy_graph(src, app_data_dir)
    return GRAPH


class Tour:
    """What the tour saw: per-frame script state, injected elements, requests, dialogs and page text."""

    def __init__(self, page: Any, app_url: str) -> None:
        self.page = page
        self.app_url = app_url
        self.pwned: list[str] = []
        self.injected: list[str] = []
        self.text: list[str] = []
        self.visits: list[str] = []

    def check(self, where: str) -> None:
        time.sleep(0.8)  # give any injected handler (onerror, onload, autofocus, meta refresh) the chance to fire
        for frame in self.page.frames:
            try:
                state = frame.evaluate(FRAME_STATE, INJECTED)
            except Exception as exc:  # noqa: BLE001 - a frame torn down by a rerun has nothing left to check
                if "detached" in str(exc) or "destroyed" in str(exc):
                    continue
                raise
            if state["pwned"] is not None:
                self.pwned.append(f"{where}: {state['pwned']}")
            self.injected += [f"{where}: {html}" for html in state["injected"]]
            self.text.append(state["text"])
            if PWNED in state["title"] or EVIL_HOST in state["title"] or "<" in state["title"]:
                self.pwned.append(f"{where}: document.title set to {state['title']!r}")
        self.visits.append(where)

    def egress(self) -> list[str]:
        return [u for u in self.page.requests
                if not u.startswith(IN_PAGE_SCHEMES) and urlsplit(u).hostname not in LOCAL_HOSTS]

    def hover_graph(self) -> int:
        """Move the mouse over the canvas's nodes, so their tooltips (built as text from the names) render."""
        points = self.page.evaluate(HOVER_NODES)
        for pt in points:
            self.page.mouse.move(pt["x"], pt["y"])
            time.sleep(0.15)
            self.text.append(self.page.locator(".kgv-tip").inner_text())
        return len(points)

    def work_graph(self, where: str) -> None:
        """Use the live graph on payload nodes: click one (details panel with sources), double-click it (its
        neighbours), open its context menu, find one by name and toggle a type filter; check after each."""
        points = self.page.evaluate(HOVER_NODES)
        assert points, "no node drawn"
        pt = points[0]
        root = self.page.locator(".kgv-root")
        self.page.mouse.click(pt["x"], pt["y"])
        self.page.locator(".kgv-panel:not([hidden])").wait_for(timeout=30_000)
        self.page.wait_for_function("() => { const r = document.querySelector('.kgv-root');"
                                    " return r.dataset.kgDrawn === r.dataset.kgRev; }")
        self.check(f"{where}/details")
        pt = self.page.evaluate(HOVER_NODES)[0]
        self.page.mouse.dblclick(pt["x"], pt["y"])
        time.sleep(1.0)
        pt = self.page.evaluate(HOVER_NODES)[0]
        self.page.mouse.click(pt["x"], pt["y"], button="right")
        self.page.locator(".kgv-menu:not([hidden])").wait_for(timeout=10_000)
        self.check(f"{where}/menu")
        self.page.keyboard.press("Escape")
        root.locator(".kgv-find").fill(self.page.evaluate("() => document.querySelector('.kgv-root option').value"))
        root.locator(".kgv-find").press("Enter")
        root.get_by_role("button", name="Filter").click()
        root.locator(".kgv-filter input[type=checkbox]").first.uncheck()
        self.check(f"{where}/find+filter")
        root.get_by_role("button", name="Filter").click()


def test_tour_every_page_on_the_hostile_graph(page: Any, app_url: str, hostile_graph: str) -> None:
    payloads = load_payloads()
    good = accepted(payloads)
    by_id = {p.id: p for p in good}
    tour = Tour(page, app_url)
    start = time.perf_counter()

    # Search: the hub's question reaches the payload entities; pick a fact, read its sources and the trace
    page.goto(app_url + "/")
    page.get_by_test_id("stSidebarNav").get_by_text("Rerank Inspector").wait_for(timeout=60_000)
    page.goto(f"{app_url}/?{urllib.parse.urlencode({'q': QUERY, 'graph': hostile_graph})}")
    page.locator(FACT_TABLE).first.wait_for(state="visible", timeout=90_000)
    wait_graph_drawn(page)
    hovered = tour.hover_graph()
    tour.check("search")
    tour.work_graph("search")
    click_fact_row(page, 0)
    page.locator(".st-key-picked-fact").wait_for(state="visible", timeout=30_000)
    wait_graph_drawn(page)
    for tab in ("Sources", "Trace"):
        page.get_by_role("tab", name=tab).click()
        tour.check(f"search/{tab}")
    page.get_by_role("tab", name="Answer").click()  # the answer quotes the payloads' sentences with citations
    page.get_by_role("button", name="Show an extractive answer").click()
    page.locator(".kg-answer").wait_for(state="visible", timeout=60_000)
    tour.check("search/Answer")

    # Paths: why are two payload entities connected (through Eve); then save what is shown to Graph Memory
    a, b = by_id["html-img-onerror"], by_id["js-script-close"]
    params = {"graph": hostile_graph, "mode": "Why are these connected?", "a": label(a), "b": label(b)}
    page.goto(f"{app_url}/paths?{urllib.parse.urlencode(params)}")
    wait_graph_drawn(page, timeout_ms=90_000)
    tour.hover_graph()
    tour.check("paths")
    tour.work_graph("paths")
    tenant = f"hostile{int(time.time())}"
    page.get_by_role("button", name="Export").click()
    pop = page.get_by_test_id("stPopoverBody")
    pop.get_by_role("textbox", name="Tenant").fill(tenant)
    pop.get_by_role("textbox", name="Namespace").fill("corpus")
    pop.get_by_role("button", name="Save to Graph Memory").click()
    saved = page.locator(".st-key-why-export-saved-box")
    saved.wait_for(state="visible", timeout=30_000)
    page.keyboard.press("Escape")
    tour.check("paths/saved")

    # Graph Memory: the saved hostile subgraph, opened from the link, drawn, its contents listed
    mark_graphs_stale(page)  # the link navigates inside the app: the Paths graph stays until the page replaces it
    saved.get_by_role("link", name="Open in Graph Memory").click()
    page.wait_for_url(lambda url: tenant in url, timeout=60_000)
    page.wait_for_function(FRESH_GRAPH_DRAWN, timeout=60_000)
    settle(page)
    assert tenant in page.url
    tour.hover_graph()
    page.get_by_role("tab", name="Contents").click()
    tour.check("memory")

    # Rerank Inspector: the pool of the hub's question, every reranker's order and the label grid
    page.goto(f"{app_url}/rerank?{urllib.parse.urlencode({'q': QUERY, 'graph': hostile_graph})}")
    page.get_by_text("retrievals: ").first.wait_for(timeout=90_000)
    tour.check("rerank")

    # Query: the payload entities and relations as rows and as a graph, from the read-only console
    page.goto(f"{app_url}/query?{urllib.parse.urlencode({'graph': hostile_graph})}")
    page.get_by_label("Cypher (one read statement)").fill("MATCH (a:Entity)-[r]->(b:Entity) RETURN a, r, b LIMIT 40")
    page.get_by_role("button", name="Run").click()
    wait_graph_drawn(page, timeout_ms=60_000)
    tour.hover_graph()
    tour.check("query")

    # Communities (computed at ingest): the hub's communities and claims, one opened beside its subgraph; the
    # titles and summaries name payload entities
    params = {"graph": hostile_graph, "entity": HUB_ID, "community": "0"}
    page.goto(f"{app_url}/communities?{urllib.parse.urlencode(params)}")
    page.locator("h4").first.wait_for(timeout=90_000)
    wait_graph_drawn(page, timeout_ms=60_000)
    tour.hover_graph()
    tour.check("communities")

    # Data: the graph's statistics and the graphs of the data directory
    page.goto(f"{app_url}/data?{urllib.parse.urlencode({'graph': hostile_graph})}")
    page.get_by_text("Graphs in this data directory").wait_for(timeout=60_000)
    tour.check("data")
    seconds = time.perf_counter() - start

    text = "\n".join(tour.text)
    sample = literal_sample(good)
    shown = [p.id for p in sample if p.value in text]
    executed = sorted(set(tour.pwned) | set(page.dialogs) | set(tour.injected) | set(tour.egress()))
    print(f"\nhostile tour: {len(payloads)} payloads tried ({len(good)} in the graph), pages "
          f"{', '.join(tour.visits)}; {hovered} nodes hovered on Search; {len(page.requests)} requests; "
          f"{len(shown)} of {len(sample)} literal-text payloads seen as text ({', '.join(shown)}); "
          f"executed: {len(executed)}; {seconds:.1f} s")
    assert tour.pwned == [], tour.pwned
    assert page.dialogs == [], page.dialogs
    assert tour.injected == [], tour.injected[:5]
    assert tour.egress() == [], tour.egress()[:5]
    assert not any(EVIL_HOST in u for u in page.requests)
    assert executed == []
    for must in ("html-img-onerror", "js-script-close"):  # the two endpoints of the Paths question
        assert must in shown, f"{by_id[must].value!r} is not shown literally"
    assert len(shown) >= 8, shown

    # control: the same payload parsed as markup on purpose is caught by the probes above
    page.evaluate("html => document.body.insertAdjacentHTML('beforeend', html)", by_id["html-img-onerror"].value)
    control = Tour(page, app_url)
    control.check("control")
    assert control.pwned == ["control: html-img"] and control.injected and page.dialogs == ["html-img"]
