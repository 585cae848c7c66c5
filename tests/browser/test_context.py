"""Never lose the analyst's context (issue 22), in Debian chromium: the graph, the annotator, the values of a link,
the direction of a fact, a type's colour and the graph's room stay as the analyst left them; an unknown name is a
choice, not a swap; a missing capability is said once; the smaller frictions are gone.

Each test walks several items of the issue; every check names its item, and the checks of a walk are collected
(`Checks`) so one run reports every item that does not hold, not only the first."""

from __future__ import annotations

import re
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect
from streamlit.proto.BackMsg_pb2 import BackMsg

from retrieval.evaluation.labels import LabelStore
from retrieval.evaluation.querysets import import_queries
from tests.app.graphs import DEMO_QUESTION, HOSTILE_GRAPH
from tests.browser.conftest import (
    FRESH_GRAPH_DRAWN,
    VIEWPORT,
    graph_data,
    mark_graphs_stale,
    node_point,
    settle,
    streamlit_app,
    wait_graph_drawn,
)
from tests.browser.test_search_page import FACT_TABLE, egress

pytestmark = pytest.mark.browser
SIDEBAR = '[data-testid="stSidebar"]'
QUERY_BOX = "Ask a multi-hop question"
NOTICE = '[data-testid="stAlert"]'
LEGEND = """k => { const r = document.querySelector(`.st-key-${k} .kgv-root`) || document.querySelector('.kgv-root');
    return Object.fromEntries([...r.querySelectorAll('.kgv-legend .kgv-row:first-child .kgv-it')]
        .filter(it => it.querySelector('.kgv-sw'))
        .map(it => [it.textContent.trim(), it.querySelector('.kgv-sw').style.background])); }"""
CANVAS_BOX = """() => { const b = document.querySelector('.kgv-root .kgv-canvas').getBoundingClientRect();
    return {x: b.left, y: b.top, width: b.width, height: b.height}; }"""


