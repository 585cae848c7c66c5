"""Browser benchmark of the Map page (headless Debian chromium: WebGL on SwiftShader, in software, so the frame
rates are a CPU floor, not what a GPU gives).

    .venv/bin/python scripts/map_bench.py [--graphs 1k,musique,100k] [--repeat 3] [--work-dir data/run/map-bench]

Builds each graph once (cached in --work-dir): `1k` = 1,000 entities / 10,000 relations and `100k` = 100,000
entities / 1,000,000 relations from `bench.synth` (the scale benchmark's power-law graphs, hash embedder), and
`musique` = ../shared/data/hipporag_musique_train ingested with --format hipporag (19,085 entities, MiniLM). Then
serves app.py on each with `streamlit run` on 127.0.0.1 and measures, as medians in ms (fps: frames drawn per
second):
- layout: the version's map layout, computed once (at ingest), in s;
- first map: navigation to /map to the whole map drawn, first in the server process (the map's arrays encoded
  then) and again in a fresh browser page (the server's cache warm); the message's size;
- pan / zoom: frames drawn per second for 3 s of real mouse input: dragging round a circle at the fitted zoom
  (communities for big graphs), wheel steps in and out (rebuilding what is drawn on the way), and dragging zoomed
  in among entities;
- click -> details: a click on an entity to its details panel (a round trip through Python);
- search -> lit: Enter in the map's search box to the search's marks drawn (the search runs on the server).
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, free_port, wait_healthy  # noqa: E402

MUSIQUE = ROOT.parent / "shared" / "data" / "hipporag_musique_train"
SYNTH = {"1k": (1_000, 10_000, 1_000), "100k": (100_000, 1_000_000, 100_000)}  # entities, relations, chunks
GRAPH = {"1k": "synth1k", "musique": "musique", "100k": "synth100k"}  # graph names (data dir: work/kgNAME)
SHOT_ENTITY = {"musique": "Arnold Schwarzenegger"}  # --shots: the entity found for the zoomed-in picture
TIMEOUT_MS = 600_000
DRAWN = """() => { const r = document.querySelector('.kgm-root');
    return r && r.dataset.kgDrawn && r.dataset.kgDrawn === r.dataset.kgRev && r.dataset.kgMode; }"""
# frames sigma draws (and the view's rebuilds) between COUNT and COUNTED, while real mouse input moves the map
COUNT = """() => { const m = document.querySelector('.kgm-root').kgMap; const c = window.__kgCount = {f: 0, b: 0};
    c.onFrame = () => { c.f++; }; m.sigma.on('afterRender', c.onFrame); c.rebuild = m.rebuild;
    m.rebuild = (...a) => { c.b++; return c.rebuild.apply(m, a); }; c.t0 = performance.now(); }"""
COUNTED = """() => { const m = document.querySelector('.kgm-root').kgMap; const c = window.__kgCount;
    m.sigma.off('afterRender', c.onFrame); m.rebuild = c.rebuild;
    return {fps: c.f / ((performance.now() - c.t0) / 1000), builds: c.b, mode: m.mode}; }"""
BOX = """() => { const b = document.querySelector('.kgm-root .kgm-canvas').getBoundingClientRect();
    return {x: b.left + b.width / 2, y: b.top + b.height / 2, w: b.width, h: b.height}; }"""
NEAR = """i => { const m = document.querySelector('.kgm-root').kgMap; m.centreOn(i, 0); }"""
POINT = """i => { const m = document.querySelector('.kgm-root').kgMap;
    const p = m.sigma.graphToViewport({x: m.model.x[i], y: m.model.y[i]});
    const b = m.canvasBox.getBoundingClientRect(); return {x: b.left + p.x, y: b.top + p.y}; }"""


def build(name: str, work: Path) -> tuple[Path, dict[str, str]]:
    """The data dir of graph `name` (built once) and the environment its app needs."""
    from retrieval.config import Settings
    from retrieval.embedding import load_embedder
    from retrieval.graph import catalog
    from retrieval.ingest.build import ingest

    data_dir = work / f"kg{name}"
    env = {} if name == "musique" else {"KG_EMBED_MODEL": "hash-384"}
    if GRAPH[name] in catalog.list_graphs(data_dir):
        return data_dir, env
    settings = Settings.from_env(env=env, data_dir=data_dir)
    if name == "musique":
        source = MUSIQUE
        fmt = "hipporag"
    else:
        from bench.synth import write_synth_bundle

        entities, relations, chunks = SYNTH[name]
        source = work / f"synth-{name}"
        if not (source / "relations.jsonl").is_file():
            write_synth_bundle(source, entities=entities, relations=relations, chunks=chunks, seed=0)
        fmt = "bundle"
    report = ingest(settings, source, fmt=fmt, name=GRAPH[name], embedder=load_embedder(settings.embed_model),
                    progress=True)
    print(report.summary(), file=sys.stderr)
    return data_dir, env


def question(name: str, data_dir: Path, env: dict[str, str]) -> str:
    """A question for the search box: MuSiQue's first; for a synthetic graph, how two of its hubs relate."""
    if name == "musique":
        rows = json.loads((MUSIQUE / "musique_train.json").read_text(encoding="utf-8"))
        return str(rows[0]["question"])
    from retrieval.config import Settings
    from retrieval.graph import catalog
    from retrieval.graph.runtime import KG

    kg = KG(Settings.from_env(env=env, data_dir=data_dir), catalog.resolve(data_dir, GRAPH[name]),
            None)  # type: ignore[arg-type]
    try:
        names, degree = kg.index.arrays.node_names, kg.index.und_csr.indptr
        hubs = sorted(range(len(names)), key=lambda i: -(degree[i + 1] - degree[i]))[:2]
        return f"How does {names[hubs[0]]} relate to {names[hubs[1]]}?"
    finally:
        kg.close()


