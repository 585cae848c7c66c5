"""Curation in Debian chromium on the shared GraphRAG index (the issue's Must-show): a grade given to CRUZ in the
Rerank Inspector; the Curation page's duplicates list CRUZ with TAYLOR CRUZ and RIVERA with SAM RIVERA; the first
is merged, the second merged as a reviewed batch; a search about Taylor Cruz shows the merged entity with the
relations of both, edited from the graph view's details panel; the grade given before the merge counts for the
merged entity; undo restores both entities."""

from __future__ import annotations

import re
import shutil
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from retrieval.config import Settings
from retrieval.graph.runtime import open_kg
from tests.browser.conftest import node_point, streamlit_app, wait_graph_drawn
from tests.browser.test_rerank_inspector import GRADES, wait_idle

pytestmark = pytest.mark.browser
QUESTION = "What did Taylor Cruz do for the squad?"
INSPECT = "Who leads the squad as Cruz?"


def merged_relations(data_dir: Path) -> tuple[dict[str, str], int, set[str]]:
    """Entity ids by name; how many relations the merged entity will have (CRUZ's re-pointed to TAYLOR CRUZ,
    parallel ones of one type joined, the one between them gone); the descriptions of CRUZ's relations that
    TAYLOR CRUZ had no parallel for (they move over whole). Read with the engine before the app opens."""
    kg = open_kg(Settings.from_env(env={}, data_dir=data_dir), "dulce")
    try:
        a = kg.index.arrays
        ids = dict(zip(a.node_names, a.node_ids, strict=True))
        tc, cruz = ids["TAYLOR CRUZ"], ids["CRUZ"]
        sub = kg.graph.neighbourhood([tc, cruz], hops=1, max_edges=1000)
        keys: dict[tuple[str, str, str], str] = {}
        moved = set()
        for r in sorted(sub.edges, key=lambda r: cruz in (r.source_id, r.target_id)):  # TAYLOR CRUZ's first
            s, t = (tc if r.source_id == cruz else r.source_id), (tc if r.target_id == cruz else r.target_id)
            if tc not in (s, t) or s == t:
                continue
            key = (s, r.relation_type, t)
            if key not in keys and cruz in (r.source_id, r.target_id):
                moved.add(r.description[:60])
            keys.setdefault(key, r.id)
        return ids, len(keys), moved
    finally:
        kg.close()


def expander(page: Any, title: str) -> Any:
    found = page.get_by_test_id("stExpander").filter(has_text=title).first
    found.wait_for(timeout=60_000)
    if not found.locator("details").get_attribute("open"):
        found.locator("summary").click()
    return found


def notice(page: Any, pattern: str) -> str:
    """The success line of the last curation action."""
    box = page.get_by_test_id("stAlertContentSuccess").filter(has_text=re.compile(pattern)).first
    box.wait_for(timeout=120_000)
    return str(box.inner_text())


def grade_row(page: Any, name: str) -> Any:
    """The Inspector's grading row of entity `name` (its text is `NAME: description`)."""
    return page.locator(GRADES + " .row").filter(has=page.locator(".text", has_text=re.compile(f"^{name}:")))


def inspect(page: Any, url: str) -> None:
    page.goto(f"{url}/rerank?{urllib.parse.urlencode({'q': INSPECT, 'pool': 'entities'})}")
    page.locator(GRADES + " .row").first.wait_for(timeout=120_000)
    wait_idle(page, 60)