class Checks:
    """Soft checks: each failure is recorded with its item, and `done` fails the test listing all of them."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def __call__(self, ok: object, what: str) -> bool:
        if not ok:
            self.failed.append(what)
        return bool(ok)

    def done(self) -> None:
        assert not self.failed, "\n".join(self.failed)


def params(page: Any) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlparse(page.url).query))


def open_page(page: Any, url: str, ready: str = "stMain") -> None:
    page.goto(url)
    page.get_by_test_id(ready).wait_for(timeout=90_000)
    settle(page)


def visible(locator: Any, timeout_ms: int = 10_000) -> bool:
    """`locator` shows within the timeout (a popover opens with an animation)."""
    try:
        locator.first.wait_for(state="visible", timeout=timeout_ms)
    except PlaywrightTimeout:
        return False
    return True


def notices(page: Any) -> list[str]:
    return [t for t in page.locator(NOTICE).all_inner_texts() if t.strip()]


def session_annotator(page: Any) -> str | None:
    return page.evaluate("() => sessionStorage.getItem('kglens.annotator')")  # type: ignore[no-any-return]


def close_panel(page: Any) -> None:
    """Close the graph's details panel if it is open (the expansion's double-click opened it)."""
    close = page.locator(".kgv-root .kgv-panel:not([hidden]) .kgv-close")
    if close.count():
        close.first.click()
        page.locator(".kgv-root .kgv-panel").first.wait_for(state="hidden", timeout=10_000)
        time.sleep(0.3)


def right_click_menu(page: Any, node: str, item: str) -> None:
    pt = node_point(page, node)
    page.mouse.click(pt["x"], pt["y"], button="right")
    page.locator(".kgv-menu:not([hidden])").get_by_role("button", name=item).click()


def test_the_graph_the_annotator_and_a_links_values_stay_as_the_analyst_left_them(page: Any, app_url: str) -> None:
    check = Checks()
    # item 1: the graph chosen in the link follows the analyst through the sidebar's links and a reload
    open_page(page, f"{app_url}/?graph={HOSTILE_GRAPH}")
    page.locator(SIDEBAR).get_by_role("link", name="Paths").click()
    page.wait_for_url("**/paths**", timeout=30_000)
    page.get_by_placeholder("Type to search", exact=False).first.wait_for(timeout=60_000)
    check(params(page).get("graph") == HOSTILE_GRAPH, f"item 1: Paths from the sidebar dropped the graph: {page.url}")
    check(page.get_by_placeholder("Type to search 2 entities", exact=False).count(),
          "item 1: Paths opened on another graph than the hostile one chosen")
    page.reload()
    page.get_by_placeholder("Type to search", exact=False).first.wait_for(timeout=60_000)
    check(params(page).get("graph") == HOSTILE_GRAPH, f"item 1: a reload lost the graph: {page.url}")
    picker = page.locator(SIDEBAR).get_by_role("radiogroup")
    if check(picker.count() == 1, "item 1: no graph picker in the sidebar"):
        options = picker.first.inner_text()
        check("demo" in options and HOSTILE_GRAPH in options and "248 entities" in options,
              f"item 1: the picker does not list every graph with its counts: {options!r}")
        picker.first.get_by_text("demo", exact=True).click()  # one click
        page.get_by_placeholder("Type to search 248 entities", exact=False).first.wait_for(timeout=60_000)
        check(params(page).get("graph") == "demo", f"item 1: switching is not in the URL: {page.url}")

    # item 8: every bound widget's bad value is named, and still is once the page has settled in a real browser
    bad = {"q": DEMO_QUESTION, "graph": "demo", "damping": "3", "max_results": "999", "nodes": "abc"}
    open_page(page, f"{app_url}/?{urllib.parse.urlencode(bad)}")
    wait_graph_drawn(page, timeout_ms=90_000)
    settle(page)
    time.sleep(1.5)  # the browser's own reruns (the annotator memory, the graph view) have come and gone
    shown = " ".join(notices(page))
    for word in ("damping=3", "max_results=999", "nodes=abc"):
        check(word in shown, f"item 8: Search does not name {word} once the page settled: {shown[:300]!r}")
    for path, word in (("/rerank?q=price+elasticity&alpha=7", "alpha=7"), ("/paths?mode=nope", "mode=nope")):
        open_page(page, app_url + path)
        time.sleep(1.5)
        shown = " ".join(notices(page))
        check(word in shown, f"item 8: {path} does not name {word} once settled: {shown[:300]!r}")

    # item 2: the annotator survives a page change made by the graph (right-click → Use as path end) and a reload
    open_page(page, f"{app_url}/?{urllib.parse.urlencode({'q': DEMO_QUESTION})}")
    wait_graph_drawn(page, timeout_ms=90_000)
    box = page.get_by_role("textbox", name="Annotator")
    box.fill("kim")
    box.press("Enter")
    page.wait_for_function("() => sessionStorage.getItem('kglens.annotator') === 'kim'", timeout=30_000)
    settle(page)
    right_click_menu(page, "brand-awareness", "Use as path start")
    page.get_by_text("Path start: brand awareness", exact=False).wait_for(timeout=30_000)
    right_click_menu(page, "conversion-rate", "Use as path end")
    page.wait_for_url("**/paths?**", timeout=60_000)
    page.locator(FACT_TABLE.replace('[class*="st-key-facts-"] ', "")).first.wait_for(timeout=90_000)
    settle(page)
    check(session_annotator(page) == "kim", f"item 2: the page change dropped the name: {session_annotator(page)!r}")
    page.reload()
    page.locator(".kg-grader").first.wait_for(timeout=90_000)
    settle(page)
    check(page.get_by_role("textbox", name="Annotator").input_value() == "kim",
          "item 2: after the reload the annotator box is empty")
    check("grading as kim" in page.locator(".kg-grader .status").first.inner_text(),
          "item 2: after the reload grading is anonymous")
    assert page.dialogs == [] and egress(page.requests, app_url) == []
    check.done()


def test_facts_read_one_way_types_keep_their_colour_and_the_graph_keeps_its_room(
    page: Any, app_url: str, artifacts: Path
) -> None:
    check = Checks()
    # item 11: the expert settings are one click away, and the schema graph's edge labels do not pile up
    open_page(page, f"{app_url}/?graph=demo")
    page.locator(".st-key-kg-schema .kgv-root canvas").wait_for(timeout=60_000)
    check(not page.get_by_text("Seed nodes", exact=True).is_visible(), "item 11: expert settings shown up front")
    labelled = "() => document.querySelector('.st-key-kg-schema .kgv-root').kgNetwork.body.data.edges.get()" \
               ".filter(e => e.label).length"
    check(page.evaluate(labelled) == 0, f"item 11: {page.evaluate(labelled)} schema edge labels knotted together")
    settings = page.get_by_role("button", name="Settings")
    if check(settings.count(), "item 11: no Settings button for the expert settings"):
        settings.first.click()
        check(visible(page.get_by_text("Seed nodes", exact=True)), "item 11: Settings does not show them")
        page.keyboard.press("Escape")

    # item 6: one layout, relation then direction then description; the Trace tab keeps each relation's direction
    box = page.get_by_placeholder(QUERY_BOX, exact=False)
    box.fill(DEMO_QUESTION)
    mark_graphs_stale(page)
    box.press("Enter")
    page.locator(FACT_TABLE).first.wait_for(timeout=90_000)
    page.wait_for_function(FRESH_GRAPH_DRAWN, timeout=60_000)
    settle(page)
    texts = page.locator(FACT_TABLE + " .row .text").all_inner_texts()
    check(texts and not any("--[" in t or "]-->" in t for t in texts),
          f"item 6: facts still in the bracket form: {texts[:2]!r}")
    backward = [line for t in texts for line in t.splitlines() if "←" in line]
    page.get_by_role("tab", name="Trace").click()
    trace = page.get_by_role("tabpanel", name="Trace").inner_text()
    check(backward, "item 6: no fact shows an incoming relation with ←")
    for line in backward:
        left, rest = line.split(" ←", 1)
        rel, right = rest.split("— ", 1)
        check(f"{left} —{rel}→ {right}" not in trace, f"item 6: Trace reverses {line!r}")
        check(line in trace, f"item 6: Trace does not show {line!r} the same way round")
    page.get_by_role("tab", name="Facts").click()

    # item 7: a type keeps its colour after an expansion and on another page
    before = page.evaluate(LEGEND, "kg-search")
    rev = graph_data(page)["kgRev"]
    pt = node_point(page, "brand-trust")  # its neighbours make concepts outnumber the metrics the view had most of
    page.mouse.dblclick(pt["x"], pt["y"])
    page.wait_for_function("r => { const d = document.querySelector('.kgv-root').dataset;"
                           " return d.kgRev !== r && d.kgDrawn === d.kgRev; }", arg=rev, timeout=30_000)
    after = page.evaluate(LEGEND, "kg-search")
    changed = {t: (before[t], after[t]) for t in before if t in after and before[t] != after[t]}
    check(not changed, f"item 7: an expansion recoloured types: {changed}")

    # item 9: the details panel does not take the graph's room; a found node is centred in the visible part
    close_panel(page)
    canvas = page.evaluate(CANVAS_BOX)
    pt = node_point(page, "conversion-rate")
    page.mouse.click(pt["x"], pt["y"])
    page.locator(".kgv-root .kgv-panel:not([hidden])").wait_for(timeout=30_000)
    time.sleep(0.5)
    opened = page.evaluate(CANVAS_BOX)
    check(abs(opened["width"] - canvas["width"]) < 2 and abs(opened["height"] - canvas["height"]) < 2,
          f"item 9: the details panel took the graph's room: {canvas} -> {opened}")
    close_panel(page)
    find = page.locator(".kgv-root .kgv-find")
    find.fill("consideration set")
    find.press("Enter")
    page.wait_for_function("() => document.querySelector('.kgv-root').dataset.kgFound === 'consideration-set'")
    time.sleep(0.5)
    box_now, found = page.evaluate(CANVAS_BOX), node_point(page, "consideration-set")
    centre = (box_now["x"] + box_now["width"] / 2, box_now["y"] + box_now["height"] / 2)
    check(abs(found["x"] - centre[0]) < 25 and abs(found["y"] - centre[1]) < 25,
          f"item 9: the found node is at {found}, the visible graph's centre at {centre}")
    page.screenshot(path=str(artifacts / "context_search.png"))

    page.goto(f"{app_url}/paths?{urllib.parse.urlencode({'start': 'brand awareness (concept)'})}")
    wait_graph_drawn(page, timeout_ms=60_000)
    settle(page)
    other = page.evaluate(LEGEND, "kg-paths-explore")
    differs = {t: (after[t], other[t]) for t in other if t in after and after[t] != other[t]}
    check(not differs, f"item 7: Paths colours types otherwise than Search: {differs}")

    # item 5: a name that is no entity gets a choice, never a quiet swap
    page.goto(f"{app_url}/paths?graph=demo")
    page.get_by_placeholder("Type to search 248 entities", exact=False).first.wait_for(timeout=60_000)
    settle(page)
    page.get_by_test_id("stSelectbox").filter(has_text="Start entity").first.click()
    page.keyboard.type("free shipping", delay=15)
    page.keyboard.press("Enter")
    time.sleep(2.0)
    settle(page)
    check("start" not in params(page), f"item 5: an unknown name was swapped for an entity: {page.url}")
    check(page.get_by_text("No entity named “free shipping”", exact=False).count(),
          "item 5: the unknown name is not said")
    choice = page.get_by_role("button", name="freemium", exact=True)
    if check(choice.count() and page.get_by_role("button", name="free trial", exact=True).count(),
             "item 5: no 'did you mean' choice (freemium, free trial)"):
        choice.first.click()
        page.wait_for_function("() => new URL(location.href).searchParams.get('start')", timeout=30_000)
        check(params(page)["start"].startswith("freemium"), f"item 5: the choice did not set it: {page.url}")
    assert page.dialogs == [] and egress(page.requests, app_url) == []
    check.done()


def test_a_missing_capability_is_said_once_and_the_smaller_frictions_are_gone(
    page: Any, app_url: str, app_data_dir: Path, artifacts: Path, tmp_path: Path
) -> None:
    check = Checks()
    # item 10: no warning for what is only a missing key; said once where it matters
    open_page(page, f"{app_url}/?{urllib.parse.urlencode({'q': DEMO_QUESTION, 'graph': 'demo'})}")
    page.locator(FACT_TABLE).first.wait_for(timeout=90_000)
    settle(page)
    check(page.get_by_text("see Trace", exact=False).count() == 0, "item 10: a search warns only that Gemini is off")
    page.get_by_role("tab", name="Answer").click()
    page.get_by_role("button", name="Show an extractive answer").click()
    page.get_by_text("Citation check", exact=False).first.wait_for(timeout=60_000)
    answer = page.get_by_role("tabpanel", name="Answer").inner_text()
    check(answer.count("not configured") == 1, f"item 10: the Answer tab says Gemini is off "
                                               f"{answer.count('not configured')} times")
    open_page(page, f"{app_url}/?{urllib.parse.urlencode({'q': DEMO_QUESTION, 'vs': 'vector'})}")
    page.locator('.st-key-compare-a .kg-grader .row').first.wait_for(timeout=90_000)
    check(not (page.get_by_text("Max results", exact=True).count() and page.get_by_text("Limit", exact=True).count()),
          "item 10: Compare shows both Max results and Limit")
    open_page(page, f"{app_url}/?{urllib.parse.urlencode({'q': DEMO_QUESTION, 'search_mode': 'vector'})}")
    page.locator(FACT_TABLE + " .row").first.wait_for(timeout=90_000)
    tags = page.locator(FACT_TABLE + " .row").first.locator(".tag").all_inner_texts()
    check(len(tags) == len(set(tags)), f"item 10: an item is badged twice: {tags}")
    open_page(page, f"{app_url}/rerank?{urllib.parse.urlencode({'q': DEMO_QUESTION})}")
    page.get_by_text("retrievals: ", exact=False).first.wait_for(timeout=90_000)
    boxes = [b for b in notices(page) if re.search(r"Gemini|GEMINI|[Cc]ross-encoder", b)]
    check(len(boxes) <= 1, f"item 10: the Inspector stacks {len(boxes)} boxes on missing capabilities: {boxes}")
    store = LabelStore.in_data_dir(app_data_dir)
    queries = tmp_path / "ctx.tsv"
    queries.write_text(f"c1\t{DEMO_QUESTION}\n", encoding="utf-8")
    import_queries(store, queries, "ctx", replace=True)
    open_page(page, f"{app_url}/labels?set=ctx")
    page.get_by_role("tab", name="Query sets and pools").click()
    chosen = page.get_by_test_id("stMultiSelect").filter(has_text="Rerankers").first.inner_text()
    check("cross_encoder" not in chosen, f"item 10: pooling pre-selects the cross-encoder that cannot load: {chosen!r}")

    # item 11: the Communities page fills its room; the console's placeholder is not a value; /search opens Search
    open_page(page, f"{app_url}/communities?graph=demo")
    check(visible(page.locator("h4"), 30_000) and visible(page.locator(".kgv-root canvas"), 30_000),
          "item 11: the Communities page leaves its room empty until a row is picked")
    open_page(page, f"{app_url}/query?graph=demo")
    holder = page.get_by_label("Parameters", exact=False).get_attribute("placeholder") or ""
    check(not holder.lstrip().startswith("{"), f"item 11: the parameter placeholder looks like a value: {holder!r}")
    page.goto(f"{app_url}/search?{urllib.parse.urlencode({'q': DEMO_QUESTION})}")
    page.locator(FACT_TABLE).first.wait_for(timeout=90_000)
    check(page.get_by_text("Page not found").count() == 0, "item 11: /search opens 'Page not found'")

    # item 3 and item 11 on a server-folder import (the tab stays; Open X in Search opens X clean) need an
    # import root: tests/browser/test_import_root.py walks them on its rooted app
    assert page.dialogs == [] and egress(page.requests, app_url) == []
    check.done()



def test_a_click_during_a_cold_first_view_keeps_the_app_shell(browser: Any, tmp_path: Path) -> None:
    """Found while recording the walkthrough: on a fresh server, a click on a sidebar link during the first view left
    every session in Streamlit's older pages-folder mode: pages ran without the app shell (no graph picker, no graph
    view library, so no graph was ever drawn). The shell now calls st.navigation before anything else."""
    data_dir = tmp_path / "kg"  # empty: this server opens no graph and shares no store with the session's server
    with streamlit_app(data_dir, tmp_path / "server.log") as url:
        context = browser.new_context(viewport=VIEWPORT)
        page = context.new_page()
        page.goto(url + "/")
        page.get_by_test_id("stSidebarNav").get_by_role("link", name="Data").click()  # at once, as an impatient user
        page.get_by_text("Import a graph").wait_for(timeout=90_000)
        page.get_by_test_id("stSidebar").get_by_text("Back ends").wait_for(timeout=120_000)
        nav = page.get_by_test_id("stSidebarNav").inner_text()
        assert "Explore" in nav and "Manage" in nav, f"the app shell's navigation is gone: {nav!r}"
        context.close()


def test_a_fresh_tab_sends_no_rerun_after_its_first_view_so_a_page_link_click_is_not_undone(
    page: Any, app_url: str
) -> None:
    """Found by CI: a click on "Paths" just after Search had drawn came back to Search. A value a component sends
    reruns the page the browser is on until the server has answered a page switch, so a rerun sent after the click
    ran Search again. The annotator's memory sent one on every first view, even with nothing remembered; now only a
    remembered name is handed back (that rerun is what restores it)."""
    sent: list[str] = []

    def on_socket(ws: Any) -> None:
        ws.on("framesent", lambda payload: sent.append(back_message(payload)))

    page.on("websocket", on_socket)
    open_page(page, f"{app_url}/?graph=demo")
    time.sleep(2.0)  # the components have mounted and sent what they send
    reruns = [kind for kind in sent if kind == "rerun_script"]
    assert len(reruns) == 1, f"a fresh tab's first view sent {len(reruns)} reruns (only the load's is due): {sent}"
    page.locator(SIDEBAR).get_by_role("link", name="Paths").click()
    page.wait_for_url("**/paths**", timeout=30_000)
    page.get_by_placeholder("Type to search", exact=False).first.wait_for(timeout=60_000)
    time.sleep(1.0)
    assert "/paths" in page.url, f"the click on Paths was undone: {page.url}"

    # a remembered name still comes back (one rerun, the restore's) after a reload
    box = page.get_by_role("textbox", name="Annotator")
    box.fill("ria")
    box.press("Enter")
    page.wait_for_function("() => sessionStorage.getItem('kglens.annotator') === 'ria'", timeout=30_000)
    sent.clear()
    page.reload()
    page.get_by_placeholder("Type to search", exact=False).first.wait_for(timeout=60_000)
    settle(page)
    expect(page.get_by_role("textbox", name="Annotator")).to_have_value("ria", timeout=30_000)
    assert sent.count("rerun_script") == 2, f"a reload with a remembered name: {sent}"


def back_message(payload: str | bytes) -> str:
    """The kind of a message the browser sent to Streamlit's server (its BackMsg's `type`)."""
    if isinstance(payload, str):
        return "text"
    return BackMsg.FromString(payload).WhichOneof("type") or "empty"
