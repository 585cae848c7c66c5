"""The Search page in Debian chromium: query → graph canvas + facts, pick a fact → highlight + sources; hostile text;
a grade given on a fact shows in the Rerank Inspector."""

from __future__ import annotations

import re
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.app.graphs import DEMO_QUESTION, HOSTILE_GRAPH, HOSTILE_QUERY, IMG, SCRIPT, SECOND_QUESTION
from tests.browser.conftest import FRESH_GRAPH_DRAWN, ask, graph_data, mark_graphs_stale, node_point, wait_graph_drawn

pytestmark = pytest.mark.browser

FACTS = ".kg-grader"  # any grading list (the Paths page's tests use it too)
FACT_TABLE = '[class*="st-key-facts-"] .kg-grader'  # the Search page's facts list


def focus_counts(page: Any) -> tuple[int, int]:
    data = graph_data(page)
    return int(data.get("kgFocusNodes") or 0), int(data.get("kgFocusEdges") or 0)


def click_fact_row(page: Any, row: int) -> None:
    """Pick item `row` (0-based) of the facts list (else of the first grading list): click its text."""
    facts = page.locator(FACT_TABLE)
    (facts if facts.count() else page.locator(FACTS)).first.locator(".row").nth(row).locator(".text").click()


def press_enter_and_wait_drawn(page: Any, box: Any, text: str) -> float:
    """Seconds from Enter to a freshly drawn graph (the drawn revision before Enter is marked stale first)."""
    mark_graphs_stale(page)
    box.fill(text)
    start = time.perf_counter()
    box.press("Enter")
    page.wait_for_function(FRESH_GRAPH_DRAWN, timeout=60_000)
    return time.perf_counter() - start


def retriever_ms(page: Any) -> str:
    """The retriever's own total from the result summary line ('… · 524 ms · …')."""
    line = page.locator('[data-testid="stMarkdownContainer"]', has_text=re.compile(r"\d+ facts \("))
    summary = line.first.inner_text()
    return next((part.strip() for part in summary.split("·") if part.strip().endswith(" ms")), "?")


def egress(requests: list[str], base: str) -> list[str]:
    """Requests that left the app's own origin (srcdoc, data: and blob: stay in the page)."""
    return [u for u in requests if not u.startswith((base, "data:", "blob:", "about:"))]


def test_multi_hop_search_pick_a_fact_and_see_its_path_and_sources(page: Any, app_url: str, artifacts: Path) -> None:
    start = ask(page, app_url + "/", DEMO_QUESTION)
    page.locator(FACT_TABLE).first.wait_for(state="visible", timeout=60_000)
    facts_s = time.perf_counter() - start
    page.wait_for_function(FRESH_GRAPH_DRAWN, timeout=60_000)
    drawn_s = time.perf_counter() - start
    print(
        f"\nsearch enter->drawn: {drawn_s * 1000:.0f} ms (facts table at {facts_s * 1000:.0f} ms; "
        f"retriever {retriever_ms(page)})"
    )

    assert focus_counts(page) == (0, 0)
    assert "q=" in page.url and "graph=demo" in page.url
    click_fact_row(page, 0)
    picked = page.locator(".st-key-picked-fact")
    picked.wait_for(state="visible", timeout=30_000)
    page.wait_for_function(
        """() => { const r = document.querySelector('.kgv-root');
                   return r && Number(r.dataset.kgFocusNodes) > 0 && r.dataset.kgDrawn === r.dataset.kgRev; }""",
        timeout=30_000,
    )
    nodes, edges = focus_counts(page)
    assert nodes >= 1, "the picked fact's entities are not highlighted"
    assert "Source" in picked.inner_text() and "Picked fact #1" in picked.inner_text()
    page.screenshot(path=str(artifacts / "search_page.png"))
    print(f"highlighted {nodes} entities / {edges} relations; screenshot {artifacts / 'search_page.png'}")

    page.get_by_role("tab", name="Sources").click()
    assert page.get_by_text("cited by fact #1").first.is_visible()
    assert egress(page.requests, app_url) == []
    assert page.dialogs == []

    page.get_by_role("tab", name="Facts").click()
    box = page.get_by_placeholder("Ask a multi-hop question", exact=False)
    warm = [press_enter_and_wait_drawn(page, box, q) for q in (SECOND_QUESTION, DEMO_QUESTION)]
    print("next searches enter->drawn: " + ", ".join(f"{s * 1000:.0f} ms" for s in warm))

    # the copied URL reproduces the search
    again = page.context.new_page()
    again.goto(page.url)
    again.locator(FACT_TABLE).first.wait_for(state="visible", timeout=60_000)
    expect(again.get_by_placeholder("Ask a multi-hop question", exact=False)).to_have_value(DEMO_QUESTION,
                                                                                           timeout=30_000)
    again.close()


def test_hostile_names_show_literally_and_execute_nothing(page: Any, app_url: str) -> None:
    query = urllib.parse.urlencode({"q": HOSTILE_QUERY, "graph": HOSTILE_GRAPH})
    page.goto(f"{app_url}/?{query}")
    page.locator(FACT_TABLE).first.wait_for(state="visible", timeout=60_000)
    wait_graph_drawn(page)
    click_fact_row(page, 0)
    page.locator(".st-key-picked-fact").wait_for(state="visible", timeout=30_000)
    wait_graph_drawn(page)
    page.get_by_role("tab", name="Sources").click()
    page.get_by_role("tab", name="Trace").click()
    time.sleep(1.0)  # give any injected handler (onerror, onload) the chance to fire

    body = page.locator("body").inner_text()
    assert IMG in body, "the payload should be shown as text"
    assert SCRIPT in body
    assert page.locator("img[src='x']").count() == 0 and page.locator("a[href^='javascript']").count() == 0
    page.get_by_role("tab", name="Facts").click()
    eve = node_point(page, "eve")
    page.mouse.move(eve["x"], eve["y"])
    tip = page.locator(".kgv-tip")
    tip.wait_for(state="visible", timeout=10_000)
    assert IMG in tip.inner_text()  # the tooltip shows the name literally, as text
    assert page.dialogs == [], page.dialogs
    assert egress(page.requests, app_url) == []
