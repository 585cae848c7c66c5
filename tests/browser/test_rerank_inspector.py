"""The Rerank Inspector in Debian chromium: URL query → pool; α moves the order with no new retrieval;
three grades typed into the grading list (keys only, no retry) survive a reload; nDCG is computed from them."""

from __future__ import annotations

import re
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from retrieval.evaluation.labels import LabelStore
from tests.app.graphs import DEMO_QUESTION

pytestmark = pytest.mark.browser

GRADES = '[class*="st-key-grade-grid-"] .kg-grader'  # the grading list of the candidates
TRACE = re.compile(r"retrievals: (\d+) · re-ranks: (\d+)")
TALL = {"width": 1680, "height": 2600}
GRADED = re.compile(r"Candidates · (\d+) of (\d+) graded")


def text_match(page: Any, pattern: re.Pattern[str]) -> re.Match[str]:
    found = pattern.search(page.get_by_text(pattern).first.inner_text())
    assert found is not None
    return found


def wait_idle(page: Any, timeout_s: float = 30.0) -> None:
    """Until the script run has finished: no element is marked stale for 0.4 s in a row."""
    deadline = time.monotonic() + timeout_s
    calm = 0
    while calm < 4:
        calm = calm + 1 if page.locator('[data-stale="true"]').count() == 0 else 0
        if time.monotonic() > deadline:
            raise AssertionError("the app kept running")
        time.sleep(0.1)


def wait_for(page: Any, pattern: re.Pattern[str], predicate: Any, timeout_s: float = 30.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        loc = page.get_by_text(pattern).first
        if loc.count():
            found = pattern.search(loc.inner_text())
            if found is not None and predicate(found):
                return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{pattern.pattern} never satisfied the condition")
        time.sleep(0.2)


def type_grades(page: Any, grades: str) -> None:
    """Focus the first candidate, type the grades (each one grades the item in focus and moves on) and wait until
    the browser has no grade left that Python has not acknowledged."""
    page.locator(GRADES).locator(".row").first.locator(".text").click()
    page.keyboard.type(grades, delay=80)
    page.locator(GRADES + '[data-pending="0"]').wait_for(timeout=30_000)


def order_of(page: Any, reranker: str) -> str:
    line = page.get_by_text(re.compile(r"^top 5 · ")).first.inner_text()
    found = re.search(rf"{re.escape(reranker)} ((?:#\d+ ?)+)", line)
    assert found is not None, line
    return found.group(1).strip()


def test_what_if_labels_reload_and_ndcg(page: Any, app_url: str, app_data_dir: Path, artifacts: Path) -> None:
    page.set_viewport_size(TALL)  # the whole page on screen for the screenshot
    store = LabelStore.in_data_dir(app_data_dir)
    for label in store.get_labels(DEMO_QUESTION):  # a re-run of this test starts unlabelled
        store.delete_label(label.query_text, label.item_id, label.graph_version)

    # Streamlit serves a deep link as a plain pages/ script until app.py has run st.navigation once
    # in this server, so open the app first, as the Search page's link would.
    page.goto(app_url + "/")
    page.get_by_test_id("stSidebarNav").get_by_text("Rerank Inspector").wait_for(timeout=60_000)
    page.goto(f"{app_url}/rerank?q={urllib.parse.quote(DEMO_QUESTION)}")
    retrievals, reranks = (int(g) for g in wait_for(page, TRACE, lambda m: True, 90).groups())
    wait_idle(page)
    before = order_of(page, "graph α/β")

    slider = page.locator(".st-key-alpha input[type='range']")
    slider.press("Home")  # α = 0: the graph reranker orders by PageRank alone
    after_trace = wait_for(page, TRACE, lambda m: int(m.group(2)) > reranks)
    assert int(after_trace.group(1)) == retrievals == 1, "moving α must not retrieve again"
    wait_idle(page)
    assert "= 1.00" in page.get_by_text("β (PageRank weight)").inner_text()
    assert order_of(page, "graph α/β") != before, "α = 0 should change the graph reranker's order"
    assert order_of(page, "none") == "#1 #2 #3 #4 #5", "the pool itself must not change"

    page.get_by_role("textbox", name="Annotator").fill("ana")
    page.get_by_role("textbox", name="Annotator").press("Enter")
    wait_idle(page)
    total = int(text_match(page, GRADED).group(2))
    type_grades(page, "320")
    wait_for(page, GRADED, lambda m: int(m.group(1)) == 3)
    wait_idle(page)
    # grades 3, 2, 0 on the first three of the retrieval order: "none" is already the ideal ranking
    assert "nDCG@10: none 1.000" in page.get_by_text(re.compile("^nDCG@10:")).first.inner_text()
    labels = store.get_labels(DEMO_QUESTION)
    assert sorted(lb.grade for lb in labels) == [0, 2, 3]
    assert {lb.annotator for lb in labels} == {"ana"}

    page.reload()
    graded = wait_for(page, GRADED, lambda m: True, 60)
    assert graded.groups() == ("3", str(total)), "labels did not survive the reload"
    assert wait_for(page, TRACE, lambda m: True).group(1) == "1", "a reload must reuse the cached pool"
    page.locator(GRADES + " .row").first.wait_for()
    assert page.locator(GRADES + " .row").evaluate_all("rows => rows.slice(0, 3).map(r => r.dataset.grade)") == [
        "3", "2", "0"], "the list shows the stored grades after the reload"
    wait_idle(page)
    assert page.get_by_text(re.compile(r"This query · 1 scored query")).first.is_visible()
    assert "nDCG@10: none 1.000" in page.get_by_text(re.compile("^nDCG@10:")).first.inner_text()
    assert not page.dialogs  # type: ignore[attr-defined]
    page.screenshot(path=str(artifacts / "rerank_inspector.png"), full_page=True)
