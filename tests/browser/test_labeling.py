"""Labeling in Debian chromium: import a query set, pool it, grade 50 items in a row with keys only at typing speed
(all 50 stored exactly, checked in the SQLite file), undo, reveal, adjudicate; and a grade given on the Search page
shows in the Rerank Inspector for the same query."""

from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from retrieval.evaluation.labels import ADJUDICATED, LabelStore
from retrieval.evaluation.pooling import queue
from retrieval.graph import catalog
from tests.browser.conftest import streamlit_app
from tests.conftest import DEMO_BUNDLE

pytestmark = pytest.mark.browser

MULTI_HOP = [q["question"] for q in json.loads((DEMO_BUNDLE / "questions.json").read_text())
             if q["kind"] == "multi-hop"]
SET_QUESTIONS = MULTI_HOP[5:8]  # not used by the other browser tests
SEARCH_QUESTION = MULTI_HOP[3]
QUEUE = '[class*="st-key-queue-"] .kg-grader'
FACTS = '[class*="st-key-facts-"] .kg-grader'
INSPECTOR = '[class*="st-key-grade-grid-"] .kg-grader'
ADJUDICATE = '[class*="st-key-adjudicate-"] .kg-grader'
GRADES = "".join(str((i * 7 + i // 4) % 4) for i in range(50))  # every grade, no simple pattern


def open_app(page: Any, app_url: str, path: str) -> None:
    """Open a page by URL (Streamlit serves deep links once app.py has run st.navigation in this server)."""
    page.goto(app_url + "/")
    page.get_by_test_id("stSidebarNav").get_by_text("Labeling").wait_for(timeout=60_000)
    page.goto(app_url + path)


def settled(page: Any, grader: str) -> None:
    """Every grade given in `grader` is acknowledged by Python (stored)."""
    page.locator(grader + '[data-pending="0"]').wait_for(timeout=30_000)


def shown_keys(page: Any, grader: str) -> list[str]:
    return page.locator(grader + " .row").evaluate_all("rows => rows.map(r => r.dataset.key)")


@pytest.fixture
def own_app(app_data_dir: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An app of this test's own, on a copy of the session's data dir as built: the session's app holds pools,
    sets and grades the earlier tests made on the same demo questions, which change the queue it shows."""
    data_dir = tmp_path / "own" / "kg"
    shutil.copytree(app_data_dir, data_dir, symlinks=True, ignore=shutil.ignore_patterns("console", "labels*",
                                                                                          "curation"))
    with streamlit_app(data_dir, tmp_path / "own" / "server.log") as url:
        yield url, data_dir


def test_labeling_workflow_grades_fifty_items_with_keys_at_typing_speed(
    page: Any, own_app: tuple[str, Path], artifacts: Path, tmp_path: Path
) -> None:
    app_url, app_data_dir = own_app
    store = LabelStore.in_data_dir(app_data_dir)
    version = catalog.resolve(app_data_dir, "demo").version
    queries = tmp_path / "keys.tsv"
    queries.write_text("".join(f"k{i}\t{q}\n" for i, q in enumerate(SET_QUESTIONS, start=1)), encoding="utf-8")

    clock = [time.perf_counter()]

    def lap(what: str) -> None:
        clock.append(time.perf_counter())
        print(f"{what} {clock[-1] - clock[-2]:.1f} s", end="; ")

    # an annotator of this test's own: other tests of the session grade the same demo questions as "kim"
    kim = f"kim-{uuid.uuid4().hex[:6]}"
    open_app(page, app_url, "/labels")
    page.get_by_role("textbox", name="Annotator").fill(kim)
    page.get_by_role("textbox", name="Annotator").press("Enter")
    page.get_by_text("Import a query set for labeling").first.wait_for(state="attached", timeout=60_000)
    if page.get_by_role("tab", name="Query sets and pools").count():  # another set exists already
        page.get_by_role("tab", name="Query sets and pools").click()
    page.locator('[data-testid="stFileUploaderDropzoneInput"][accept*=".jsonl"]').set_input_files(str(queries))
    page.get_by_role("textbox", name="Set name").fill("keys")
    page.get_by_role("button", name="Import query set").click()
    page.get_by_text("Imported query set keys: 3 queries").wait_for(state="attached", timeout=30_000)

    lap("\nimport")
    page.goto(f"{app_url}/labels?set=keys")
    page.get_by_role("tab", name="Query sets and pools").click()
    page.get_by_role("button", name="Pool", exact=True).click()
    page.get_by_text("items over 3 queries at depth 10").wait_for(timeout=120_000)
    lap("pool")
    page.get_by_role("tab", name="Queue").click()
    rows = page.locator(QUEUE + " .row")
    rows.first.wait_for(timeout=30_000)
    assert rows.count() >= 50 and page.locator(QUEUE + " .score").count() == 0, "the queue must be blind"
    expected = queue(store, "keys", kim, graph_version=version)[:50]
    want = [f"{it.query_id}|{it.item_id}" for it in expected]
    for _ in range(100):  # the list's rows come in with the run that drew the tab: read them once it is over
        if shown_keys(page, QUEUE)[:50] == want:
            break
        page.wait_for_timeout(300)
    assert shown_keys(page, QUEUE)[:50] == want

    lap("queue")
    rows.first.locator(".text").click()  # focus the list; from here on, keys only
    start = time.perf_counter()
    page.keyboard.type(GRADES, delay=70)  # a fast typist: 70 ms between keys, no waiting for the app
    typed = time.perf_counter() - start
    settled(page, QUEUE)
    stored = {(lb.query_text, lb.item_id): lb.grade for lb in store.all_labels(version, annotator=kim)}
    want = {(it.query, it.item_id): int(g) for it, g in zip(expected, GRADES, strict=True)}
    print(f"\n50 grades typed in {typed:.1f} s; stored {sum(stored.get(k) == v for k, v in want.items())}/50 exactly")
    assert stored == want, "every one of the 50 grades is stored exactly once, as typed"
    assert rows.nth(49).get_attribute("data-grade") == GRADES[49]

    page.keyboard.press("u")  # undo the 50th grade (its first): the label goes, the cursor returns to it
    settled(page, QUEUE)
    last = (expected[49].query, expected[49].item_id)
    assert last not in {(lb.query_text, lb.item_id) for lb in store.all_labels(version, annotator=kim)}
    page.keyboard.press(GRADES[49])
    settled(page, QUEUE)
    assert len(store.all_labels(version, annotator=kim)) == 50
    page.get_by_text("50 of ").first.wait_for()
    lap("keys, undo")
    page.screenshot(path=str(artifacts / "labeling.png"))

    page.get_by_text("Reveal systems and ranks").click()  # the same order, now with who found each item
    page.locator(QUEUE + " .score").first.wait_for(timeout=30_000)
    assert shown_keys(page, QUEUE)[:50] == [f"{it.query_id}|{it.item_id}" for it in expected]

    # a second annotator disagrees on two items: kappa, alpha and the disagreements; adjudicate one by a click
    store.put_label(expected[0].query, expected[0].item_id, (int(GRADES[0]) + 2) % 4, graph_version=version,
                    annotator="lou")
    store.put_label(expected[1].query, expected[1].item_id, (int(GRADES[1]) + 1) % 4, graph_version=version,
                    annotator="lou")
    for it, g in zip(expected[2:10], GRADES[2:10], strict=True):
        store.put_label(it.query, it.item_id, int(g), graph_version=version, annotator="lou")
    lap("reveal")
    page.reload()  # lou graded elsewhere: the next run shows it
    page.get_by_role("tab", name="Agreement").click()
    page.get_by_test_id("stMetric").filter(has_text="Annotators").filter(has_text="2").wait_for(timeout=30_000)
    disagreements = page.locator(ADJUDICATE + " .row")
    disagreements.first.wait_for()
    assert disagreements.count() == 2
    disagreements.first.locator('button[data-grade="1"]').click()
    settled(page, ADJUDICATE)
    decided = store.all_labels(version, annotator=ADJUDICATED)
    assert [(lb.item_id, lb.grade) for lb in decided] == [(disagreements.first.get_attribute("data-key").split("|")[1],
                                                            1)]
    lap("agreement")
    assert page.dialogs == []  # type: ignore[attr-defined]


def test_a_grade_given_on_the_search_page_shows_in_the_rerank_inspector(
    page: Any, app_url: str, app_data_dir: Path
) -> None:
    store = LabelStore.in_data_dir(app_data_dir)
    for lb in store.get_labels(SEARCH_QUESTION):  # a re-run starts unlabelled
        store.delete_label(lb.query_text, lb.item_id, lb.graph_version)
    page.set_viewport_size({"width": 1600, "height": 1000})  # the width at which the old table cut facts at ~45 chars
    open_app(page, app_url, "/?" + urllib.parse.urlencode({"q": SEARCH_QUESTION}))
    first = page.locator(FACTS + " .row").first
    first.wait_for(timeout=90_000)
    # the whole fact, wrapped; the scores that ranked it and its book › chapter on screen, no sideways scrolling
    assert page.locator(FACTS).evaluate("el => el.scrollWidth - el.clientWidth") <= 0
    text = first.locator(".text").inner_text()
    assert len(text) > 60 and not text.endswith("…") and "→" in text  # a verbalized relation, whole
    for part in (first.locator(".score").first, first.locator(".where")):
        box = part.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1600
    assert "›" in first.locator(".where").inner_text()
    item = (first.get_attribute("data-key") or "").split("|", 1)[1]
    first.locator('button[data-grade="2"]').click()  # a grade button; the keys work the same
    settled(page, FACTS)
    assert first.get_attribute("data-grade") == "2"
    assert [(lb.item_id, lb.grade, lb.annotator) for lb in store.get_labels(SEARCH_QUESTION)] == [(item, 2, "")]

    page.get_by_role("link", name="Inspect the reranking of this query").click()
    row = page.locator(f'{INSPECTOR} .row[data-key="{item}"]')
    row.wait_for(timeout=90_000)
    assert row.get_attribute("data-grade") == "2" and row.locator(".by").inner_text() == "you"
    page.get_by_text("This query · 1 scored query").first.wait_for(timeout=30_000)