def move(page: Any, kind: str, seconds: float = 3.0) -> dict[str, Any]:
    """Frames per second while the mouse pans (drags round a circle) or zooms (wheel steps in, then out)."""
    box = page.evaluate(BOX)
    cx, cy = box["x"], box["y"]
    page.mouse.move(cx, cy)
    page.evaluate(COUNT)
    end = time.perf_counter() + seconds
    if kind == "pan":
        page.mouse.down()
        step = 0
        while time.perf_counter() < end:
            step += 1
            angle = step * 0.35
            page.mouse.move(cx + 120 * math.cos(angle) - 120, cy + 80 * math.sin(angle))
        page.mouse.up()
    else:
        step = 0
        while time.perf_counter() < end:
            page.mouse.wheel(0, -200 if (step // 4) % 2 == 0 else 200)  # four steps in, four out
            step += 1
            time.sleep(0.12)
    time.sleep(0.3)  # the last animation step
    return dict(page.evaluate(COUNTED))


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def measure(browser: Any, url: str, name: str, query: str, repeat: int, shots: Path | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"graph": name}
    stage = "warm-up"
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(TIMEOUT_MS)
    got = {"n": 0}
    page.on("websocket", lambda ws: ws.on("framereceived", lambda p: got.__setitem__(
        "n", got["n"] + (len(p) if isinstance(p, bytes | str) else 0))))
    try:
        page.goto(url + "/")  # the shell opens the graph (stores, index) on the first view
        page.get_by_placeholder("Ask a multi-hop question", exact=False).wait_for(timeout=TIMEOUT_MS)
        stage = "first map"
        got["n"] = 0
        start = time.perf_counter()
        page.goto(url + "/map")
        page.wait_for_function(DRAWN, timeout=TIMEOUT_MS)
        row["first_cold"] = (time.perf_counter() - start) * 1000
        row["bytes"] = got["n"]
        ds = page.evaluate("() => ({...document.querySelector('.kgm-root').dataset})")
        row["entities"], row["mode"], row["prep"] = int(ds["kgEntities"]), ds["kgMode"], int(ds["kgPrepMs"])
        warm = []
        for _ in range(repeat):
            fresh = browser.new_page(viewport=VIEWPORT)
            fresh.set_default_timeout(TIMEOUT_MS)
            fresh.goto(url + "/")
            fresh.get_by_placeholder("Ask a multi-hop question", exact=False).wait_for(timeout=TIMEOUT_MS)
            start = time.perf_counter()
            fresh.goto(url + "/map")
            fresh.wait_for_function(DRAWN, timeout=TIMEOUT_MS)
            warm.append((time.perf_counter() - start) * 1000)
            fresh.close()
        row["first_warm"] = warm
        if shots is not None:  # the README's pictures: the whole map, then a hub's neighbourhood zoomed in
            page.locator(".kgm-root").screenshot(path=str(shots / f"map-{name}-out.png"))
        stage = "pan and zoom"
        time.sleep(1.0)
        row["pan_out"] = [move(page, "pan") for _ in range(repeat)]
        row["zoom"] = [move(page, "zoom") for _ in range(repeat)]
        page.evaluate("() => document.querySelector('.kgm-root').kgMap.fit()")
        page.wait_for_function(DRAWN, timeout=TIMEOUT_MS)
        stage = "click"
        hubs = page.evaluate("""() => { const m = document.querySelector('.kgm-root').kgMap.model;
            return [...m.degree.keys()].sort((a, b) => m.degree[b] - m.degree[a]).slice(0, 8); }""")
        page.evaluate(NEAR, hubs[0])
        page.wait_for_function(DRAWN, timeout=TIMEOUT_MS)
        time.sleep(0.5)
        if shots is not None:  # zoomed in, as an analyst gets there: the find box, Enter (centred and selected)
            found = page.get_by_placeholder("Find an entity")
            found.fill(SHOT_ENTITY.get(name) or page.evaluate(
                "i => document.querySelector('.kgm-root').kgMap.model.names[i]", hubs[0]))
            found.press("Enter")
            page.wait_for_function("() => document.querySelector('.kgm-root').dataset.kgMode === 'entities'",
                                   timeout=60_000)
            time.sleep(1.5)
            page.locator(".kgm-root").screenshot(path=str(shots / f"map-{name}-in.png"))
            page.locator(".kgm-root .kgv-close").click()
            page.evaluate(NEAR, hubs[0])
            page.wait_for_function(DRAWN, timeout=TIMEOUT_MS)
        row["pan_in"] = [move(page, "pan") for _ in range(repeat)]
        clicks = []
        for i in hubs[1: repeat + 1]:
            page.evaluate(NEAR, i)
            page.wait_for_function(DRAWN, timeout=TIMEOUT_MS)
            time.sleep(0.3)
            pt = page.evaluate(POINT, i)
            start = time.perf_counter()
            page.mouse.click(pt["x"], pt["y"])
            page.wait_for_function("i => { const p = document.querySelector('.kgm-root .kgv-panel');"
                                   " return !p.hidden && p.dataset.id && document.querySelector('.kgm-root')"
                                   ".kgMap.selected === i; }", arg=i, timeout=TIMEOUT_MS)
            clicks.append((time.perf_counter() - start) * 1000)
            page.locator(".kgm-root .kgv-close").click()
        row["click"] = clicks
        stage = "search"
        box = page.get_by_placeholder("Ask a question", exact=False)
        box.fill(query)
        start = time.perf_counter()
        box.press("Enter")
        page.wait_for_function("() => { const r = document.querySelector('.kgm-root');"
                               " return r.dataset.kgLights && r.dataset.kgDrawn === r.dataset.kgRev; }",
                               timeout=TIMEOUT_MS)
        page.wait_for_function(DRAWN, timeout=TIMEOUT_MS)
        row["search"] = (time.perf_counter() - start) * 1000
        row["lit"] = page.evaluate("() => document.querySelector('.kgm-root').dataset.kgStatus")
    except Exception as exc:  # noqa: BLE001 - a benchmark reports what failed and goes on
        row["error"] = f"{stage}: " + str(exc).splitlines()[0][:200]
        if os.environ.get("MAP_BENCH_DEBUG"):
            raise
    finally:
        page.close()
    return row


def fps(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "—"
    modes = sorted({r["mode"] for r in runs})
    return f"{median([r['fps'] for r in runs]):.0f} ({', '.join(modes)})"


def table(rows: list[dict[str, Any]], layouts: dict[str, float]) -> str:
    lines = ["| graph | entities | layout (s, once per version) | first map: server cold / warm (ms) | message | "
             "pan, zoomed out (fps) | zoom in and out (fps) | pan among entities (fps) | click → details (ms) | "
             "search → lit (ms) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "first_cold" not in r:
            failed = f"failed: {r.get('error')}"
            lines.append(f"| {r['graph']} | | {layouts.get(r['graph'], 0):.1f} | {failed} | | | | | | |")
            continue
        lines.append(
            f"| {r['graph']} | {r['entities']:,} | {layouts.get(r['graph'], 0):.1f} | {r['first_cold']:,.0f} / "
            f"{median(r.get('first_warm', [])):,.0f} | {r['bytes'] / 1e6:.1f} MB | {fps(r.get('pan_out', []))} | "
            f"{fps(r.get('zoom', []))} | {fps(r.get('pan_in', []))} | {median(r.get('click', [])):,.0f} | "
            f"{r.get('search', float('nan')):,.0f} |" + (f" failed at {r['error']}" if "error" in r else ""))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", default="1k,musique,100k")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, default=ROOT / "data" / "run" / "map-bench")
    parser.add_argument("--shots", type=Path, default=None,
                        help="save each graph's map zoomed out and in as DIR/map-NAME-out.png and -in.png")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from retrieval.graph import catalog
    from retrieval.graph.layout import load_layout

    args.work_dir.mkdir(parents=True, exist_ok=True)
    rows, layouts = [], {}
    load_start = os.getloadavg()
    for name in args.graphs.split(","):
        data_dir, extra_env = build(name, args.work_dir)
        handle = catalog.resolve(data_dir, GRAPH[name])
        stored = load_layout(handle.dir)
        query = question(name, data_dir, extra_env)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = args.work_dir / f"server-{name}.log"
        env = {**os.environ, "KG_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1", **extra_env}
        env.pop("GEMINI_API_KEY", None)
        cmd = [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
               "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_healthy(url, proc, log, timeout_s=300)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                warm = browser.new_page(viewport=VIEWPORT)  # the first load after start can be blank
                warm.goto(url + "/")
                warm.get_by_test_id("stSidebarNav").wait_for(timeout=TIMEOUT_MS)
                warm.close()
                rows.append(measure(browser, url, name, query, args.repeat, args.shots))
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        again = load_layout(handle.dir)  # a version built before layouts were stored got one on first open
        layouts[name] = (again or stored).seconds if (again or stored) else float("nan")
        print(f"{name}: {rows[-1]}", file=sys.stderr)
    load_end = os.getloadavg()
    print(f"map benchmark, {time.strftime('%Y-%m-%d')}: load average {load_start[0]:.1f} / {load_start[1]:.1f} / "
          f"{load_start[2]:.1f} at the start, {load_end[0]:.1f} at the end (1/5/15 min); medians of {args.repeat}")
    print(table(rows, layouts))


if __name__ == "__main__":
    main()
