"""Browser benchmark of the graph view: the old iframe view (pyvis HTML per draw) against the live component.

    .venv/bin/python scripts/graph_bench.py [--sizes 100,1000,5000] [--repeat 3] [--work-dir data/run/graph-bench]

Builds (once, cached in --work-dir) a power-law graph of 6,000 entities and 12,000 relations with the hash
embedder, serves scripts/graph_bench_app.py with `streamlit run` on 127.0.0.1, and drives Debian chromium
(Playwright, the browser tier's arguments). For N nodes (a BFS from a hub, at most 2N relations) it prints, as
medians in ms: first load (navigation to drawn), redraw (a click that sends another subgraph of the same size
to drawn, and the bytes the websocket carried), click on a node to its details panel (the live view: an event
to Python and back; the old view has no details), one zoom step and one pan step to the next frame drawn, and a
double-click to the expanded neighbours drawn (live view only). Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, free_port, wait_healthy  # noqa: E402

ENTITIES, RELATIONS = 6000, 12_000
TIMEOUT_MS = 180_000

NEW_DRAWN = """rev => { const r = document.querySelector('.kgv-root');
    return r && r.dataset.kgDrawn && r.dataset.kgDrawn === r.dataset.kgRev && r.dataset.kgRev !== rev; }"""
OLD_DRAWN = """() => [...document.querySelectorAll('[data-testid="stIFrame"]')].some(f => {
    const b = f.contentDocument && f.contentDocument.body;
    return b && !b.dataset.stale && b.dataset.kgDrawn === '1'; })"""
OLD_STALE = """() => document.querySelectorAll('[data-testid="stIFrame"]').forEach(f => {
    const b = f.contentDocument && f.contentDocument.body; if (b) b.dataset.stale = '1'; })"""
# the network and where its canvas is on the page (read again before each click: zooming may scroll the page)
NET = {
    "new": """() => { const r = document.querySelector('.kgv-root'); window.__net = r.kgNetwork;
        window.__where = () => r.querySelector('.kgv-canvas').getBoundingClientRect();
        const b = window.__where(); return {x: b.left, y: b.top, w: b.width, h: b.height}; }""",
    "old": """() => { const f = [...document.querySelectorAll('[data-testid="stIFrame"]')]
        .find(x => !x.contentDocument.body.dataset.stale);
        const w = f.contentWindow; window.__net = w.network;
        window.__where = () => { const fb = f.getBoundingClientRect();
            const b = w.document.querySelector('#mynetwork').getBoundingClientRect();
            return {left: fb.left + b.left, top: fb.top + b.top, width: b.width, height: b.height}; };
        const b = window.__where(); return {x: b.left, y: b.top, w: b.width, h: b.height}; }""",
}
NODE_AT = """async i => {
    const drawn = new Promise(r => { window.__net.once('afterDrawing', r); setTimeout(r, 5000); });
    window.__net.fit({animation: false}); // the node is on screen whatever zoom and pan did before
    await drawn; // and that redraw is over before the click is timed
    const ids = window.__net.body.data.nodes.getIds(); const id = ids[Math.min(i, ids.length - 1)];
    const p = window.__net.canvasToDOM(window.__net.getPositions([id])[id]); const o = window.__where();
    return {id, x: o.left + p.x, y: o.top + p.y}; }"""
ARM_FRAME = """() => { window.__t0 = performance.now();
    window.__frame = new Promise(r => window.__net.once('afterDrawing', () => r(performance.now() - window.__t0))); }"""


def build_graph(work: Path) -> Path:
    """The benchmark graph (cached): 6,000 entities, 12,000 relations, hash embedder."""
    from bench.synth import write_synth_bundle
    from retrieval.config import Settings
    from retrieval.embedding import load_embedder
    from retrieval.graph import catalog
    from retrieval.ingest.build import build_graph as build
    from retrieval.ingest.bundle import load_bundle

    data_dir = work / "kg"
    if "bench" in catalog.list_graphs(data_dir):
        return data_dir
    bundle = work / "bundle"
    write_synth_bundle(bundle, entities=ENTITIES, relations=RELATIONS, chunks=600, seed=3)
    settings = Settings.from_env(env={}, data_dir=data_dir, embed_model="hash-384")
    build(settings, load_bundle(bundle), "bench", embedder=load_embedder("hash-384"), progress=False)
    return data_dir


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.0f}" if values else "—"


class Bytes:
    """Websocket bytes received by the page since `reset`."""

    def __init__(self, page: Any) -> None:
        self.n = 0
        page.on("websocket", lambda ws: ws.on("framereceived", self._add))

    def _add(self, payload: Any) -> None:
        self.n += len(payload) if isinstance(payload, bytes | str) else 0

    def take(self) -> int:
        n, self.n = self.n, 0
        return n


def timed(action: Callable[[], None], wait: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    wait()
    return (time.perf_counter() - start) * 1000


def frame_ms(page: Any, act: Callable[[], None]) -> float:
    """Milliseconds from just before `act` (real mouse input) to the next frame vis-network draws."""
    page.evaluate(ARM_FRAME)
    act()
    return float(page.evaluate("async () => await window.__frame"))


def measure(browser: Any, url: str, view: str, n: int, repeat: int) -> dict[str, Any]:
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(TIMEOUT_MS)
    ws = Bytes(page)
    row: dict[str, Any] = {"view": view, "n": n}

    def drawn(rev: str = "") -> None:
        if view == "new":
            page.wait_for_function(NEW_DRAWN, arg=rev, timeout=TIMEOUT_MS)
        else:
            page.wait_for_function(OLD_DRAWN, timeout=TIMEOUT_MS)

    def rev() -> str:
        return str(page.evaluate("() => (document.querySelector('.kgv-root') || {dataset: {}}).dataset.kgRev || ''"))

    stage = "warm-up"
    try:
        page.goto(f"{url}/?view={view}&n={n}&warm={repeat + 1}")
        page.get_by_text("warm", exact=True).wait_for(timeout=TIMEOUT_MS)
        ws.take()
        stage = "first load"
        row["first"] = timed(lambda: page.goto(f"{url}/?view={view}&n={n}"), lambda: drawn())
        row["first_bytes"] = ws.take()
        redraws, sent = [], []
        for _ in range(repeat):
            before = rev()
            if view == "old":
                page.evaluate(OLD_STALE)
            ws.take()
            redraws.append(timed(lambda: page.get_by_role("button", name="Next").click(), lambda b=before: drawn(b)))
            sent.append(ws.take())
        row["redraw"], row["bytes"] = redraws, sent
        row["shown"] = page.get_by_text(re.compile(r"^hub \d+: ")).first.inner_text(timeout=60_000)
        page.evaluate(NET[view])
        if view == "new":
            clicks, expands = [], []
            for i in range(repeat):
                stage = "click"
                node = page.evaluate(NODE_AT, i)
                clicks.append(timed(lambda nd=node: page.mouse.click(nd["x"], nd["y"]),
                                    lambda nd=node: page.wait_for_function(
                                        "() => { const p = document.querySelector('.kgv-panel');"
                                        " return !p.hidden && p.dataset.id; }", timeout=30_000)))
                page.locator(".kgv-close").click()
                page.wait_for_function("() => document.querySelector('.kgv-panel').hidden")
            for i in range(repeat):
                stage = "double-click"
                page.evaluate(NET[view])
                node = page.evaluate(NODE_AT, 10_000 - i)  # the last nodes: BFS's frontier has neighbours left
                expands.append(timed(lambda nd=node: page.mouse.dblclick(nd["x"], nd["y"]),
                                     lambda: page.wait_for_function(
                                         "() => { const r = document.querySelector('.kgv-root');"
                                         " const b = [...r.querySelectorAll('.kgv-btn')]"
                                         ".find(x => x.textContent.includes('Back'));"
                                         " return !b.disabled && r.dataset.kgDrawn === r.dataset.kgRev; }",
                                         timeout=30_000)))
                stage = "back"
                page.locator(".kgv-root").get_by_role("button", name="↶ Back").click()
                page.wait_for_function("() => [...document.querySelectorAll('.kgv-btn')]"
                                       ".find(x => x.textContent.includes('Back')).disabled")
            row["click"], row["expand"] = clicks, expands
        stage = "zoom and pan"
        box = page.evaluate(NET[view])
        centre = (box["x"] + box["w"] / 2, box["y"] + box["h"] / 2)
        page.mouse.move(*centre)
        row["zoom"] = [frame_ms(page, lambda: page.mouse.wheel(0, -120)) for _ in range(repeat)]
        pans = []
        for _ in range(repeat):
            page.mouse.move(*centre)
            page.mouse.down()
            page.mouse.move(centre[0] + 20, centre[1] + 10)
            pans.append(frame_ms(page, lambda: page.mouse.move(centre[0] + 80, centre[1] + 40)))
            page.mouse.up()
        row["pan"] = pans
    except Exception as exc:  # noqa: BLE001 - a benchmark reports what failed and goes on
        row["error"] = f"{stage}: " + str(exc).splitlines()[0][:160]
    finally:
        page.close()
    return row


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| nodes (relations) | view | first load | redraw: data → drawn | bytes per redraw | click → details | "
            "zoom step | pan step | double-click → expanded |\n|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        if "error" in r and "redraw" not in r:
            lines.append(f"| {r['n']:,} | {r['view']} | failed: {r['error']} | | | | | | |")
            continue
        kb = f"{statistics.median(r['bytes']) / 1024:,.0f} kB" if r.get("bytes") else "—"
        label = "live component" if r["view"] == "new" else "old iframe (pyvis)"
        shown = r.get("shown", "").split(": ")[-1].replace(" nodes, ", " / ").replace(" relations", "")
        lines.append(f"| {r['n']:,} ({shown}) | {label} | {r['first']:.0f} | {median(r['redraw'])} | {kb} | "
                     f"{median(r.get('click', []))} | {median(r.get('zoom', []))} | {median(r.get('pan', []))} | "
                     f"{median(r.get('expand', []))} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--views", default="old,new")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, default=ROOT / "data" / "run" / "graph-bench")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    args.work_dir.mkdir(parents=True, exist_ok=True)
    data_dir = build_graph(args.work_dir)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = args.work_dir / "server.log"
    env = {**os.environ, "KG_DATA_DIR": str(data_dir), "KG_EMBED_MODEL": "hash-384", "HF_HUB_OFFLINE": "1",
           "KG_GRAPH": "bench"}
    env.pop("GEMINI_API_KEY", None)
    cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "scripts" / "graph_bench_app.py"),
           "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
           "--browser.gatherUsageStats", "false", "--runner.postScriptGC", "false"]
    load_start = os.getloadavg()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    rows = []
    try:
        wait_healthy(url, proc, log)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            warm = browser.new_page(viewport=VIEWPORT)
            warm.goto(f"{url}/?view=new&n=100")
            warm.wait_for_function(NEW_DRAWN, arg="", timeout=TIMEOUT_MS)
            warm.close()
            for n in (int(s) for s in args.sizes.split(",")):
                for view in args.views.split(","):
                    rows.append(measure(browser, url, view, n, args.repeat))
                    print(f"{view} {n}: {rows[-1]}", file=sys.stderr)
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    load_end = os.getloadavg()
    print(f"graph view benchmark, {time.strftime('%Y-%m-%d')}: load average {load_start[0]:.1f} / {load_start[1]:.1f}"
          f" / {load_start[2]:.1f} at the start, {load_end[0]:.1f} at the end (1/5/15 min); medians of "
          f"{args.repeat}, ms")
    print(table(rows))


if __name__ == "__main__":
    main()
