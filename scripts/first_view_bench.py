"""How long a first view shows grey skeletons: `streamlit run` started afresh on a data dir, Debian chromium opens
the app's root (Search), and the time from navigation to each of these is measured (ms):

- content: the page's own title is drawn (until then the main area shows skeletons);
- form: the query box is there to type into;
- ready: the page is complete (the schema graph drawn; the graph opened and warmed up on the way).

A cold view is the first of a fresh server (it opens the graph); a warm view is a new browser session afterwards.

    .venv/bin/python scripts/first_view_bench.py --data-dir DIR [--runs 3]

DIR holds the demo graph (`python -m retrieval demo --data-dir DIR`). Run it from another checkout to compare.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import ALL_GRAPHS_DRAWN, CHROMIUM, CHROMIUM_ARGS, VIEWPORT, streamlit_app  # noqa: E402

TITLE = "Search the knowledge graph"
BOX = "Ask a multi-hop question"


def view(browser: object, url: str) -> dict[str, float]:
    """One page view in a new browser session: ms from navigation to content, form and ready."""
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[attr-defined]
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url, wait_until="commit")
    marks = {}
    page.get_by_text(TITLE).wait_for(timeout=180_000)
    marks["content"] = (time.perf_counter() - start) * 1000
    page.get_by_placeholder(BOX, exact=False).wait_for(timeout=180_000)
    marks["form"] = (time.perf_counter() - start) * 1000
    page.locator(".kgv-root canvas").first.wait_for(timeout=180_000)
    page.wait_for_function(ALL_GRAPHS_DRAWN, timeout=180_000)
    marks["ready"] = (time.perf_counter() - start) * 1000
    context.close()
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    rows: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for run in range(args.runs):
            log = Path(f"/tmp/first-view-{run}.log")
            with streamlit_app(args.data_dir, log) as url:
                rows["cold"].append(view(browser, url + "/"))
                rows["warm"].append(view(browser, url + "/"))
            print(f"run {run + 1}: cold {rows['cold'][-1]}, warm {rows['warm'][-1]}", flush=True)
        browser.close()
    with open("/proc/loadavg") as f:
        load = " / ".join(f.read().split()[:3])
    print(f"\nmedian of {args.runs} (ms), checkout {ROOT.name}, load average {load}")
    print("| view | content (skeletons until) | form | ready |")
    print("|---|---|---|---|")
    for kind, marks in rows.items():
        print(f"| {kind} | " + " | ".join(f"{statistics.median(m[k] for m in marks):,.0f}"
                                          for k in ("content", "form", "ready")) + " |")


if __name__ == "__main__":
    main()
