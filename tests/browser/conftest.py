"""Browser tier: `streamlit run app.py` on a free localhost port with a tmp data dir, driven by Debian chromium.

Start: `.venv/bin/pytest -m browser tests/browser` (needs /usr/bin/chromium: `bash scripts/install_browser`).
The server gets KG_DATA_DIR=<tmp dir with the demo graph and a hostile graph> and HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from retrieval.embedding import Embedder
from tests.app.graphs import HOSTILE_GRAPH, build_app_data_dir

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1680, "height": 1050}


GRAPH = ".kgv-root"  # the live graph view's root element (components/assets/graph/graph.js)
# every live graph on the page has drawn its current data (the view sets data-kg-drawn to the drawn revision)
ALL_GRAPHS_DRAWN = """() => [...document.querySelectorAll('.kgv-root')].every(
    r => r.dataset.kgDrawn && r.dataset.kgDrawn === r.dataset.kgRev)"""
# a graph drawn after `mark_graphs_stale` (a new search's graph, not the one it replaces)
FRESH_GRAPH_DRAWN = """() => [...document.querySelectorAll('.kgv-root')].some(
    r => r.dataset.kgDrawn && r.dataset.kgDrawn === r.dataset.kgRev && r.dataset.kgDrawn !== r.dataset.staleRev)"""


# Records when the main thread was last busy (a long task, >50 ms); `QUIET` is true after 500 ms without one.
RECORD_LONG_TASKS = """window.__kgBusyUntil = 0;
new PerformanceObserver(list => list.getEntries().forEach(e => {
    window.__kgBusyUntil = Math.max(window.__kgBusyUntil, e.startTime + e.duration); })
).observe({type: "longtask", buffered: true});"""
QUIET = "() => window.__kgBusyUntil === undefined || performance.now() - window.__kgBusyUntil > 500"


def mark_graphs_stale(page: Any) -> None:
    page.evaluate("""() => document.querySelectorAll('.kgv-root').forEach(
        r => { r.dataset.staleRev = r.dataset.kgDrawn || ''; })""")


def wait_graph_drawn(page: Any, timeout_ms: int = 30_000) -> None:
    """A live graph is on the page and every one has drawn its current data (vis-network's afterDrawing)."""
    page.locator(GRAPH + " canvas").first.wait_for(state="visible", timeout=timeout_ms)
    page.wait_for_function(ALL_GRAPHS_DRAWN, timeout=timeout_ms)


def node_point(page: Any, node_id: str) -> dict[str, float]:
    """Where a node is drawn, in page coordinates (from the view's vis-network)."""
    return page.evaluate("""id => { const r = document.querySelector('.kgv-root'); const n = r.kgNetwork;
        const p = n.canvasToDOM(n.getPositions([id])[id]);
        const b = r.querySelector('.kgv-canvas').getBoundingClientRect();
        return {x: b.left + p.x, y: b.top + p.y}; }""", node_id)


def graph_data(page: Any) -> dict[str, str]:
    """The live graph's data attributes (drawn revision, shown nodes, focus counts...)."""
    return page.evaluate("() => ({...document.querySelector('.kgv-root').dataset})")


def settle(page: Any) -> None:
    """Graphs drawn, the script run over, and the main thread quiet for 500 ms (needs RECORD_LONG_TASKS)."""
    page.wait_for_function(ALL_GRAPHS_DRAWN, timeout=120_000)
    page.get_by_test_id("stStatusWidget").wait_for(state="hidden", timeout=120_000)  # the script run is over
    page.wait_for_function(QUIET, timeout=30_000)  # and the page has finished drawing it


def ask(page: Any, url: str, question: str) -> float:
    """Open `url`, let the page settle (as a person reads it before typing: graphs drawn, the run over, and the
    main thread quiet for 500 ms; needs the `page` fixture's long-task recorder), type `question` into the Search
    box and press Enter; returns the perf_counter at Enter. The page's graphs are marked stale first, so
    `FRESH_GRAPH_DRAWN` waits for the answer's graph."""
    page.goto(url)
    box = page.get_by_placeholder("Ask a multi-hop question", exact=False)
    box.wait_for()
    settle(page)
    box.fill(question)
    mark_graphs_stale(page)
    start = time.perf_counter()
    box.press("Enter")
    return start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.25)
    raise RuntimeError(f"streamlit not healthy after {timeout_s}s:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="session")
def app_data_dir(tmp_path_factory: pytest.TempPathFactory, embedder: Embedder) -> Path:
    """The server's own copy of the data dir as built, before the AppTest tier wrote labels or imports to it (and
    AppTest in this process may hold the Milvus Lite / Kuzu locks on the one it uses)."""
    src = build_app_data_dir(tmp_path_factory, embedder, pristine=True)
    dst = tmp_path_factory.mktemp("browser-data") / "kg"
    shutil.copytree(src, dst, symlinks=True)  # catalog symlinks are relative, so the copy is self-contained
    return dst


@pytest.fixture(scope="session")
def app_url(app_data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app served by `streamlit run` on 127.0.0.1:<free port>; stopped at the end of the session."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} missing: run `bash scripts/install_browser`")
    with streamlit_app(app_data_dir, tmp_path_factory.mktemp("streamlit") / "server.log") as url:
        yield url


@contextmanager
def streamlit_app(data_dir: Path, log: Path, *args: str, **env_vars: str) -> Iterator[str]:
    """`streamlit run app.py` on 127.0.0.1:<free port> over `data_dir` (no Gemini key unless `env_vars` sets
    GEMINI_API_KEY; `args`: more `streamlit run` options, such as `--secrets.files`), stopped on exit."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "KG_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("GEMINI_API_KEY", None)
    env.update(env_vars)
    cmd = [
        sys.executable, "-m", "streamlit", "run", "app.py",
        "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
        "--browser.gatherUsageStats", "false", *args,
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_healthy(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def browser(app_url: str) -> Iterator[object]:
    """Debian chromium through Playwright; one warm-up load (the first load after start can be blank)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        warm = chromium.new_page(viewport=VIEWPORT)
        warm.goto(app_url)
        warm.get_by_test_id("stSidebar").wait_for(timeout=120_000)
        # the shell opens the graph (stores, embedder, CSR index) on the first view; the query box follows it
        warm.get_by_placeholder("Ask a multi-hop question", exact=False).wait_for(timeout=180_000)
        warm.close()
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: object, app_url: str) -> Iterator[object]:
    """A fresh page that records dialogs and every request URL (for the no-network-egress checks)."""
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[attr-defined]
    context.add_init_script(RECORD_LONG_TASKS)
    pg = context.new_page()
    pg.dialogs = []  # type: ignore[attr-defined]
    pg.requests = []  # type: ignore[attr-defined]

    def on_dialog(dialog: object) -> None:
        pg.dialogs.append(dialog.message)  # type: ignore[attr-defined]
        dialog.dismiss()  # type: ignore[attr-defined]

    pg.on("dialog", on_dialog)
    pg.on("request", lambda req: pg.requests.append(req.url))  # type: ignore[attr-defined]
    pg.set_default_timeout(30_000)
    yield pg
    context.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


__all__ = ["HOSTILE_GRAPH"]


def graph_upload(page: Any) -> Any:
    """The Data page's graph uploader (the documents panel below it has a .zip uploader of its own)."""
    return page.get_by_role("region", name="A graph folder, zipped").get_by_test_id("stFileUploaderDropzoneInput")
