"""Cancel an import in Debian chromium: the Data page's Cancel button stops a running import mid-embedding, says so,
and leaves the graphs as they were (no new graph, no half-built version directory)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from bench.synth import write_synth_bundle
from retrieval.graph import catalog
from tests.browser.conftest import graph_upload
from tests.browser.test_import_formats import ENABLED, zip_folder

pytestmark = pytest.mark.browser
# a stage line of the status box that says an embedding is under way (count so far, not yet complete)
EMBEDDING = """() => [...document.querySelectorAll('[data-testid="stExpanderDetails"] p, .stMarkdown p')]
    .some(p => p.innerText.startsWith('… embedding'))"""


def test_cancel_stops_an_import_and_keeps_the_graphs(
    page: Any, app_url: str, app_data_dir: Path, tmp_path: Path, artifacts: Path
) -> None:
    # texts no graph of the data dir holds (its vector cache answers for none): the import has to embed them all
    write_synth_bundle(tmp_path / "slow", entities=3_000, relations=6_000, chunks=600, seed=32)
    archive = zip_folder(tmp_path / "slow", tmp_path / "cancelled.zip")
    before = sorted(p.name for p in (app_data_dir / "versions").iterdir())
    graphs = catalog.list_graphs(app_data_dir)
    page.goto(app_url + "/data")
    page.get_by_text("Import a graph").wait_for(timeout=90_000)
    graph_upload(page).set_input_files(str(archive))
    page.wait_for_function("n => [...document.querySelectorAll('input')].some(i => i.value === n)", arg="cancelled",
                           timeout=60_000)
    page.get_by_test_id("stButtonGroup").get_by_text("bundle", exact=True).click()
    page.wait_for_function(ENABLED, arg="Import", timeout=60_000)
    page.get_by_role("button", name="Import", exact=True).click()
    page.wait_for_function(EMBEDDING, timeout=300_000)  # mid-way: the graph store is written, vectors are coming
    page.screenshot(path=str(artifacts / "import_cancel_running.png"))
    page.get_by_role("button", name="Cancel import").click()
    page.get_by_text("was cancelled", exact=False).wait_for(timeout=120_000)
    # the stopped run discards its build while the next run draws the page: wait for that, with a deadline
    deadline = time.monotonic() + 120
    while sorted(p.name for p in (app_data_dir / "versions").iterdir()) != before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert catalog.list_graphs(app_data_dir) == graphs  # no new graph
    assert sorted(p.name for p in (app_data_dir / "versions").iterdir()) == before  # no .build-* left
    assert page.get_by_role("link", name="Open cancelled in Search").count() == 0
    page.screenshot(path=str(artifacts / "import_cancel_done.png"))