def test_duplicates_merge_search_grade_and_undo_on_the_graphrag_index(
    page: Any, dulce_data_dir: Path, tmp_path_factory: Any, artifacts: Path
) -> None:
    data_dir = tmp_path_factory.mktemp("curation") / "kg"
    shutil.copytree(dulce_data_dir, data_dir, symlinks=True)
    ids, total, moved = merged_relations(data_dir)
    assert moved, "CRUZ has a relation TAYLOR CRUZ has no parallel for: it moves over whole"
    with streamlit_app(data_dir, data_dir.parent / "server.log") as url:
        page.goto(url + "/")
        page.get_by_test_id("stSidebarNav").get_by_text("Curation").wait_for(timeout=120_000)
        page.get_by_role("textbox", name="Annotator").fill("ana")  # edits and grades are ana's
        page.get_by_role("textbox", name="Annotator").press("Enter")
        wait_idle(page, 60)

        # a grade given to CRUZ before the merge
        inspect(page, url)
        grade_row(page, "CRUZ").locator('button[data-grade="3"]').click()
        page.locator(GRADES + '[data-pending="0"]').wait_for(timeout=60_000)
        assert grade_row(page, "CRUZ").first.get_attribute("data-grade") == "3"

        # the duplicates view lists both pairs with their evidence
        page.goto(f"{url}/curation")
        cruz = expander(page, "TAYLOR CRUZ ← CRUZ")
        rivera = expander(page, "SAM RIVERA ← RIVERA")
        assert "'CRUZ' is part of 'TAYLOR CRUZ'" in cruz.inner_text()
        assert "'RIVERA' is part of 'SAM RIVERA'" in rivera.inner_text()
        page.screenshot(path=str(artifacts / "curation_duplicates.png"), full_page=True)
        rivera.get_by_role("button", name="Add to batch").click()
        notice(page, "added to the batch|Changeset|draft")
        page.get_by_role("button", name="Apply the batch").click()
        notice(page, "merge 'SAM RIVERA', 'RIVERA'")
        expander(page, "TAYLOR CRUZ ← CRUZ").get_by_role("button", name="Merge", exact=True).click()
        merged = notice(page, "merge 'TAYLOR CRUZ', 'CRUZ'")
        assert "ana" in merged and "1 entity removed" in merged

        # a search about Taylor Cruz: the merged entity, with the relations of both
        page.goto(f"{url}/?{urllib.parse.urlencode({'q': QUESTION})}")
        wait_graph_drawn(page, timeout_ms=120_000)
        drawn = page.evaluate("() => document.querySelector('.kgv-root').kgNetwork.body.data.nodes.getIds()")
        assert ids["TAYLOR CRUZ"] in drawn and ids["CRUZ"] not in drawn and ids["RIVERA"] not in drawn
        pt = node_point(page, ids["TAYLOR CRUZ"])
        page.mouse.click(pt["x"], pt["y"])
        panel = page.locator(".kgv-root .kgv-panel:not([hidden])")
        panel.locator(".kgv-edit").wait_for(timeout=60_000)
        text = panel.inner_text()
        assert "Also called: CRUZ" in text
        # every relation CRUZ had is now the merged entity's: re-pointed, or joined to its parallel one
        assert f" of {total})" in panel.locator(".kgv-sec", has_text="Relations (").first.inner_text()
        said = "\n".join(panel.locator(".kgv-rdesc").all_inner_texts())
        assert all(text in said for text in moved)
        assert "merge" in panel.locator(".kgv-history").inner_text()
        # an edit from the details panel: an alias, applied as ana's changeset
        alias = panel.locator(".kgv-field", has_text="Alias").locator("input")
        alias.fill("Agent Cruz")
        panel.get_by_role("button", name="Add alias").click()
        page.locator(".kgv-edit-ok").filter(has_text=re.compile(r"Changeset #\d+ by ana")).wait_for(timeout=60_000)
        page.locator(".kgv-panel").filter(has_text="Agent Cruz").first.wait_for(timeout=60_000)
        page.screenshot(path=str(artifacts / "curation_details_panel.png"))

        # the grade given to CRUZ before the merge counts for the merged entity
        inspect(page, url)
        assert grade_row(page, "CRUZ").count() == 0
        assert grade_row(page, "TAYLOR CRUZ").first.get_attribute("data-grade") == "3"

        # undo restores both
        page.goto(f"{url}/curation?view=Changes")
        for what in ("add alias", "merge 'TAYLOR CRUZ', 'CRUZ'", "merge 'SAM RIVERA', 'RIVERA'"):
            page.get_by_role("button", name="Undo last edit").click()
            notice(page, r"undo of #\d+ \(" + re.escape(what))
            wait_idle(page, 60)
        page.goto(f"{url}/curation?view=Duplicates")
        expander(page, "TAYLOR CRUZ ← CRUZ")
        expander(page, "SAM RIVERA ← RIVERA")
        inspect(page, url)
        assert grade_row(page, "CRUZ").first.get_attribute("data-grade") == "3"  # back on CRUZ itself
        assert not page.dialogs  # type: ignore[attr-defined]
