"""Paths and Graph Memory in Debian chromium: why-connected on two demo entities, then save the paths to graph
memory and open them on the Graph Memory page."""

from __future__ import annotations

import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import wait_graph_drawn
from tests.browser.test_search_page import FACTS, click_fact_row, egress, focus_counts

pytestmark = pytest.mark.browser


def pick_entity(page: Any, label: str, key: str, text: str) -> None:
    """Type into an entity picker (it filters as you type) and pick its first entity (not "Add: <text>", which asks
    whether the typed name meant one of them: issue 22 item 5)."""
    page.get_by_test_id("stSelectbox").filter(has_text=label).first.click()
    page.keyboard.type(text, delay=15)
    page.get_by_role("option").filter(has_not_text="Add:").first.click()
    # the picker is bound to the URL: its value lands there once the app has it
    page.wait_for_function("k => new URL(location.href).searchParams.get(k)", arg=key, timeout=30_000)


def wait_focus(page: Any, field: str, at_least: int) -> None:
    """The redrawn graph highlights at least `at_least` nodes/edges (the view's data-kg-focus-nodes/-edges)."""
    key = "kgFocusNodes" if field == "focusNodes" else "kgFocusEdges"
    page.wait_for_function(
        """([key, n]) => { const r = document.querySelector('.kgv-root');
                           return r && Number(r.dataset[key]) >= n && r.dataset.kgDrawn === r.dataset.kgRev; }""",
        arg=[key, at_least],
        timeout=30_000,
    )


def open_paths_why(page: Any, app_url: str) -> None:
    """The Paths page in its why-connected mode, by its link (the sidebar's own links are walked by test_context)."""
    page.goto(app_url + "/paths?" + urllib.parse.urlencode({"mode": "Why are these connected?"}))
    page.get_by_test_id("stSidebar").wait_for()
    page.get_by_text("From entity").wait_for(timeout=90_000)  # a cold server opens the graph first


def test_why_connected_shows_ranked_paths_beside_the_graph_and_highlights_a_pick(
    page: Any, app_url: str, artifacts: Path
) -> None:
    open_paths_why(page, app_url)
    pick_entity(page, "From entity", "a", "price elast")
    start = time.perf_counter()
    pick_entity(page, "To entity", "b", "penetration pri")
    page.locator(FACTS).first.wait_for(state="visible", timeout=60_000)
    wait_graph_drawn(page)
    print(f"\nwhy-connected pick->drawn: {(time.perf_counter() - start) * 1000:.0f} ms")

    summary = page.get_by_text("between price elasticity and penetration pricing").first
    assert summary.is_visible() and "paths" in summary.inner_text()
    assert "mode=" in page.url and "a=price+elasticity" in page.url  # the link reproduces the question
    assert focus_counts(page) == (0, 0)
    click_fact_row(page, 1)  # the second-ranked path (the first is the direct relation)
    picked = page.locator(".st-key-picked-path")
    picked.wait_for(state="visible", timeout=30_000)
    wait_focus(page, "focusEdges", 2)
    text = picked.inner_text()
    assert "Path #2" in text and "highlighted in the graph" in text
    assert "The Price Is a Promise" in text, "the picked path's source (book › chapter) is missing"
    page.screenshot(path=str(artifacts / "paths_why_connected.png"))
    page.get_by_role("tab", name="Sources").click()
    page.get_by_test_id("stExpander").filter(has_text="· path #").first.wait_for(state="visible")
    assert page.dialogs == [] and egress(page.requests, app_url) == []


def test_save_paths_to_memory_then_open_and_traverse_them_on_graph_memory(
    page: Any, app_url: str, artifacts: Path
) -> None:
    tenant = f"b{uuid.uuid4().hex[:10]}"
    open_paths_why(page, app_url)
    pick_entity(page, "From entity", "a", "price elast")
    pick_entity(page, "To entity", "b", "penetration pri")
    wait_graph_drawn(page)

    page.get_by_role("button", name="Export").click()
    pop = page.get_by_test_id("stPopoverBody")
    pop.get_by_role("textbox", name="Tenant").fill(tenant)
    pop.get_by_role("textbox", name="Namespace").fill("pricing")
    pop.get_by_role("textbox", name="Tags").fill("paths, demo")
    pop.get_by_role("button", name="Save to Graph Memory").click()
    saved = page.locator(".st-key-why-export-saved-box")
    saved.wait_for(state="visible", timeout=30_000)
    assert "Saved to Graph Memory as" in saved.inner_text() and tenant in saved.inner_text()
    page.keyboard.press("Escape")

    saved.get_by_role("link", name="Open in Graph Memory").click()
    page.get_by_text("Why connected: price elasticity ↔ penetration pricing").last.wait_for(timeout=60_000)
    wait_graph_drawn(page)
    assert f"tenant={tenant}" in page.url or page.get_by_text(tenant).first.is_visible()
    page.get_by_role("button", name="Traverse").click()
    page.get_by_text("nodes within 2 hops of").wait_for(timeout=30_000)
    wait_focus(page, "focusNodes", 2)
    page.wait_for_function(  # the counters (searches, retrievals, traversals) are drawn last in a run
        """() => {
            const v = [...document.querySelectorAll('[data-testid="stMetricValue"]')].map(e => Number(e.innerText));
            return v.length === 3 && v[1] >= 1 && v[2] >= 1;
        }""",
        timeout=30_000,
    )
    page.screenshot(path=str(artifacts / "graph_memory.png"))
    assert page.dialogs == [] and egress(page.requests, app_url) == []
