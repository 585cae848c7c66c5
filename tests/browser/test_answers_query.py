"""The Answer tab and the Query page in Debian chromium: without a key (the shared server) an extractive answer
whose citations jump to their evidence, and a console query drawn as a graph with a write refused; with a key
(a server of its own, Gemini on the local stand-in) the answer streams in and uncited sentences are marked."""

from __future__ import annotations

import shutil
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.app.graphs import DEMO_QUESTION
from tests.browser.conftest import streamlit_app
from tests.browser.test_search_page import FACT_TABLE, egress, wait_graph_drawn
from tests.gemini_stub import gemini_stub

pytestmark = pytest.mark.browser
TARGET = "() => { const t = document.querySelector(':target'); return t ? t.id : null; }"


def open_answer_tab(page: Any, url: str) -> None:
    page.goto(f"{url}/?{urllib.parse.urlencode({'q': DEMO_QUESTION})}")
    page.locator(FACT_TABLE).first.wait_for(state="visible", timeout=90_000)
    page.get_by_role("tab", name="Answer").click()


def test_extractive_answer_citations_and_the_query_console(page: Any, app_url: str, artifacts: Path) -> None:
    open_answer_tab(page, app_url)
    assert page.get_by_text("no GEMINI_API_KEY", exact=False).first.is_visible()
    page.get_by_role("button", name="Show an extractive answer").click()
    answer = page.locator(".kg-answer")
    answer.wait_for(state="visible", timeout=60_000)
    assert page.get_by_text("Extractive answer", exact=False).first.is_visible()
    cite = answer.locator("a.kg-cite").first
    href = cite.get_attribute("href")
    cite.click()
    assert page.evaluate(TARGET) == href.lstrip("#")  # the citation jumped to its evidence item
    assert page.locator(f"li{href}").is_visible()
    page.screenshot(path=str(artifacts / "answer_tab.png"))

    page.goto(f"{app_url}/query")
    page.get_by_label("Cypher (one read statement)").fill("MATCH (a:Entity {name: $name})-[r:RELATES]-(b:Entity) "
                                                          "RETURN a, r, b LIMIT 20")
    page.get_by_label("Parameters", exact=False).fill('{"name": "price elasticity"}')
    page.get_by_role("button", name="Run").click()
    wait_graph_drawn(page, timeout_ms=60_000)
    assert page.get_by_text("rows", exact=False).first.is_visible()
    page.screenshot(path=str(artifacts / "query_page.png"))
    page.get_by_label("Cypher (one read statement)").fill("MATCH (e:Entity) DETACH DELETE e")
    page.get_by_role("button", name="Run").click()
    page.get_by_text("Kuzu refused the query", exact=False).first.wait_for(timeout=30_000)
    assert egress(page.requests, app_url) == [] and page.dialogs == []


def test_gemini_answer_streams_into_the_page(page: Any, app_data_dir: Path, tmp_path_factory: Any,
                                            artifacts: Path) -> None:
    data_dir = tmp_path_factory.mktemp("keyed") / "kg"
    shutil.copytree(app_data_dir, data_dir, symlinks=True)  # Milvus Lite admits one server process per file
    with gemini_stub() as (stub_url, state), streamlit_app(
            data_dir, data_dir.parent / "server.log", GEMINI_API_KEY="test-key", KG_GEMINI_BASE_URL=stub_url) as url:
        state.text = "not json"  # the search's decomposition falls back offline
        open_answer_tab(page, url)
        state.stream = ["Brand awareness feeds ", "conversion [1].", " It is a hunch."]
        state.delay_s = 0.6  # between chunks: the page shows the text growing
        start = time.perf_counter()
        page.get_by_role("button", name="Write an answer with Gemini").click()
        page.get_by_text("Brand awareness feeds ▌", exact=False).wait_for(timeout=30_000)
        partial_s = time.perf_counter() - start
        answer = page.locator(".kg-answer")
        answer.wait_for(state="visible", timeout=30_000)
        print(f"\nfirst streamed words after {partial_s:.1f} s, whole answer after {time.perf_counter() - start:.1f} s")
        assert answer.locator("a.kg-cite").count() == 1
        assert answer.locator(".kg-uncited").inner_text() == "It is a hunch."
        assert page.get_by_text("generated", exact=False).first.is_visible()
        answer.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "answer_generated.png"))
        assert egress(page.requests, url) == [] and page.dialogs == []
