"""The Search page's Compare view in Debian chromium: KG vs vector on a demo question, overlap and both lists."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import ask
from tests.browser.test_search_page import egress

pytestmark = pytest.mark.browser

ITEMS = ".st-key-compare-{side} .kg-grader .row"  # each side's grading list
JACCARD = "Overlap (Jaccard of cited chunks)"


def demo_question() -> str:
    """The first multi-hop question the Search page offers on the demo graph (not used by the other browser tests)."""
    import app_state

    return app_state.demo_questions()[0]


def metric(page: Any, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text().strip()


def items(page: Any, side: str) -> list[str]:
    return [t.strip() for t in page.locator(ITEMS.format(side=side)).all_inner_texts()]


def test_compare_kg_with_vector_on_a_demo_question(page: Any, app_url: str, artifacts: Path) -> None:
    question = demo_question()
    start = ask(page, app_url + "/?vs=vector", question)
    page.wait_for_function(
        """(sel) => ['a', 'b'].every(s => document.querySelectorAll(sel.replace('{side}', s)).length > 0)""",
        arg=ITEMS, timeout=60_000,
    )
    drawn_s = time.perf_counter() - start
    print(f"\ncompare KG vs vector, enter->both lists drawn: {drawn_s * 1000:.0f} ms")

    assert "vs=vector" in page.url and "q=" in page.url
    assert page.locator("h4", has_text="KG vs vector").is_visible()
    jac = float(metric(page, JACCARD))
    shared, only_kg, only_vec = (int(metric(page, m)) for m in
                                 ("Shared chunks", "Chunks only in KG", "Chunks only in vector"))
    assert 0.0 <= jac <= 1.0
    assert jac == pytest.approx(shared / (shared + only_kg + only_vec), abs=5e-4)  # the figure matches its counts

    kg_items, vec_items = items(page, "a"), items(page, "b")
    assert len(kg_items) >= 1 and len(vec_items) == 10  # KG max_results and vector limit default to 10
    # every item carries its document/graph mark and a citation (book › chapter for these two modes)
    kg_badges = page.locator(".st-key-compare-a .kg-grader .tag").all_inner_texts()
    vec_badges = page.locator(".st-key-compare-b .kg-grader .tag").all_inner_texts()
    assert kg_badges.count("graph") == len(kg_items)
    assert vec_badges.count("document") == len(vec_items)  # its kind, once (the channel says the same)
    citations = page.locator(".st-key-compare-a .kg-grader .where, .st-key-compare-b .kg-grader .where")
    assert citations.count() == len(kg_items) + len(vec_items) and all("›" in c for c in citations.all_inner_texts())
    assert sum("only here" in b for b in kg_badges + vec_badges) + sum("shared" in b for b in kg_badges + vec_badges) \
        == len(kg_items) + len(vec_items)
    page.screenshot(path=str(artifacts / "compare_view.png"), full_page=True)

    unique = sum("only here" in b for b in kg_badges + vec_badges)
    page.get_by_text("Only the items unique to each side").click()
    page.wait_for_function(
        """([sel, n]) => ['a', 'b'].reduce((t, s) => t + document.querySelectorAll(sel.replace('{side}', s)).length, 0)
                         === n""",
        arg=[ITEMS, unique], timeout=30_000,
    )
    assert egress(page.requests, app_url) == []
    assert page.dialogs == []
